// Trusted reference: one thread per element of C, accumulated in double, for any launch shape (a
// grid-stride loop over the flattened thread index): the reference is launched with the seed's rule.
extern "C" __global__ void matmul(const float* A, const float* B, float* C, long long M, long long N, long long K) {
  const unsigned long long threads = (unsigned long long)gridDim.x * gridDim.y * gridDim.z * blockDim.x * blockDim.y * blockDim.z;
  const unsigned long long block = ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned long long first = block * blockDim.x * blockDim.y * blockDim.z +
                                   (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  const unsigned long long total = (unsigned long long)M * (unsigned long long)N;
  for (unsigned long long idx = first; idx < total; idx += threads) {
    const long long i = (long long)(idx / (unsigned long long)N), j = (long long)(idx % (unsigned long long)N);
    double s = 0.0;
    for (long long k = 0; k < K; ++k) s += (double)A[i * K + k] * (double)B[k * N + j];
    C[idx] = (float)s;
  }
}
