// Trusted reference: y[i] = sum_j sigmoid(x[i,:] . W[j,:] + b[j]) in double, for any launch shape (a
// grid-stride loop over the flattened thread index): it is launched with the seed's rule. When the
// launch's threads come in whole warps, each warp takes a row and its lanes split the columns (the sum is
// then combined with shuffles, in double); otherwise each thread takes a row alone.
extern "C" __global__ void gemm_sigmoid_rowsum(const float* x, const float* W, const float* b, float* y, long long M,
                                               long long N, long long K) {
  const unsigned long long threads = (unsigned long long)gridDim.x * gridDim.y * gridDim.z * blockDim.x * blockDim.y * blockDim.z;
  const unsigned long long block = ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned long long first = block * blockDim.x * blockDim.y * blockDim.z +
                                   (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  const bool warps = (blockDim.x * blockDim.y * blockDim.z) % 32 == 0;
  const unsigned long long lanes = warps ? 32 : 1;
  const unsigned long long lane = first % lanes;
  for (unsigned long long i = first / lanes; i < (unsigned long long)M; i += threads / lanes) {
    double total = 0.0;
    for (long long j = (long long)lane; j < N; j += (long long)lanes) {
      double v = (double)b[j];
      for (long long k = 0; k < K; ++k) v += (double)x[i * K + k] * (double)W[j * K + k];
      total += 1.0 / (1.0 + exp(-v));
    }
    if (warps)
      for (int o = 16; o > 0; o /= 2) total += __shfl_down_sync(0xffffffffu, total, o);
    if (lane == 0) y[i] = (float)total;
  }
}
