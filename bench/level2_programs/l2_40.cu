// KernelBench level 2, problem 40 (Matmul_Scaling_ResidualAdd): out = t * 0.5 + t, where t = x @ W^T + b
// (original_x is t's clone).
// Plan: cuBLAS's GEMM (the call torch.mm makes): x @ W^T straight into the output, then ONE elementwise
// kernel that adds the bias in fp32 (as the Linear's epilogue does) and applies the rest in place: v = v * 0.5 + v, the
// product and the sum rounded apart as PyTorch's two ops (no FMA contraction).
// Each thread takes 4 consecutive elements (one float4 where they are all there, one by one at the tail).
/* kernelevolve-plan
{"steps": [
  {"library": "cublas.gemm",
   "args": ["x", "matmul_weight", "out", "batch_size", "out_features", "in_features"],
   "options": {"b_transposed": "true"}},
  {"kernel": "scale_residual", "grid": ["cdiv(batch_size * out_features, 1024)"], "block": [256],
   "args": ["out", "matmul_bias", "batch_size * out_features", "out_features"]}]}
*/

__device__ __forceinline__ float epilogue(float v) {
  return __fadd_rn(__fmul_rn(v, 0.5f), v);  // x * scaling_factor + original_x
}

extern "C" __global__ void scale_residual(float* out, const float* bias, long long n, long long cols) {
  const long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * 4;
  if (cols % 4 == 0 && i + 3 < n) {
    float4 v = *reinterpret_cast<float4*>(out + i);
    const float4 b = *reinterpret_cast<const float4*>(bias + i % cols);
    v.x = epilogue(v.x + b.x);
    v.y = epilogue(v.y + b.y);
    v.z = epilogue(v.z + b.z);
    v.w = epilogue(v.w + b.w);
    *reinterpret_cast<float4*>(out + i) = v;
  } else {
    for (long long j = i; j < n && j < i + 4; ++j) out[j] = epilogue(out[j] + bias[j % cols]);
  }
}
