// nn.LayerNorm(hidden) over each of the batch_size * seq_len rows of hidden fp32 values:
// out[r, j] = (x[r, j] - mean_r) * rsqrt(var_r + 1e-5) * norm_weight[j] + norm_bias[j] (biased variance).
// One block of THREADS threads per row (THREADS a power of two), each thread taking the elements threadIdx.x,
// + THREADS, ...; three passes over the row (the sum, the sum of squared deviations, the normalization),
// the sums combined by a tree in shared memory.
// The seed point (THREADS 32) gives each row a single warp: a long serial loop per thread and only 32
// threads per block, which caps the threads resident per SM.
#ifndef THREADS
#define THREADS 32
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

extern "C" __global__ void __launch_bounds__(THREADS) layer_norm_affine(const float* __restrict__ x,
                                                                       const float* __restrict__ norm_weight,
                                                                       const float* __restrict__ norm_bias,
                                                                       float* __restrict__ out, long long batch_size,
                                                                       long long seq_len, long long hidden) {
  __shared__ float red[THREADS];
  const long long row = blockIdx.x, n = hidden;
  if (row >= batch_size * seq_len) return;  // the whole block leaves together
  const float* xr = x + row * n;
  float* o = out + row * n;
  float s = 0.f;
  for (long long j = threadIdx.x; j < n; j += THREADS) s += xr[j];
  const float mean = block_sum(s, red) / (float)n;
  float q = 0.f;
  for (long long j = threadIdx.x; j < n; j += THREADS) {
    const float d = xr[j] - mean;
    q += d * d;
  }
  const float rstd = rsqrtf(block_sum(q, red) / (float)n + 1e-5f);
  for (long long j = threadIdx.x; j < n; j += THREADS) o[j] = (xr[j] - mean) * rstd * norm_weight[j] + norm_bias[j];
}
