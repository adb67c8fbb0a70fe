// KernelBench level 2, problem 18 (Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp):
// out[i] = lse(lse(mean(max(sum_j (x @ W^T + b)[i, j])))). After the sum over dim 1 (keepdim) every later op
// reduces a dimension of size 1, and each is then the identity in fp32: max and mean of one value are it,
// and PyTorch's logsumexp of one value v is log(exp(v - v)) + v = v exactly. So out[i] is the row sum, and
//   sum_j (x_i . W_j + b_j) = x_i . (sum_j W_j) + sum_j b_j:
// no matrix product at all, one pass over W and one over x (a matrix-vector product), 2 * 8192^2 + 2 * 1024 *
// 8192 flops where the module spends 2 * 1024 * 8192^2. Every sum is in double, so the result is the exact
// one rounded once; PyTorch's own fp32 result stays within 0.83x KernelBench's fp32 tolerance of the float64
// answer (measured on an H100), which is what this is checked against.
// Plan: (1) column sums of W in 64 row-chunks, into a double temporary, (2) the chunks summed, and the bias's
// sum by one more block, (3) one block per row of x: its dot product with the column sums, plus the bias's.
/* kernelevolve-plan
{"temporaries": [{"name": "partial", "dtype": "f64", "shape": ["64", "in_features"]},
                 {"name": "wsum", "dtype": "f64", "shape": ["in_features"]},
                 {"name": "bsum", "dtype": "f64", "shape": ["1"]}],
 "steps": [
  {"kernel": "colsum_partial", "grid": ["cdiv(in_features, 256)", "64"], "block": [256],
   "args": ["linear_weight", "partial", "out_features", "in_features"]},
  {"kernel": "colsum_finish", "grid": ["cdiv(in_features, 256) + 1"], "block": [256],
   "args": ["partial", "linear_bias", "wsum", "bsum", "out_features", "in_features"]},
  {"kernel": "row_dot", "grid": ["batch_size"], "block": [256],
   "args": ["x", "wsum", "bsum", "out", "in_features"]}]}
*/

// The block's sum in double (blockDim.x a multiple of 32, at most 1024), valid in thread 0.
__device__ double block_sum(double v) {
  __shared__ double warp_sums[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  v = lane < warps ? warp_sums[lane] : 0.0;
  if (warp == 0)
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
}

// partial[c][k] = sum of W[j][k] over chunk c of the rows j (gridDim.y chunks): consecutive threads read
// consecutive k, so every row's read is coalesced.
extern "C" __global__ void colsum_partial(const float* w, double* partial, long long rows, long long cols) {
  const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= cols) return;
  const long long chunk = (rows + gridDim.y - 1) / gridDim.y;
  const long long from = (long long)blockIdx.y * chunk, to = from + chunk < rows ? from + chunk : rows;
  double acc = 0.0;
  for (long long j = from; j < to; ++j) acc += (double)w[j * cols + k];
  partial[(long long)blockIdx.y * cols + k] = acc;
}

// wsum[k] = the chunks' sum; the last block sums the bias instead.
extern "C" __global__ void colsum_finish(const double* partial, const float* bias, double* wsum, double* bsum,
                                         long long rows, long long cols) {
  if (blockIdx.x == gridDim.x - 1) {
    double acc = 0.0;
    for (long long j = threadIdx.x; j < rows; j += blockDim.x) acc += (double)bias[j];
    acc = block_sum(acc);
    if (threadIdx.x == 0) bsum[0] = acc;
    return;
  }
  const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= cols) return;
  double acc = 0.0;
  for (int c = 0; c < 64; ++c) acc += partial[(long long)c * cols + k];
  wsum[k] = acc;
}

extern "C" __global__ void row_dot(const float* x, const double* wsum, const double* bsum, float* out, long long cols) {
  const float* row = x + (long long)blockIdx.x * cols;
  double acc = 0.0;
  for (long long k = threadIdx.x; k < cols; k += blockDim.x) acc += (double)row[k] * wsum[k];
  acc = block_sum(acc);
  if (threadIdx.x == 0) out[blockIdx.x] = (float)(acc + bsum[0]);
}
