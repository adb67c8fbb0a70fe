// KernelBench level 2, problem 18 (Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp):
// out[i] = lse(lse(mean(max(sum_j (x @ W^T + b)[i, j])))). After the sum over dim 1 (keepdim) every later op
// reduces a dimension of size 1, and each is then the identity in fp32: max and mean of one value are it,
// and PyTorch's logsumexp of one value v is log(exp(v - v)) + v = v exactly. So out[i] is the row sum.
// Plan: cuBLAS's GEMM (the call torch.mm makes) into a temporary t[batch, out_features], then ONE kernel,
// one block per row: the bias added to each element in fp32 (as the Linear's epilogue adds it), float4
// loads, a per-thread sum, a warp-shuffle then shared-memory reduction.
/* kernelevolve-plan
{"temporaries": [{"name": "t", "dtype": "f32", "shape": ["batch_size", "out_features"]}],
 "steps": [
  {"library": "cublas.gemm",
   "args": ["x", "linear_weight", "t", "batch_size", "out_features", "in_features"],
   "options": {"b_transposed": "true"}},
  {"kernel": "row_sum", "grid": ["batch_size"], "block": [512],
   "args": ["t", "linear_bias", "out", "out_features"]}]}
*/

// The block's sum (blockDim.x a multiple of 32, at most 1024), returned to every thread.
__device__ float block_sum(float v) {
  __shared__ float warp_sums[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  v = lane < warps ? warp_sums[lane] : 0.0f;
  if (warp == 0)
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  if (threadIdx.x == 0) warp_sums[0] = v;
  __syncthreads();
  const float total = warp_sums[0];
  __syncthreads();
  return total;
}

extern "C" __global__ void row_sum(float* t, const float* bias, float* out, long long n) {
  const float* row = t + (long long)blockIdx.x * n;
  float acc = 0.0f;
  // float4 loads where the row starts on 16 bytes (n a multiple of 4), scalar ones otherwise.
  const long long n4 = (n % 4 == 0) ? n / 4 : 0;
  const float4* row4 = reinterpret_cast<const float4*>(row);
  for (long long j = threadIdx.x; j < n4; j += blockDim.x) {
    const float4 v = row4[j], b = reinterpret_cast<const float4*>(bias)[j];
    acc += ((v.x + b.x) + (v.y + b.y)) + ((v.z + b.z) + (v.w + b.w));
  }
  for (long long j = n4 * 4 + threadIdx.x; j < n; j += blockDim.x) acc += row[j] + bias[j];
  const float s = block_sum(acc);
  // torch.max, torch.mean, and two torch.logsumexp over a dimension of size 1: the identity.
  if (threadIdx.x == 0) out[blockIdx.x] = s;
}
