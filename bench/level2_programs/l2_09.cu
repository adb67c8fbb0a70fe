// KernelBench level 2, problem 9 (Matmul_Subtract_Multiply_ReLU): out = relu((x @ W^T + b - 2.0) * 1.5).
// Plan: cuBLAS's GEMM (the call torch.mm makes): x @ W^T straight into the output, then ONE elementwise
// kernel that adds the bias in fp32 (as the Linear's epilogue does) and applies the rest in place: v = relu((v - 2.0) * 1.5),
// each op rounded in fp32 as PyTorch's three (no FMA: a subtraction then a product).
// Each thread takes 4 consecutive elements (one float4 where they are all there, one by one at the tail).
/* kernelevolve-plan
{"steps": [
  {"library": "cublas.gemm",
   "args": ["x", "linear_weight", "out", "batch_size", "out_features", "in_features"],
   "options": {"b_transposed": "true"}},
  {"kernel": "sub_mul_relu", "grid": ["cdiv(batch_size * out_features, 1024)"], "block": [256],
   "args": ["out", "linear_bias", "batch_size * out_features", "out_features"]}]}
*/

__device__ __forceinline__ float epilogue(float v) {
  // x - subtract_value, * multiply_value, torch.relu: the module's constants 2.0 and 1.5.
  const float t = __fmul_rn(__fsub_rn(v, 2.0f), 1.5f);
  return fmaxf(t, 0.0f);
}

extern "C" __global__ void sub_mul_relu(float* out, const float* bias, long long n, long long cols) {
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
