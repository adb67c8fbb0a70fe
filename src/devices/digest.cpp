// buffer_digest: see device.hpp. The CUDA device computes the same function in its ke_digest kernel.
#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "kernelevolve/device.hpp"

namespace kernelevolve {

namespace {
inline std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The terms of words [first, last).
std::uint64_t sum_words(const unsigned char* p, std::size_t first, std::size_t last) {
  std::uint64_t sum = 0;
  for (std::size_t k = first; k < last; ++k) {
    std::uint64_t w;
    std::memcpy(&w, p + 8 * k, 8);  // little-endian hosts only, like every device we support
    sum += mix(w + mix(k));
  }
  return sum;
}
}  // namespace

std::uint64_t buffer_digest(const void* bytes, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(bytes);
  const std::size_t words = n / 8;
  // A sum, so ranges of words add up in any order: large buffers are split over the cores.
  constexpr std::size_t kWordsPerThread = 1u << 17;
  const std::size_t threads =
      std::min<std::size_t>({words / kWordsPerThread, 16, std::max(1u, std::thread::hardware_concurrency())});
  std::uint64_t sum = 0;
  if (threads <= 1) {
    sum = sum_words(p, 0, words);
  } else {
    std::vector<std::uint64_t> parts(threads);
    std::vector<std::thread> pool;
    for (std::size_t t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] { parts[t] = sum_words(p, words * t / threads, words * (t + 1) / threads); });
    }
    for (auto& thread : pool) thread.join();
    for (std::uint64_t part : parts) sum += part;
  }
  if (n % 8) {
    std::uint64_t w = 0;
    std::memcpy(&w, p + 8 * words, n % 8);
    sum += mix(w + mix(words));
  }
  return sum;
}

}  // namespace kernelevolve
