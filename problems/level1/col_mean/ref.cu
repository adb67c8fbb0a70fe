// Trusted reference: y[j] = mean over i of x[i,j] in double, one thread per column, for any launch
// shape (a grid-stride loop over the flattened thread index): it is launched with the seed's rule.
extern "C" __global__ void col_mean(const float* x, float* y, long long M, long long N) {
  const unsigned long long threads = (unsigned long long)gridDim.x * gridDim.y * gridDim.z * blockDim.x * blockDim.y * blockDim.z;
  const unsigned long long block = ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned long long first = block * blockDim.x * blockDim.y * blockDim.z +
                                   (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;

  for (unsigned long long j = first; j < (unsigned long long)N; j += threads) {
    double sum = 0.0;
    for (long long i = 0; i < M; ++i) sum += (double)x[i * N + j];
    y[j] = (float)(sum / (double)M);
  }
}
