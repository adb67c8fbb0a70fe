// Trusted reference: y = max(x, 0), element-wise (exact). One thread per element, for any launch shape (a
// grid-stride loop over the flattened thread index): the reference is launched with the seed's rule.
extern "C" __global__ void relu(const float* x, float* y, long long M, long long N) {
  const unsigned long long threads = (unsigned long long)gridDim.x * gridDim.y * gridDim.z * blockDim.x * blockDim.y * blockDim.z;
  const unsigned long long block = ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned long long first = block * blockDim.x * blockDim.y * blockDim.z +
                                   (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  const unsigned long long total = (unsigned long long)M * (unsigned long long)N;
  for (unsigned long long i = first; i < total; i += threads) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
