// The CUDA and HIP devices' shared checks and ceiling kernels; see common.hpp.
#include "devices/gpu/common.hpp"

#include <algorithm>
#include <climits>
#include <sstream>

#include "kernelevolve/spec.hpp"

namespace kernelevolve::gpu {

const char* const kCeilingKernels = R"(
extern "C" __global__ void ke_copy(const float4* __restrict__ src, float4* __restrict__ dst, unsigned long long n) {
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = src[i];
}
// 16 independent FMA chains per thread: enough independent work to keep every FP32 lane busy.
extern "C" __global__ void ke_fma(float* out, int iters, float b, float c) {
  float a[16];
#pragma unroll
  for (int j = 0; j < 16; ++j) a[j] = threadIdx.x * 1e-3f + j;
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int j = 0; j < 16; ++j) a[j] = fmaf(a[j], b, c);
  }
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < 16; ++j) s += a[j];
  out[(unsigned long long)blockIdx.x * blockDim.x + threadIdx.x] = s;
}
)";

std::string unusable(const std::string& device_id, const std::string& poison) {
  return device_id + " is unusable after an earlier kernel's fault (" + poison + ")";
}

std::string refusal(const KernelSource& ks, Language language, const std::string& device_id, bool healthy,
                    const std::string& poison) {
  if (ks.language != language) {
    return "error: " + device_id + " compiles " + to_string(language) + " kernels, not " + to_string(ks.language) + "\n";
  }
  if (!is_identifier(ks.entry)) return "error: the entry '" + ks.entry + "' is not a C identifier\n";
  for (const auto& [name, value] : ks.defines) {
    if (!is_identifier(name)) return "error: the tunable name '" + name + "' is not a C identifier\n";
  }
  if (!healthy) return "error: " + unusable(device_id, poison) + "\n";
  return {};
}

std::string invalid_launch(const LaunchDims& dims) {
  for (int d = 0; d < 3; ++d) {
    if (dims.grid[d] < 1 || dims.grid[d] > UINT_MAX || dims.block[d] < 1 || dims.block[d] > UINT_MAX) {
      std::ostringstream msg;
      msg << "invalid launch dimensions: grid " << dims.grid[0] << "x" << dims.grid[1] << "x" << dims.grid[2]
          << ", block " << dims.block[0] << "x" << dims.block[1] << "x" << dims.block[2];
      return msg.str();
    }
  }
  if (dims.shared_bytes < 0 || dims.shared_bytes > INT_MAX)
    return "invalid dynamic shared memory size " + std::to_string(dims.shared_bytes);
  return {};
}

double best_ms(Device& device, Kernel& kernel, void** args, const LaunchDims& dims, int reps, bool flush_cache) {
  double best = -1;
  for (int i = 0; i < reps; ++i) {
    const LaunchResult r = device.launch(kernel, args, dims, /*timed=*/true, flush_cache);
    if (!r.ok) return -1;
    if (best < 0 || r.time_us / 1000.0 < best) best = r.time_us / 1000.0;
  }
  return best;
}

double measure_fma_flops(Device& device, Kernel& fma, int compute_units, bool flush_cache) {
  try {
    LaunchDims dims;
    dims.grid[0] = static_cast<std::int64_t>(std::max(1, compute_units)) * 8;
    dims.block[0] = 256;
    auto out = device.allocate(static_cast<std::size_t>(dims.grid[0] * dims.block[0]) * 4);
    void* o = out->data();
    int iters = 1 << 14;
    float b = 0.999f, c = 0.001f;
    void* args[] = {&o, &iters, &b, &c};
    device.launch(fma, args, dims, false, false);  // warm-up: clocks, first-launch costs
    iters = 1 << 16;
    const double ms = best_ms(device, fma, args, dims, 3, flush_cache);
    if (ms <= 0) return 0;
    return 2.0 * 16.0 * iters * static_cast<double>(dims.grid[0] * dims.block[0]) / (ms * 1e-3);
  } catch (const std::exception&) {
    return 0;  // too little memory for the output: the roofline then has no flop ceiling
  }
}

}  // namespace kernelevolve::gpu
