// What the CUDA and HIP devices share beyond their APIs: the checks a source or a launch must pass before
// it reaches the driver, and the copy and FMA kernels (and the FMA measurement) behind the roofline.
#pragma once
#include <string>

#include "kernelevolve/device.hpp"

namespace kernelevolve::gpu {

// ke_copy (a grid-stride float4 copy) and ke_fma (16 independent FMA chains per thread): CUDA and HIP
// compile the same text. The CUDA device adds its L2-flush kernel after it.
extern const char* const kCeilingKernels;

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

// Best time in ms over `reps` timed launches, or a negative value when one failed.
double best_ms(Device& device, Kernel& kernel, void** args, const LaunchDims& dims, int reps, bool flush_cache);

// FMA rate of `fma` (ke_fma) with every compute unit full of threads, in flop/s; 0 when it cannot run.
double measure_fma_flops(Device& device, Kernel& fma, int compute_units, bool flush_cache);

}  // namespace kernelevolve::gpu
