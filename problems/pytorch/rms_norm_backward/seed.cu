// The backward of RMSNorm on the GPU: over each of the batch_size * seq_len rows of hidden fp32 values,
// y = x * r * weight with r = 1 / sqrt(mean(x^2) + 1e-6). Given grad_out (dL/dy):
//   grad_x[r, j]   = r * (g[j] - x[j] * r^2 * mean_k(g[k] * x[k])), g = grad_out * weight
//   grad_weight[j] = the sum over rows of grad_out[r, j] * x[r, j] * r
//
// A program of two kernels and one temporary, rstd (each row's r):
//   1. rms_norm_backward: one block of THREADS threads per row (THREADS a power of two), thread t taking the
//      elements t, t + THREADS, ...; two block-wide sums (x^2, then grad_out * weight * x) by a tree in shared
//      memory; writes the row's grad_x and its r.
//   2. rms_norm_backward_weight: grad_weight's column sums down every row, 32 columns a block (a warp reads
//      128 contiguous bytes of a row) and WLANES warps splitting the rows, summed in double and combined in
//      shared memory, then rounded once. A float sum down thousands of rows misses float64 autograd's by more
//      than the tolerance where a column's sum is near zero; double, or a tree of short float sums, does not.
// The seed point (THREADS 32, WLANES 1) is slow on purpose: one warp per row, and only cdiv(hidden, 32)
// single-warp blocks walking all the rows for grad_weight. Keeping the row in registers between the passes,
// vector loads, warp shuffles, and grad_weight as per-block partial sums over a few rows (a split reduction
// finished by a second small kernel, or fused into the row kernel) are the next steps.
/* kernelevolve-plan
{"temporaries": [{"name": "rstd", "dtype": "f32", "shape": ["batch_size", "seq_len"]}],
 "steps": [
   {"kernel": "rms_norm_backward", "grid": ["batch_size * seq_len"], "block": ["THREADS"],
    "args": ["x", "weight", "grad_out", "grad_x", "rstd", "batch_size * seq_len", "hidden"]},
   {"kernel": "rms_norm_backward_weight", "grid": ["cdiv(hidden, 32)"], "block": ["32 * WLANES"],
    "args": ["x", "grad_out", "rstd", "grad_weight", "batch_size * seq_len", "hidden"]}]}
*/
#ifndef THREADS
#define THREADS 32
#endif
#ifndef WLANES
#define WLANES 1
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

extern "C" __global__ void __launch_bounds__(THREADS)
    rms_norm_backward(const float* __restrict__ x, const float* __restrict__ weight,
                      const float* __restrict__ grad_out, float* __restrict__ grad_x, float* __restrict__ rstd,
                      long long rows, long long hidden) {
  __shared__ float red[THREADS];
  const long long row = blockIdx.x, n = hidden;
  if (row >= rows) return;  // the whole block leaves together
  const float* xr = x + row * n;
  const float* go = grad_out + row * n;
  float* gx = grad_x + row * n;
  float q = 0.f;
  for (long long j = threadIdx.x; j < n; j += THREADS) q += xr[j] * xr[j];
  const float r = rsqrtf(block_sum(q, red) / (float)n + 1e-6f);
  float d = 0.f;
  for (long long j = threadIdx.x; j < n; j += THREADS) d += go[j] * weight[j] * xr[j];
  const float c = r * r * block_sum(d, red) / (float)n;
  for (long long j = threadIdx.x; j < n; j += THREADS) gx[j] = r * (go[j] * weight[j] - xr[j] * c);
  if (threadIdx.x == 0) rstd[row] = r;
}

extern "C" __global__ void __launch_bounds__(32 * WLANES)
    rms_norm_backward_weight(const float* __restrict__ x, const float* __restrict__ grad_out,
                             float* __restrict__ rstd, float* __restrict__ grad_weight, long long rows,
                             long long hidden) {
  __shared__ double red[32 * WLANES];
  const int lane = threadIdx.x % 32, part = threadIdx.x / 32;
  const long long j = (long long)blockIdx.x * 32 + lane;
  double s = 0.0;
  if (j < hidden)
    for (long long r = part; r < rows; r += WLANES) s += (double)grad_out[r * hidden + j] * x[r * hidden + j] * rstd[r];
  red[threadIdx.x] = s;
  __syncthreads();
  for (int k = WLANES / 2; k > 0; k >>= 1) {
    if (part < k) red[threadIdx.x] += red[threadIdx.x + 32 * k];
    __syncthreads();
  }
  if (part == 0 && j < hidden) grad_weight[j] = (float)red[lane];
}
