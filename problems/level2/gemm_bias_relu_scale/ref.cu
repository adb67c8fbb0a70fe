// Trusted reference: y = relu(x W^T + b) * scale in double, one thread per output, for any launch shape
// (a grid-stride loop over the flattened thread index): it is launched with the seed's rule.
extern "C" __global__ void gemm_bias_relu_scale(const float* x, const float* W, const float* b, float* y, long long M,
                                                long long N, long long K, float scale) {
  const unsigned long long threads = (unsigned long long)gridDim.x * gridDim.y * gridDim.z * blockDim.x * blockDim.y * blockDim.z;
  const unsigned long long block = ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned long long first = block * blockDim.x * blockDim.y * blockDim.z +
                                   (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;

  for (unsigned long long e = first; e < (unsigned long long)(M * N); e += threads) {
    const long long i = (long long)(e / (unsigned long long)N), j = (long long)(e % (unsigned long long)N);
    double s = (double)b[j];
    for (long long k = 0; k < K; ++k) s += (double)x[i * K + k] * (double)W[j * K + k];
    y[e] = (float)((s > 0.0 ? s : 0.0) * (double)scale);
  }
}
