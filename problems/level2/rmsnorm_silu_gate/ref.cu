// Trusted reference: y = x / sqrt(mean(x^2) + eps) * w * z / (1 + exp(-z)) in double, one thread per row,
// for any launch shape (a grid-stride loop over the flattened thread index): it is launched with the
// seed's rule.
extern "C" __global__ void rmsnorm_silu_gate(const float* x, const float* z, const float* w, float* y, long long M,
                                             long long N, float eps) {
  const unsigned long long threads = (unsigned long long)gridDim.x * gridDim.y * gridDim.z * blockDim.x * blockDim.y * blockDim.z;
  const unsigned long long block = ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned long long first = block * blockDim.x * blockDim.y * blockDim.z +
                                   (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;

  for (unsigned long long i = first; i < (unsigned long long)M; i += threads) {
    double sq = 0.0;
    for (long long j = 0; j < N; ++j) sq += (double)x[i * N + j] * (double)x[i * N + j];
    const double r = 1.0 / sqrt(sq / (double)N + (double)eps);
    for (long long j = 0; j < N; ++j) {
      const double g = (double)z[i * N + j];
      y[i * N + j] = (float)((double)x[i * N + j] * r * (double)w[j] * (g / (1.0 + exp(-g))));
    }
  }
}
