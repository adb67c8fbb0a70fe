// Trusted reference: y[j,i] = x[i,j], one thread per element, for any launch shape (a grid-stride loop
// over the flattened thread index): it is launched with the seed's rule.
extern "C" __global__ void transpose(const float* x, float* y, long long M, long long N) {
  const unsigned long long threads = (unsigned long long)gridDim.x * gridDim.y * gridDim.z * blockDim.x * blockDim.y * blockDim.z;
  const unsigned long long block = ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned long long first = block * blockDim.x * blockDim.y * blockDim.z +
                                   (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;

  for (unsigned long long e = first; e < (unsigned long long)(M * N); e += threads) {
    const long long i = (long long)(e / (unsigned long long)N), j = (long long)(e % (unsigned long long)N);
    y[j * M + i] = x[e];
  }
}
