// Trusted reference: y[i] = sum_j sigmoid(x[i,:] . W[j,:] + b[j]) in double, one thread per row of x, for
// any launch shape (a grid-stride loop over the flattened thread index): it is launched with the seed's
// rule.
extern "C" __global__ void gemm_sigmoid_rowsum(const float* x, const float* W, const float* b, float* y, long long M,
                                               long long N, long long K) {
  const unsigned long long threads = (unsigned long long)gridDim.x * gridDim.y * gridDim.z * blockDim.x * blockDim.y * blockDim.z;
  const unsigned long long block = ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned long long first = block * blockDim.x * blockDim.y * blockDim.z +
                                   (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;

  for (unsigned long long i = first; i < (unsigned long long)M; i += threads) {
    double total = 0.0;
    for (long long j = 0; j < N; ++j) {
      double v = (double)b[j];
      for (long long k = 0; k < K; ++k) v += (double)x[i * K + k] * (double)W[j * K + k];
      total += 1.0 / (1.0 + exp(-v));
    }
    y[i] = (float)total;
  }
}
