// The GPU devices' checks and their own kernels; see common.hpp.
#include "devices/gpu/common.hpp"

#include <climits>
#include <cstdio>
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
// The L2 flush: reads a buffer twice the L2's size. Reading (not writing, as a memset would) leaves the
// L2 full of clean lines, so the timed kernel pays no write-back of the flush's data.
extern "C" __global__ void ke_flush(const float4* __restrict__ p, unsigned long long n, float* sink) {
  float s = 0.f;
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float4 v = p[i];
    s += (v.x + v.y) + (v.z + v.w);
  }
  if (s == 1234.5f) sink[0] = s;  // the buffer holds zeros, so never; the compiler cannot know
}
// The hold before a timed launch (GpuDevice::hold_for_host): one thread spins for `cycles` of its SM's clock, so
// that the host queues every step of the call before the first runs, and the events time the GPU's work alone.
extern "C" __global__ void ke_spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}
)";

const char* const kTensorKernels = R"(
// Each warp runs kChains independent chains of mma.sync m16n8k16 (fp32 accumulation), a chain's next product
// waiting only on its own accumulators: with 8 warps a block and several blocks an SM, enough work in flight to
// keep the tensor cores busy. The fragments' bits come as arguments so the compiler cannot fold them; each mma is
// 2 x 16 x 8 x 16 = 4096 flops. On Hopper mma.sync reaches only part of what wgmma reaches (the device takes
// cuBLASLt's product too where it is faster); up to Ada it is the tensor cores' whole rate.
#define KE_MMA_KERNEL(name, type)                                                                             \
  extern "C" __global__ void name(float* out, int iters, unsigned a_bits, unsigned b_bits) {                  \
    constexpr int kChains = 8;                                                                                \
    float c[kChains][4];                                                                                      \
    _Pragma("unroll") for (int j = 0; j < kChains; ++j) c[j][0] = c[j][1] = c[j][2] = c[j][3] = 0.f;         \
    const unsigned a0 = a_bits, a1 = a_bits ^ (threadIdx.x & 1u), a2 = a_bits, a3 = a_bits ^ 2u;              \
    const unsigned b0 = b_bits, b1 = b_bits ^ (threadIdx.x & 2u);                                             \
    for (int i = 0; i < iters; ++i) {                                                                         \
      _Pragma("unroll") for (int j = 0; j < kChains; ++j) {                                                   \
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." type "." type ".f32 {%0,%1,%2,%3}, "            \
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"                                                 \
                     : "+f"(c[j][0]), "+f"(c[j][1]), "+f"(c[j][2]), "+f"(c[j][3])                             \
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));                                 \
      }                                                                                                       \
    }                                                                                                         \
    float s = 0.f;                                                                                            \
    _Pragma("unroll") for (int j = 0; j < kChains; ++j) s += (c[j][0] + c[j][1]) + (c[j][2] + c[j][3]);       \
    out[(unsigned long long)blockIdx.x * blockDim.x + threadIdx.x] = s;                                       \
  }
KE_MMA_KERNEL(ke_mma_bf16, "bf16")
KE_MMA_KERNEL(ke_mma_f16, "f16")
)";

std::string format_bytes(double bytes) {
  char buf[64];
  if (bytes >= (1ull << 30)) std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / (1ull << 30));
  else if (bytes >= (1ull << 20)) std::snprintf(buf, sizeof buf, "%.0f MiB", bytes / (1ull << 20));
  else if (bytes >= (1ull << 10)) std::snprintf(buf, sizeof buf, "%.0f KiB", bytes / (1ull << 10));
  else std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  return buf;
}

std::string unusable(const std::string& device_id, const std::string& poison) {
  return device_id + " is unusable after an earlier kernel's fault (" + poison + ")";
}

std::string refusal(const KernelSource& ks, Language language, const std::string& device_id, bool healthy,
                    const std::string& poison) {
  if (ks.language != language) {
    return "error: " + device_id + " compiles " + to_string(language) + " kernels, not " + to_string(ks.language) +
           "\n";
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

}  // namespace kernelevolve::gpu
