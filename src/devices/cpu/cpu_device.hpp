// CpuDevice: the host CPU as a Device. C and C++ kernels are compiled in-process with Clang 16
// (cc1 arguments, -O3 for the host CPU and its features) and loaded with ORC LLJIT. Each kernel is
// called through a generated trampoline `void __ke_trampoline(void** args)` appended to its source,
// so launch() needs no knowledge of the signature at run time.
#pragma once
#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "devices/kernel_cache.hpp"
#include "kernelevolve/ceiling_shift.hpp"
#include "kernelevolve/device.hpp"

namespace kernelevolve {

namespace cpu_detail {
class JitEngine;  // one ORC LLJIT, shared by a CpuDevice and the kernels it compiled
}

class CpuDevice final : public Device {
 public:
  static constexpr std::size_t kDefaultCacheCapacity = 256;

  // cache_capacity: how many compiled modules are kept; the least recently used is dropped first
  // (its code is unloaded once no Kernel handle refers to it any more).
  explicit CpuDevice(std::size_t cache_capacity = kDefaultCacheCapacity);
  ~CpuDevice() override;

  const DeviceInfo& info() override;
  CompileResult compile(const KernelSource& source) override;
  std::unique_ptr<Buffer> allocate(std::size_t bytes) override;
  LaunchResult launch(Kernel& kernel, void** args, const LaunchDims& dims, bool timed = false,
                      bool flush_cache = false) override;

  // Modules held in the cache now (for tests and diagnostics).
  std::size_t cached_modules() const;

 private:
  void flush_caches();

  std::shared_ptr<cpu_detail::JitEngine> jit_;
  KernelCache cache_;

  std::once_flag info_once_;
  DeviceInfo info_;

  std::mutex flush_mutex_;
  std::unique_ptr<unsigned char[]> flush_buffer_;
  std::size_t flush_bytes_ = 0;
};

// The CPU device (a new instance, with its own JIT and module cache).
std::shared_ptr<Device> make_cpu_device();

// Describes the host CPU. With measure, the copy bandwidth ceilings are measured (about 0.2 s);
// without, they are left at zero (list_devices() is cheap).
DeviceInfo describe_host_cpu(bool measure);

// The CPU name Clang compiles kernels for: LLVM's name for the host, or, where this LLVM does not know
// the host's model (it then says "generic", which Clang rejects on x86), the architecture's baseline;
// the host's detected features are passed beside it, so the vector units are used either way.
std::string host_compile_cpu();

// The last-level cache size in bytes as the OS reports it, or 0 when unknown.
std::size_t host_last_level_cache_bytes();

// The previous measurement of this machine's ceilings (cpu_info.cpp says why a file): in $KE_CACHE_DIR, else
// $XDG_CACHE_HOME/kernelevolve, else ~/.cache/kernelevolve, named after the CPU's model and the host; empty
// when there is no such folder.
std::filesystem::path ceiling_history_file(const std::string& cpu_name);

// Runs `measure` on `info` (it sets the peaks) under the history file's lock, compares the peaks with the
// previous measurement there, and records them in its place. Where one moved by more than kCeilingShift,
// sets info's kCeilingsMovedProperty and returns the same words; else returns "".
std::string compare_with_previous_ceilings(DeviceInfo& info, const std::function<void(DeviceInfo&)>& measure);

}  // namespace kernelevolve
