// Trusted reference: L2 normalization of each row in double, one thread per row, for any launch shape
// (a grid-stride loop over the flattened thread index): it is launched with the seed's rule.
extern "C" __global__ void l2norm(const float* x, float* y, long long M, long long N) {
  const unsigned long long threads = (unsigned long long)gridDim.x * gridDim.y * gridDim.z * blockDim.x * blockDim.y * blockDim.z;
  const unsigned long long block = ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned long long first = block * blockDim.x * blockDim.y * blockDim.z +
                                   (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;

  for (unsigned long long i = first; i < (unsigned long long)M; i += threads) {
    const float* in = x + i * N;
    double sq = 0.0;
    for (long long j = 0; j < N; ++j) sq += (double)in[j] * (double)in[j];
    const double norm = fmax(sqrt(sq), 1e-12);
    for (long long j = 0; j < N; ++j) y[i * N + j] = (float)((double)in[j] / norm);
  }
}
