// The checks a source or a launch must pass before it reaches a GPU's driver, and the kernels the GPU core
// (gpu_device.hpp) compiles for itself: pure functions and text, so that tests need no GPU.
#pragma once
#include <string>

#include "kernelevolve/device.hpp"

namespace kernelevolve::gpu {

// ke_copy (a grid-stride float4 copy) and ke_fma (16 independent FMA chains per thread), behind the
// roofline, and ke_flush (reads a buffer, to flush the L2 before a timed launch): CUDA and HIP compile the
// same text.
extern const char* const kCeilingKernels;

// ke_mma_bf16 and ke_mma_f16 (chains of mma.sync m16n8k16 with fp32 accumulation, in inline PTX), behind the
// tensor-core ceilings of bf16 and fp16 work: CUDA only, sm_80 on. Launched as ke_mma_*(out, iters, a_bits,
// b_bits) with 256-thread blocks; `out` takes a float per thread; each thread's iteration is 8 mma, so a warp's is
// 8 x 4096 flops.
extern const char* const kTensorKernels;

// "1.0 GiB", "227 KiB", "512 B": for descriptions and messages.
std::string format_bytes(double bytes);

// What a device poisoned by an earlier kernel's fault says to each later compile and launch.
std::string unusable(const std::string& device_id, const std::string& poison);

// Why `ks` is refused before compiling, as a compiler-style log line, or empty: a language other than
// `language`, an entry or a tunable name that is not a C identifier, or a device poisoned by an earlier
// kernel's fault (`poison` says which).
std::string refusal(const KernelSource& ks, Language language, const std::string& device_id, bool healthy,
                    const std::string& poison);

// Why a GPU cannot take `dims` (a grid or block extent outside 1..UINT_MAX, a dynamic shared size outside
// 0..INT_MAX), or empty.
std::string invalid_launch(const LaunchDims& dims);

}  // namespace kernelevolve::gpu
