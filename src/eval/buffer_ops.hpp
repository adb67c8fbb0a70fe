// The verification work of the fitness protocol on device buffers: drawing inputs, comparing outputs
// and digesting contents. Done by the device where it can (Device::fill_random, compare, digest), so
// that a GPU's data stays on the GPU; else on the host, in place where the host can address the buffer
// (the CPU device) and through a copy where it cannot.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernelevolve/device.hpp"

namespace kernelevolve::eval {

void fill_random(Device& device, Buffer& buffer, DType dtype, std::size_t count, const InputDist& dist,
                 std::uint64_t seed);
Comparison compare(Device& device, const Buffer& got, const Buffer& expected, DType dtype, std::size_t count,
                   const Tolerance& tol);
std::uint64_t digest(Device& device, const Buffer& buffer, std::size_t bytes);
// Fills a buffer with the poison an unwritten element is caught by: NaN for every float type (0x7ff8 repeated
// is a NaN as f16, bf16, f32 and f64), a fixed byte for integers.
void poison(Buffer& buffer, DType dtype);

}  // namespace kernelevolve::eval
