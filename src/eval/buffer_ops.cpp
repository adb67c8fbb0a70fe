#include "eval/buffer_ops.hpp"

#include "eval/buffers.hpp"

namespace kernelevolve::eval {

namespace {
// The buffer's elements as the host sees them: the memory itself, or `copy` filled from the device.
ArrayView host_view(const Buffer& buffer, DType dtype, std::size_t count, HostArray& copy, bool download) {
  if (void* memory = buffer.host_address()) return {dtype, count, static_cast<unsigned char*>(memory)};
  copy = HostArray(dtype, count);
  if (download) buffer.download(copy.bytes.data(), copy.size_bytes());
  return copy.view();
}
}  // namespace

void fill_random(Device& device, Buffer& buffer, DType dtype, std::size_t count, const InputDist& dist,
                 std::uint64_t seed) {
  if (device.fill_random(buffer, dtype, count, dist, seed)) return;
  HostArray copy;
  fill_random(host_view(buffer, dtype, count, copy, /*download=*/false), dist, seed);
  if (!buffer.host_address()) buffer.upload(copy.bytes.data(), copy.size_bytes());
}

Comparison compare(Device& device, const Buffer& got, const Buffer& expected, DType dtype, std::size_t count,
                   const Tolerance& tol) {
  Comparison result;
  if (device.compare(got, expected, dtype, count, tol, result)) return result;
  HostArray got_copy, expected_copy;
  return compare(host_view(got, dtype, count, got_copy, true), host_view(expected, dtype, count, expected_copy, true),
                 count, tol);
}

std::uint64_t digest(Device& device, const Buffer& buffer, std::size_t bytes) {
  std::uint64_t result = 0;
  if (device.digest(buffer, bytes, result)) return result;
  if (const void* memory = buffer.host_address()) return buffer_digest(memory, bytes);
  std::vector<unsigned char> copy(bytes);
  buffer.download(copy.data(), bytes);
  return buffer_digest(copy.data(), bytes);
}

void poison(Buffer& buffer, DType dtype) {
  static const unsigned char nan_pattern[2] = {0xf8, 0x7f};
  static const unsigned char int_pattern[1] = {0x5b};
  if (is_float(dtype)) {
    buffer.fill(nan_pattern, 2);
  } else {
    buffer.fill(int_pattern, 1);
  }
}

}  // namespace kernelevolve::eval
