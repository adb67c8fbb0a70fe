// Host-side typed arrays for the fitness protocol: random inputs from several distributions,
// NaN poisoning, and the element-wise comparison that keeps the worst element.
#pragma once
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "kernelevolve/spec.hpp"

namespace kernelevolve::eval {

struct HostArray {
  DType dtype = DType::f32;
  std::size_t count = 0;
  std::vector<unsigned char> bytes;

  HostArray() = default;
  HostArray(DType type, std::size_t n) : dtype(type), count(n), bytes(n * dtype_size(type)) {}
  std::size_t size_bytes() const { return bytes.size(); }
  double get(std::size_t i) const;
  void set(std::size_t i, double value);
};

// Which distribution a trial draws from. Trial 0 uses the spec's own; later trials cycle through
// others (signed, heavy-tailed, shifted) so an output that ignores its inputs, or only works for
// one range, fails.
InputDist trial_distribution(const InputDist& spec_dist, int trial);
void fill_random(HostArray& array, const InputDist& dist, std::mt19937_64& rng);
// Fills with a value no honest kernel leaves behind: NaN for floats, a fixed odd pattern for integers.
void poison(HostArray& array);

struct CompareResult {
  bool pass = true;
  std::int64_t worst_index = -1;
  double got = 0, expected = 0;
  double excess = -1e300;  // largest |got-expected| - (atol + rtol*|expected|); > 0 fails
};
// |got - expected| <= atol + rtol*|expected| element-wise; NaN in `got` never passes (NaN expected
// matches only NaN); infinities must match exactly.
CompareResult compare(const HostArray& got, const HostArray& expected, const Tolerance& tol);

float half_to_float(std::uint16_t h);
std::uint16_t float_to_half(float f);
float bf16_to_float(std::uint16_t b);
std::uint16_t float_to_bf16(float f);

}  // namespace kernelevolve::eval
