// Trusted reference: SiLU in double: y = x / (1 + exp(-x)). One thread per element, for any launch shape (a
// grid-stride loop over the flattened thread index): the reference is launched with the seed's rule.
extern "C" __global__ void silu(const float* x, float* y, long long M, long long N) {
  const unsigned long long threads = (unsigned long long)gridDim.x * gridDim.y * gridDim.z * blockDim.x * blockDim.y * blockDim.z;
  const unsigned long long block = ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned long long first = block * blockDim.x * blockDim.y * blockDim.z +
                                   (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  const unsigned long long total = (unsigned long long)M * (unsigned long long)N;
  for (unsigned long long i = first; i < total; i += threads) y[i] = (float)((double)x[i] / (1.0 + exp(-(double)x[i])));
}
