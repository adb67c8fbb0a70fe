// The forward of RMSNorm (model.py) on the GPU, the first program of bench/training_gpu.py's operator, whose
// backward is this problem's (cuda.json): out[r, j] = x[r, j] * rs * weight[j] over each of the
// batch_size * seq_len rows of hidden fp32 values, rs = 1 / sqrt(mean(x[r, :]^2) + 1e-6). One block of THREADS
// threads per row (THREADS a power of two): the sum of squares by a tree in shared memory, then the scaled row.
#ifndef THREADS
#define THREADS 128
#endif

extern "C" __global__ void __launch_bounds__(THREADS)
    rms_norm(const float* __restrict__ x, const float* __restrict__ weight, float* __restrict__ out,
             long long batch_size, long long seq_len, long long hidden) {
  __shared__ float red[THREADS];
  const long long row = blockIdx.x, n = hidden;
  if (row >= batch_size * seq_len) return;  // the whole block leaves together
  const float* xr = x + row * n;
  float q = 0.f;
  for (long long j = threadIdx.x; j < n; j += THREADS) q += xr[j] * xr[j];
  red[threadIdx.x] = q;
  __syncthreads();
  for (int s = THREADS / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  const float rs = rsqrtf(red[0] / (float)n + 1e-6f);
  for (long long j = threadIdx.x; j < n; j += THREADS) out[row * n + j] = xr[j] * rs * weight[j];
}
