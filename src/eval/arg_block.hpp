// A kernel's arguments for one workload: a device buffer per buffer param and the values of the others, in the
// argument block Device::launch takes; and the seed mixing that gives each (seed, workload, trial) its own inputs.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernelevolve/device.hpp"
#include "kernelevolve/spec.hpp"

namespace kernelevolve::eval {

// splitmix64 over the pair: distinct (seed, workload, trial) give unrelated streams.
std::uint64_t mix(std::uint64_t a, std::uint64_t b);

inline bool is_output(const Param& p) { return p.role == Role::out || p.role == Role::inout; }
inline bool is_input(const Param& p) { return p.role == Role::in || p.role == Role::inout; }

// One set of device buffers for a kernel's buffer params, and the argument block that points at them.
struct ArgBlock {
  std::vector<std::unique_ptr<Buffer>> buffers;  // by param index; null for non-buffers
  std::vector<std::array<unsigned char, 8>> values;
  std::vector<void*> pointers;  // what buffer args hold
  std::vector<void*> args;

  ArgBlock(Device& device, const Spec& spec, const Bindings& workload);
  void poison(std::size_t i, DType dtype);
};

// The spec's launch (grid, block, shared bytes) at a workload and tunables; empty for a CPU kernel.
LaunchDims launch_dims(const Spec& spec, const Bindings& workload, const Bindings& tunables);

}  // namespace kernelevolve::eval
