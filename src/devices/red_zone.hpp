// The byte a red zone holds at an address, the same on every device (cpu_device.cpp, gpu/gpu_device.cpp).
#pragma once
#include <cstdint>

namespace kernelevolve::devices {

// A function of the address, so that no two buffers' red zones hold the same bytes, and a kernel that copies the
// bytes past the end of its input to past the end of its output still changes what it overwrites.
inline unsigned char red_zone_byte(std::uint64_t address) {
  std::uint64_t z = (address >> 3) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ull;
  z ^= z >> 29;
  const auto byte = static_cast<unsigned char>(z >> (8 * (address & 7)));
  // Never 0: a write of zeros (an empty sum, a float 0, a memset) then changes every byte it covers, so the first
  // changed byte a report names is the first byte written, not the next one by the luck of the address (CI's repeat
  // stage saw "byte 1" for a zero written at byte 0 of a temporary's red zone).
  return byte != 0 ? byte : 0x5a;
}

}  // namespace kernelevolve::devices
