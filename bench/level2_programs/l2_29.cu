// KernelBench level 2, problem 29 (Matmul_Mish_Mish): out = mish(mish(x @ W^T + b)).
// Plan: cuBLAS's GEMM (the call torch.mm makes): x @ W^T straight into the output, then ONE elementwise
// kernel that adds the bias in fp32 (as the Linear's epilogue does) and applies the rest in place: v = mish(mish(v)), mish(v)
// = v * tanh(log1p(exp(v))), the formula of PyTorch's CUDA kernel (full-precision expf, log1pf, tanhf).
// Each thread takes 4 consecutive elements (one float4 where they are all there, one by one at the tail).
/* kernelevolve-plan
{"steps": [
  {"library": "cublas.gemm",
   "args": ["x", "linear_weight", "out", "batch_size", "out_features", "in_features"],
   "options": {"b_transposed": "true"}},
  {"kernel": "mish_mish", "grid": ["cdiv(batch_size * out_features, 1024)"], "block": [256],
   "args": ["out", "linear_bias", "batch_size * out_features", "out_features"]}]}
*/
// PyTorch's CUDA Mish (ActivationMishKernel.cu): x * tanh(log1p(exp(x))) in fp32. For a large x, exp
// overflows to inf, log1p(inf) = inf, tanh(inf) = 1: x, as PyTorch gives.
__device__ __forceinline__ float mish(float x) { return x * tanhf(log1pf(expf(x))); }

__device__ __forceinline__ float epilogue(float v) {
  return mish(mish(v));
}

extern "C" __global__ void mish_mish(float* out, const float* bias, long long n, long long cols) {
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
