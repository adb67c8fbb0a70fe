// A program's library steps on a CUDA GPU (program.hpp): cuBLASLt's matrix product, cuBLAS's GEMM and cuDNN's
// convolutions and pooling (vendor_libraries.hpp) as kernels the GPU core launches on its stream, their arguments
// checked against the buffers they are given before any call.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "devices/gpu/gpu_device.hpp"

namespace kernelevolve::cuda {

// Where PyTorch's wheels keep the vendor libraries (nvidia/*/lib under its site-packages, asked of
// $KE_PYTHON or python3), after the folders of $KE_VENDOR_LIB_DIRS (colon-separated).
std::vector<std::string> vendor_library_dirs();

// Loads cuBLASLt and cuDNN where they are found and makes one small call of each on `stream`, so that what
// they load lazily is loaded now: a worker confines itself after. One line per library: where it was
// found, or why not. Never throws; a library not found fails only the steps that call it.
std::string prepare_vendor_libraries(gpu::GpuDevice& device, void* stream);

// The step `name` (library_calls()) with `options`, taking arguments of `signature`; null with `log` saying
// why when the options or the signature do not fit the call, or its library cannot be loaded.
std::shared_ptr<Kernel> make_library_step(gpu::GpuDevice& device, const std::string& name,
                                          const std::map<std::string, std::string>& options,
                                          const std::vector<Param>& signature, std::string& log);

}  // namespace kernelevolve::cuda
