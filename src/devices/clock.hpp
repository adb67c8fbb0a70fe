// The steady clock the devices time compilation with, and milliseconds since a point of it.
#pragma once
#include <chrono>

namespace kernelevolve::devices {

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace kernelevolve::devices
