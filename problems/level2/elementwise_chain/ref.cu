// Trusted reference: one thread per element, in double, for any launch shape (a grid-stride loop over the
// flattened thread index): the reference is launched with the seed's launch rule.
extern "C" __global__ void scale_bias_gelu(const float* x, const float* bias, float* y, long long M, long long N,
                                           float scale) {
  const unsigned long long threads = (unsigned long long)gridDim.x * gridDim.y * gridDim.z * blockDim.x * blockDim.y * blockDim.z;
  const unsigned long long block = ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned long long first = block * blockDim.x * blockDim.y * blockDim.z +
                                   (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  const unsigned long long total = (unsigned long long)M * (unsigned long long)N;
  for (unsigned long long i = first; i < total; i += threads) {
    const double v = (double)x[i] * (double)scale + (double)bias[i % (unsigned long long)N];
    y[i] = (float)(0.5 * v * (1.0 + erf(v * 0.70710678118654752440)));
  }
}
