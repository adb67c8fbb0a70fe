// A linear layer, a residual add and LayerNorm: h = x fc_weight^T + fc_bias + residual, then
// out[i, :] = (h[i, :] - mean_i) * rsqrt(var_i + 1e-5) * norm_weight + norm_bias (biased variance); x is
// batch_size x in_features, fc_weight hidden x in_features as nn.Linear stores it, residual and out
// batch_size x hidden, row-major fp32.
// One block of THREADS threads (a power of two) per row i; the row of h stays in shared memory (hidden
// floats, dynamic). TPC threads share a column j (consecutive lanes; TPC a power of two, at most 32):
// lane l adds the products k = l, l + TPC, ..., combined with warp shuffles; THREADS / TPC columns are
// done at once. Then the mean and the variance (trees in shared memory) and the normalization.
// The seed point (TPC 1) gives each column one thread: the threads of a warp read 32 different weight rows
// at once, so no weight load is coalesced. TPC = 32 makes each warp read contiguous pieces of one row.
#ifndef THREADS
#define THREADS 128
#endif
#ifndef TPC
#define TPC 1
#endif

__device__ __forceinline__ float block_sum(float v, float* red) {
  red[threadIdx.x] = v;
  __syncthreads();
  for (int s = THREADS / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  const float r = red[0];
  __syncthreads();  // red is reused by the next call
  return r;
}

extern "C" __global__ void __launch_bounds__(THREADS) linear_residual_layernorm(
    const float* __restrict__ x, const float* __restrict__ residual, const float* __restrict__ fc_weight,
    const float* __restrict__ fc_bias, const float* __restrict__ norm_weight, const float* __restrict__ norm_bias,
    float* __restrict__ out, long long batch_size, long long in_features, long long hidden) {
  extern __shared__ float h[];  // hidden floats
  __shared__ float red[THREADS];
  const long long i = blockIdx.x, K = in_features, n = hidden;
  if (i >= batch_size) return;  // the whole block leaves together
  const float* xi = x + i * K;
  const int lane = threadIdx.x % TPC, group = threadIdx.x / TPC;
  // Every thread runs the same number of rounds, so the shuffles always see the whole warp.
  for (long long j0 = 0; j0 < n; j0 += THREADS / TPC) {
    const long long j = j0 + group;
    float acc = 0.f;
    if (j < n) {
      const float* w = fc_weight + j * K;
      for (long long k = lane; k < K; k += TPC) acc += xi[k] * w[k];
    }
#pragma unroll
    for (int offset = TPC / 2; offset > 0; offset /= 2) acc += __shfl_down_sync(0xffffffffu, acc, offset, TPC);
    if (j < n && lane == 0) h[j] = acc + fc_bias[j] + residual[i * n + j];
  }
  __syncthreads();
  float s = 0.f;
  for (long long j = threadIdx.x; j < n; j += THREADS) s += h[j];
  const float mean = block_sum(s, red) / (float)n;
  float q = 0.f;
  for (long long j = threadIdx.x; j < n; j += THREADS) {
    const float d = h[j] - mean;
    q += d * d;
  }
  const float rstd = rsqrtf(block_sum(q, red) / (float)n + 1e-5f);
  for (long long j = threadIdx.x; j < n; j += THREADS)
    out[i * n + j] = (h[j] - mean) * rstd * norm_weight[j] + norm_bias[j];
}
