// Measured roofline ceilings of a GPU, kept in a file per device so that each worker process does not
// measure them again: $KE_CACHE_DIR, else $XDG_CACHE_HOME/kernelevolve, else ~/.cache/kernelevolve,
// file <uuid>.json. KE_REMEASURE=1 ignores the file. Shared by the CUDA and HIP devices.
#pragma once
#include <functional>
#include <string>

#include "kernelevolve/device.hpp"

namespace kernelevolve::gpu {

struct Ceilings {
  double copy_bytes_per_s = 0;  // a large device-to-device copy, bytes read plus written
  double fma_flops_per_s = 0;   // an FMA-only kernel on every SM
  double l2_bytes_per_s = 0;    // a copy that stays in L2
  // Dense tensor-core rates with fp32 accumulation for bf16 and fp16 inputs: the larger of an mma.sync kernel
  // (kTensorKernels) and a vendor library's large product, each 0 where neither could be measured. On Hopper
  // mma.sync reaches only part of wgmma's rate, which the library's product does reach.
  double bf16_tensor_flops_per_s = 0;
  double fp16_tensor_flops_per_s = 0;
  std::string tensor_how;  // what each came from: "bf16: mma.sync 612, cuBLASLt 781 TFLOP/s; fp16: ..."
};

// The ceilings of the device `key` (its UUID): read from the cache when the file names the same device
// name and driver, else measured by `measure` and stored when `plausible` says so. One process
// measures at a time (a lock file beside the cache); the others wait and read its result.
// `how` says which: "cached in <file>" or "measured now". A file written before the tensor-core ceilings were
// measured lacks them: it is measured again, not read as a device without tensor cores.
Ceilings load_or_measure(const std::string& key, const std::string& name, const std::string& driver,
                         const std::function<Ceilings()>& measure,
                         const std::function<bool(const Ceilings&)>& plausible, std::string& how);

// Sets the DeviceInfo's peaks and floor from `c`, and adds them to its properties: copy_gbps, l2_copy_gbps,
// fma_tflops, and bf16_tensor_tflops, fp16_tensor_tflops and tensor_ceilings (what they came from) where
// measured.
void apply(DeviceInfo& info, const Ceilings& c, const std::string& how);

}  // namespace kernelevolve::gpu
