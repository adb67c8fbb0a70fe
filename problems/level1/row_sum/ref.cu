// Trusted reference: one thread per row, summed in double. Written for any launch shape (a grid-stride
// loop over the flattened thread index), since the reference is launched with the seed's launch rule.
extern "C" __global__ void row_sum(const float* x, float* y, long long M, long long N) {
  const unsigned long long threads = (unsigned long long)gridDim.x * gridDim.y * gridDim.z * blockDim.x * blockDim.y * blockDim.z;
  const unsigned long long block = ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned long long first = block * blockDim.x * blockDim.y * blockDim.z +
                                   (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  for (unsigned long long i = first; i < (unsigned long long)M; i += threads) {
    double s = 0.0;
    for (long long j = 0; j < N; ++j) s += (double)x[i * N + j];
    y[i] = (float)s;
  }
}
