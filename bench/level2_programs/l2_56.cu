// KernelBench level 2, problem 56 (Matmul_Sigmoid_Sum): out[i] = sum_j sigmoid((x @ W^T + b)[i, j]).
// Plan: cuBLAS's GEMM (the call torch.mm makes) into a temporary t[batch, hidden_size], then ONE kernel, one
// block of 1024 threads per row: the bias added in fp32 (as the Linear's epilogue adds it), sigmoid as PyTorch's
// CUDA kernel computes it (1 / (1 + exp(-v)), with full-precision expf), a per-thread sum over float4 loads, a
// warp-shuffle then shared-memory reduction.
/* kernelevolve-plan
{"temporaries": [{"name": "t", "dtype": "f32", "shape": ["batch_size", "hidden_size"]}],
 "steps": [
  {"library": "cublas.gemm",
   "args": ["x", "linear_weight", "t", "batch_size", "hidden_size", "input_size"],
   "options": {"b_transposed": "true"}},
  {"kernel": "sigmoid_row_sum", "grid": ["batch_size"], "block": [1024],
   "args": ["t", "linear_bias", "out", "hidden_size"]}]}
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

__device__ __forceinline__ float sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }

extern "C" __global__ void sigmoid_row_sum(float* t, const float* bias, float* out, long long n) {
  const float* row = t + (long long)blockIdx.x * n;
  float acc = 0.0f;
  const long long n4 = (n % 4 == 0) ? n / 4 : 0;
  const float4* row4 = reinterpret_cast<const float4*>(row);
  for (long long j = threadIdx.x; j < n4; j += blockDim.x) {
    const float4 v = row4[j], b = reinterpret_cast<const float4*>(bias)[j];
    acc += (sigmoid(v.x + b.x) + sigmoid(v.y + b.y)) + (sigmoid(v.z + b.z) + sigmoid(v.w + b.w));
  }
  for (long long j = n4 * 4 + threadIdx.x; j < n; j += blockDim.x) acc += sigmoid(row[j] + bias[j]);
  const float s = block_sum(acc);
  if (threadIdx.x == 0) out[blockIdx.x] = s;
}
