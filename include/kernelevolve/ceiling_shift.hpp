// Ceilings that move: a device's measured roofline ceilings (copy bandwidth, FMA peak) compared with the
// previous measurement on the same device. A large move means a noisy machine (a run measuring beside other
// load, a clock that changed), and figures taken against those ceilings are rough.
#pragma once

namespace kernelevolve {

// A ceiling more than this fraction off the previous measurement on the same device has moved.
inline constexpr double kCeilingShift = 0.20;

// The DeviceInfo property where a device that keeps its previous measurement (the CPU device: see
// src/devices/cpu/cpu_info.cpp) says in words which ceilings moved beyond kCeilingShift, e.g.
// "copy 8.4 GB/s, 49% under the 16.4 GB/s measured before on this device"; absent when none did. The run says
// it once on stderr and in its report (RunResult::ceilings_moved), the device facts and the prompt's noise
// paragraph say it, and confirmations take twice their rounds, as on a machine whose seed spreads
// (kNoisyMachine).
inline constexpr const char* kCeilingsMovedProperty = "ceilings_moved";

}  // namespace kernelevolve
