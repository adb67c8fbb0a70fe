// buffer_digest: see device.hpp. The CUDA device computes the same function in its ke_digest kernel.
#include <cstring>

#include "kernelevolve/device.hpp"

namespace kernelevolve {

namespace {
inline std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
}  // namespace

std::uint64_t buffer_digest(const void* bytes, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(bytes);
  const std::size_t words = n / 8;
  std::uint64_t sum = 0;
  for (std::size_t k = 0; k < words; ++k) {
    std::uint64_t w;
    std::memcpy(&w, p + 8 * k, 8);  // little-endian hosts only, like every device we support
    sum += mix(w + mix(k));
  }
  if (n % 8) {
    std::uint64_t w = 0;
    std::memcpy(&w, p + 8 * words, n % 8);
    sum += mix(w + mix(words));
  }
  return sum;
}

}  // namespace kernelevolve
