// KernelBench level 3, problem 1 (MLP): Linear(input_size, 16384), ReLU, Linear(16384, 16384), ReLU,
// Linear(16384, output_size), every Linear with its bias. Per layer, cuBLAS's GEMM (the call torch.mm makes)
// into a temporary (the output for the last), then one small kernel in place that adds the bias in fp32 (as
// the Linear's epilogue adds it) and, for the hidden layers, applies the ReLU. The hidden width 16384 is the
// module's own (layer_sizes); the import writes it as a number in the weights' shapes, so the plan does too.
/* kernelevolve-plan
{"temporaries": [{"name": "h1", "dtype": "f32", "shape": ["batch_size", "16384"]},
                 {"name": "h2", "dtype": "f32", "shape": ["batch_size", "16384"]}],
 "steps": [
  {"library": "cublas.gemm", "args": ["x", "network_0_weight", "h1", "batch_size", "16384", "input_size"],
   "options": {"b_transposed": "true"}},
  {"kernel": "bias_act", "grid": ["cdiv(batch_size * 16384, 1024)"], "block": [256],
   "args": ["h1", "network_0_bias", "batch_size * 16384", "16384", "1"]},
  {"library": "cublas.gemm", "args": ["h1", "network_2_weight", "h2", "batch_size", "16384", "16384"],
   "options": {"b_transposed": "true"}},
  {"kernel": "bias_act", "grid": ["cdiv(batch_size * 16384, 1024)"], "block": [256],
   "args": ["h2", "network_2_bias", "batch_size * 16384", "16384", "1"]},
  {"library": "cublas.gemm", "args": ["h2", "network_4_weight", "out", "batch_size", "output_size", "16384"],
   "options": {"b_transposed": "true"}},
  {"kernel": "bias_act", "grid": ["cdiv(batch_size * output_size, 1024)"], "block": [256],
   "args": ["out", "network_4_bias", "batch_size * output_size", "output_size", "0"]}]}
*/

// v + bias[col], then max(., 0) where relu is 1. Four consecutive elements of a row per thread (float4 loads
// when cols % 4 == 0; otherwise one by one).
extern "C" __global__ void bias_act(float* y, const float* bias, long long n, long long cols, long long relu) {
  const long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * 4;
  if (cols % 4 == 0 && i + 3 < n) {
    float4 v = *reinterpret_cast<float4*>(y + i);
    const float4 b = *reinterpret_cast<const float4*>(bias + i % cols);
    v.x += b.x, v.y += b.y, v.z += b.z, v.w += b.w;
    if (relu) v.x = fmaxf(v.x, 0.0f), v.y = fmaxf(v.y, 0.0f), v.z = fmaxf(v.z, 0.0f), v.w = fmaxf(v.w, 0.0f);
    *reinterpret_cast<float4*>(y + i) = v;
  } else {
    for (long long j = i; j < n && j < i + 4; ++j) {
      const float v = y[j] + bias[j % cols];
      y[j] = relu ? fmaxf(v, 0.0f) : v;
    }
  }
}
