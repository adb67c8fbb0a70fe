// Trusted reference: y[i] = sum_k A[i,k] x[k] in double, one thread per row, for any launch shape (a
// grid-stride loop over the flattened thread index): it is launched with the seed's rule.
extern "C" __global__ void matvec(const float* A, const float* x, float* y, long long M, long long K) {
  const unsigned long long threads = (unsigned long long)gridDim.x * gridDim.y * gridDim.z * blockDim.x * blockDim.y * blockDim.z;
  const unsigned long long block = ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned long long first = block * blockDim.x * blockDim.y * blockDim.z +
                                   (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;

  for (unsigned long long i = first; i < (unsigned long long)M; i += threads) {
    double sum = 0.0;
    for (long long k = 0; k < K; ++k) sum += (double)A[i * K + k] * (double)x[k];
    y[i] = (float)sum;
  }
}
