// CudaDevice: an NVIDIA GPU as a Device, over the CUDA Driver API and NVRTC loaded at run time.
//
// Compiling: NVRTC builds a cubin for the device's own architecture (sm_90 on a compute-capability-9.0
// GPU). A kernel that needs the arch-specific target (wgmma, setmaxnreg: sm_90a) asks for it with a
// line `// ke: sm_90a` in its source, or with the flag `-arch=sm_90a` (or `--gpu-architecture=sm_90a`)
// in KernelSource::flags; naming another GPU's architecture is a compile error. Tunables become -D
// macros; -O flags are dropped (NVRTC optimizes by default and refuses -O3); the log (NVRTC's and
// ptxas's resource report) is returned in CompileResult::log. Modules are cached by source and options.
//
// Launching: the spec's launch rule gives grid, block and dynamic shared memory; above 48 KB the
// kernel's dynamic limit is raised first. Everything runs on one stream per device; timed launches
// are bracketed by events on that stream, with L2 flushed before the first event by a kernel that reads
// a buffer twice the L2's size (a read, not a memset: a memset would leave the L2 full of dirty lines
// whose write-back the timed kernel would pay for). An error that poisons the context (an illegal
// address, a trap) makes healthy() false.
//
// Buffers, the module cache, launches, timing and verification are the GPU core's, shared with HipDevice
// (src/devices/gpu/gpu_device.hpp); what is CUDA's own is NVRTC and the target, the description, and IPC.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kernelevolve/device.hpp"

namespace kernelevolve {

// Opens cuda:<index>. Throws Error(DeviceUnavailable) saying why when there is no driver, no NVRTC,
// no GPU, or no GPU with that index.
std::shared_ptr<Device> make_cuda_device(int index);

// The CUDA GPUs present, described without measuring anything; empty without a driver or a GPU.
std::vector<DeviceInfo> list_cuda_devices();

namespace cuda_detail {

// What NVRTC made of a source.
struct NvrtcOutput {
  bool ok = false;
  std::string log;
  std::string image;  // a cubin, or PTX when NVRTC does not know the device's architecture
  bool is_ptx = false;
  std::string arch;  // the --gpu-architecture it was compiled for
};

// The target a source asks for on a device of compute capability `cc` (90 for 9.0): "sm_90", or
// "sm_90a" when it asks for the arch-specific features. Empty, with `error` set, when it asks for another
// architecture than the device's.
std::string target_arch(const KernelSource& source, int cc, std::string& error);

// Compiles `source` with NVRTC for `arch`. Never throws; needs no GPU (tests use it without one).
// Returns ok=false with the log when NVRTC is missing or the source does not compile.
NvrtcOutput nvrtc_compile(const KernelSource& source, const std::string& arch);

}  // namespace cuda_detail
}  // namespace kernelevolve
