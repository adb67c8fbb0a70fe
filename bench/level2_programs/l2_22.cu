// KernelBench level 2, problem 22 (Matmul_Scale_ResidualAdd_Clamp_LogSumExp_Mish):
// v = clamp((x @ W^T + b) * 2.0 + itself, -10, 10); l = logsumexp(v, dim 1); out[i] = l * mish(l).
// Plan: cuBLAS's GEMM (the call torch.mm makes) into a temporary t[batch, hidden_size], then ONE kernel (which
// adds the bias in fp32 as it reads, as the Linear's epilogue adds it),
// one block per row that reads the row once: each thread keeps an online (max, sum of exp(v - max)) pair
// over its elements, the pairs are merged across the block (warp shuffles, then shared memory), and thread 0
// finishes l = log(sum) + max (PyTorch's stable formula: amax, exp(v - max), sum, log, + max) and l * mish(l),
// mish(l) = l * tanh(log1p(exp(l))) as PyTorch's CUDA kernel computes it.
/* kernelevolve-plan
{"temporaries": [{"name": "t", "dtype": "f32", "shape": ["batch_size", "hidden_size"]}],
 "steps": [
  {"library": "cublas.gemm",
   "args": ["x", "matmul_weight", "t", "batch_size", "hidden_size", "input_size"],
   "options": {"b_transposed": "true"}},
  {"kernel": "lse_mish", "grid": ["batch_size"], "block": [512],
   "args": ["t", "matmul_bias", "out", "hidden_size"]}]}
*/
#ifndef INFINITY  // NVRTC defines no math.h macros
#define INFINITY __int_as_float(0x7f800000)
#endif

// x * scale_factor (2.0), x + x, torch.clamp(x, -10.0, 10.0): each exact or a comparison in fp32.
__device__ __forceinline__ float pre(float v) {
  const float s = v * 2.0f;
  return fminf(fmaxf(s + s, -10.0f), 10.0f);
}

// Merges (m, s) with (m2, s2), where s is the sum of exp(v - m) over its part. m = -inf marks an empty part.
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
  if (m2 == -INFINITY) return;
  if (m == -INFINITY) {
    m = m2;
    s = s2;
    return;
  }
  if (m2 > m) {
    s = s * expf(m - m2) + s2;
    m = m2;
  } else {
    s = s + s2 * expf(m2 - m);
  }
}

__device__ __forceinline__ void add(float& m, float& s, float v) {
  if (v > m) {
    s = (m == -INFINITY ? 0.0f : s * expf(m - v)) + 1.0f;
    m = v;
  } else {
    s += expf(v - m);
  }
}

extern "C" __global__ void lse_mish(float* t, const float* bias, float* out, long long n) {
  const float* row = t + (long long)blockIdx.x * n;
  float m = -INFINITY, s = 0.0f;
  const long long n4 = (n % 4 == 0) ? n / 4 : 0;
  const float4* row4 = reinterpret_cast<const float4*>(row);
  for (long long j = threadIdx.x; j < n4; j += blockDim.x) {
    const float4 v = row4[j], b = reinterpret_cast<const float4*>(bias)[j];
    add(m, s, pre(v.x + b.x));
    add(m, s, pre(v.y + b.y));
    add(m, s, pre(v.z + b.z));
    add(m, s, pre(v.w + b.w));
  }
  for (long long j = n4 * 4 + threadIdx.x; j < n; j += blockDim.x) add(m, s, pre(row[j] + bias[j]));
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_down_sync(0xffffffffu, m, o);
    const float s2 = __shfl_down_sync(0xffffffffu, s, o);
    merge(m, s, m2, s2);
  }
  __shared__ float ms[32], ss[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  if (lane == 0) {
    ms[warp] = m;
    ss[warp] = s;
  }
  __syncthreads();
  if (warp == 0) {
    m = lane < warps ? ms[lane] : -INFINITY;
    s = lane < warps ? ss[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) {
      const float m2 = __shfl_down_sync(0xffffffffu, m, o);
      const float s2 = __shfl_down_sync(0xffffffffu, s, o);
      merge(m, s, m2, s2);
    }
    if (lane == 0) {
      // PyTorch: a max of +-inf counts as 0 (the values are clamped to [-10, 10] here: never).
      const float shift = (m == INFINITY || m == -INFINITY) ? 0.0f : m;
      const float l = logf(s) + shift;
      const float mish = l * tanhf(log1pf(expf(l)));
      out[blockIdx.x] = l * mish;
    }
  }
}
