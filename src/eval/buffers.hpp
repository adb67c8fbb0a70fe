// Host-side typed arrays for the fitness protocol: random inputs from several distributions,
// NaN poisoning, and the element-wise comparison that keeps the worst element. The evaluator uses
// these where a device cannot do the same work itself (Device::fill_random, compare, digest).
#pragma once
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "kernelevolve/device.hpp"
#include "kernelevolve/spec.hpp"

namespace kernelevolve::eval {

// A timed call's input of this many bytes or fewer (or of one element) is drawn afresh just before the call;
// a larger one is copied, rotated, from a base copy (workload_run.cpp). Below it a draw is cheaper than
// the bookkeeping. The model's prompt says which its inputs are, and so where they sit in the caches.
inline constexpr std::size_t kDrawnAfreshBytes = 64 * 1024;

// Typed elements in memory the host can address: a HostArray's, or a CPU device buffer's own.
struct ArrayView {
  DType dtype = DType::f32;
  std::size_t count = 0;
  unsigned char* bytes = nullptr;
  double get(std::size_t i) const;
  void set(std::size_t i, double value) const;
};

struct HostArray {
  DType dtype = DType::f32;
  std::size_t count = 0;
  std::vector<unsigned char> bytes;

  HostArray() = default;
  HostArray(DType type, std::size_t n) : dtype(type), count(n), bytes(n * dtype_size(type)) {}
  std::size_t size_bytes() const { return bytes.size(); }
  ArrayView view() const { return {dtype, count, const_cast<unsigned char*>(bytes.data())}; }
  double get(std::size_t i) const { return view().get(i); }
  void set(std::size_t i, double value) { view().set(i, value); }
};

// Which distribution a trial draws from. Trial 0 uses the spec's own (resolved: Spec::input_distribution);
// later trials cycle through others (signed, heavy-tailed, shifted) so an output that ignores its inputs,
// or only works for one range, fails. Integer inputs cycle within their range: uniform, edge-heavy,
// repeated, sorted.
InputDist trial_distribution(const InputDist& spec_dist, int trial);
// One element of an integer draw (kinds integers, edges, repeated; sorted or not) at index i of n, from
// two uniform numbers in [0, 1) and the repeated family's four values (ascending). Always in [a, b].
double integer_draw(const InputDist& dist, std::size_t i, std::size_t n, double u, double u2, const double pool[4]);
// Draws every element from `dist`, a function of `seed` alone.
void fill_random(const ArrayView& array, const InputDist& dist, std::uint64_t seed);
inline void fill_random(HostArray& array, const InputDist& dist, std::mt19937_64& rng) {
  fill_random(array.view(), dist, rng());
}
// Fills with a value no honest kernel leaves behind: NaN for floats, a fixed odd pattern for integers.
void poison(HostArray& array);

using CompareResult = Comparison;
// The first `count` elements of both, as Comparison (device.hpp) says.
CompareResult compare(const ArrayView& got, const ArrayView& expected, std::size_t count, const Tolerance& tol);
// Arrays of different lengths never pass.
CompareResult compare(const HostArray& got, const HostArray& expected, const Tolerance& tol);

float half_to_float(std::uint16_t h);
std::uint16_t float_to_half(float f);
float bf16_to_float(std::uint16_t b);
std::uint16_t float_to_bf16(float f);

}  // namespace kernelevolve::eval
