// Trusted reference: batch normalization for inference, NCHW, in double:
// y = (x - mean[c]) / sqrt(|var[c]| + eps) * gamma[c] + beta[c]. One thread per element, for any launch
// shape (a grid-stride loop over the flattened thread index): it is launched with the seed's rule.
extern "C" __global__ void batchnorm(const float* x, const float* mean, const float* var, const float* gamma,
                                     const float* beta, float* y, long long N, long long C, long long H, long long W,
                                     float eps) {
  const unsigned long long threads = (unsigned long long)gridDim.x * gridDim.y * gridDim.z * blockDim.x * blockDim.y * blockDim.z;
  const unsigned long long block = ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned long long first = block * blockDim.x * blockDim.y * blockDim.z +
                                   (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  const unsigned long long plane = (unsigned long long)H * (unsigned long long)W;
  const unsigned long long total = (unsigned long long)N * (unsigned long long)C * plane;
  for (unsigned long long i = first; i < total; i += threads) {
    const unsigned long long c = (i / plane) % (unsigned long long)C;
    y[i] = (float)(((double)x[i] - (double)mean[c]) / sqrt(fabs((double)var[c]) + (double)eps) * (double)gamma[c] +
                   (double)beta[c]);
  }
}
