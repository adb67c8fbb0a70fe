// Trusted reference: GroupNorm then Swish in double, one thread per (sample, group), for any launch shape
// (a grid-stride loop over the flattened thread index): it is launched with the seed's rule.
extern "C" __global__ void groupnorm_swish(const float* x, const float* gamma, const float* beta, float* y, long long N,
                                           long long C, long long H, long long W, long long G, float eps) {
  const unsigned long long threads = (unsigned long long)gridDim.x * gridDim.y * gridDim.z * blockDim.x * blockDim.y * blockDim.z;
  const unsigned long long block = ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned long long first = block * blockDim.x * blockDim.y * blockDim.z +
                                   (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;

  const long long cpg = C / G, plane = H * W, count = cpg * plane;
  for (unsigned long long t = first; t < (unsigned long long)(N * G); t += threads) {
    const long long n = (long long)(t / (unsigned long long)G), g = (long long)(t % (unsigned long long)G);
    const long long base = (n * C + g * cpg) * plane;
    double mean = 0.0;
    for (long long k = 0; k < count; ++k) mean += (double)x[base + k];
    mean /= (double)count;
    double var = 0.0;
    for (long long k = 0; k < count; ++k) var += ((double)x[base + k] - mean) * ((double)x[base + k] - mean);
    var /= (double)count;
    const double rstd = 1.0 / sqrt(var + (double)eps);
    for (long long k = 0; k < count; ++k) {
      const long long c = g * cpg + k / plane;
      const double v = ((double)x[base + k] - mean) * rstd * (double)gamma[c] + (double)beta[c];
      y[base + k] = (float)(v / (1.0 + exp(-v)));
    }
  }
}
