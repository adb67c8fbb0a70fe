// Trusted reference: one thread per row, in double, two-pass mean and variance. Written for any launch
// shape (a grid-stride loop over the flattened thread index): it is launched with the seed's rule.
extern "C" __global__ void layernorm(const float* x, const float* gamma, const float* beta, float* y, long long M,
                                     long long N, float eps) {
  const unsigned long long threads = (unsigned long long)gridDim.x * gridDim.y * gridDim.z * blockDim.x * blockDim.y * blockDim.z;
  const unsigned long long block = ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned long long first = block * blockDim.x * blockDim.y * blockDim.z +
                                   (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  for (unsigned long long i = first; i < (unsigned long long)M; i += threads) {
    const float* in = x + i * N;
    double mean = 0.0;
    for (long long j = 0; j < N; ++j) mean += (double)in[j];
    mean /= (double)N;
    double var = 0.0;
    for (long long j = 0; j < N; ++j) var += ((double)in[j] - mean) * ((double)in[j] - mean);
    var /= (double)N;
    const double rstd = 1.0 / sqrt(var + (double)eps);
    for (long long j = 0; j < N; ++j)
      y[i * N + j] = (float)(((double)in[j] - mean) * rstd * (double)gamma[j] + (double)beta[j]);
  }
}
