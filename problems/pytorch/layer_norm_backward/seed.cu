// The backward of nn.LayerNorm(hidden) with its weight and bias on the GPU (layer_norm_affine's module): over
// each of the batch_size * seq_len rows of hidden fp32 values, y = xhat * norm_weight + norm_bias with
// xhat = (x - mean) * rstd, rstd = 1 / sqrt(var + 1e-5), var the biased variance. Given grad_out (dL/dy) and
// g = grad_out * norm_weight:
//   grad_x[r, j]        = rstd * (g[j] - mean_k(g[k]) - xhat[j] * mean_k(g[k] * xhat[k]))
//   grad_norm_weight[j] = the sum over rows of grad_out[r, j] * xhat[r, j]
//   grad_norm_bias[j]   = the sum over rows of grad_out[r, j]
//
// A program of two kernels and two temporaries, mean and rstd (each row's, recomputed: the forward's are not
// inputs):
//   1. layer_norm_backward: one block of THREADS threads per row (THREADS a power of two), thread t taking the
//      elements t, t + THREADS, ...; four block-wide sums by a tree in shared memory (the row's sum, its squared
//      deviations, then g and g * xhat); writes the row's grad_x, mean and rstd.
//   2. layer_norm_backward_weight: the weight gradients' column sums down every row, 32 columns a block and
//      WLANES warps splitting the rows, summed in double and combined in shared memory, then rounded once (a
//      float chain down thousands of rows misses float64 autograd's beyond the tolerance where a sum is near 0).
// The seed point (THREADS 32, WLANES 1) is slow on purpose: one warp per row and cdiv(hidden, 32) single-warp
// blocks for the weight gradients. One pass over a row kept in registers, warp shuffles, vector loads, and the
// weight gradients as per-block partial sums written by the row kernel (one read of x and grad_out, not two)
// are the next steps.
/* kernelevolve-plan
{"temporaries": [{"name": "mean", "dtype": "f32", "shape": ["batch_size", "seq_len"]},
                 {"name": "rstd", "dtype": "f32", "shape": ["batch_size", "seq_len"]}],
 "steps": [
   {"kernel": "layer_norm_backward", "grid": ["batch_size * seq_len"], "block": ["THREADS"],
    "args": ["x", "norm_weight", "grad_out", "grad_x", "mean", "rstd", "batch_size * seq_len", "hidden"]},
   {"kernel": "layer_norm_backward_weight", "grid": ["cdiv(hidden, 32)"], "block": ["32 * WLANES"],
    "args": ["x", "grad_out", "mean", "rstd", "grad_norm_weight", "grad_norm_bias", "batch_size * seq_len",
             "hidden"]}]}
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
    layer_norm_backward(const float* __restrict__ x, const float* __restrict__ norm_weight,
                        const float* __restrict__ grad_out, float* __restrict__ grad_x, float* __restrict__ mean_out,
                        float* __restrict__ rstd_out, long long rows, long long hidden) {
  __shared__ float red[THREADS];
  const long long row = blockIdx.x, n = hidden;
  if (row >= rows) return;  // the whole block leaves together
  const float* xr = x + row * n;
  const float* go = grad_out + row * n;
  float* gx = grad_x + row * n;
  float s = 0.f;
  for (long long j = threadIdx.x; j < n; j += THREADS) s += xr[j];
  const float mean = block_sum(s, red) / (float)n;
  float q = 0.f;
  for (long long j = threadIdx.x; j < n; j += THREADS) {
    const float d = xr[j] - mean;
    q += d * d;
  }
  const float rstd = rsqrtf(block_sum(q, red) / (float)n + 1e-5f);
  float sg = 0.f, sgx = 0.f;
  for (long long j = threadIdx.x; j < n; j += THREADS) {
    const float g = go[j] * norm_weight[j];
    sg += g;
    sgx += g * (xr[j] - mean) * rstd;
  }
  const float mean_g = block_sum(sg, red) / (float)n;
  const float mean_gx = block_sum(sgx, red) / (float)n;
  for (long long j = threadIdx.x; j < n; j += THREADS) {
    const float xhat = (xr[j] - mean) * rstd;
    gx[j] = rstd * (go[j] * norm_weight[j] - mean_g - xhat * mean_gx);
  }
  if (threadIdx.x == 0) {
    mean_out[row] = mean;
    rstd_out[row] = rstd;
  }
}

extern "C" __global__ void __launch_bounds__(32 * WLANES)
    layer_norm_backward_weight(const float* __restrict__ x, const float* __restrict__ grad_out,
                               float* __restrict__ mean, float* __restrict__ rstd,
                               float* __restrict__ grad_norm_weight, float* __restrict__ grad_norm_bias,
                               long long rows, long long hidden) {
  __shared__ double red_w[32 * WLANES], red_b[32 * WLANES];
  const int lane = threadIdx.x % 32, part = threadIdx.x / 32;
  const long long j = (long long)blockIdx.x * 32 + lane;
  double sw = 0.0, sb = 0.0;
  if (j < hidden) {
    for (long long r = part; r < rows; r += WLANES) {
      const double go = grad_out[r * hidden + j];
      sw += go * (((double)x[r * hidden + j] - mean[r]) * rstd[r]);
      sb += go;
    }
  }
  red_w[threadIdx.x] = sw;
  red_b[threadIdx.x] = sb;
  __syncthreads();
  for (int k = WLANES / 2; k > 0; k >>= 1) {
    if (part < k) {
      red_w[threadIdx.x] += red_w[threadIdx.x + 32 * k];
      red_b[threadIdx.x] += red_b[threadIdx.x + 32 * k];
    }
    __syncthreads();
  }
  if (part == 0 && j < hidden) {
    grad_norm_weight[j] = (float)red_w[lane];
    grad_norm_bias[j] = (float)red_b[lane];
  }
}
