// Trusted reference: C[i,j] = sum_k A[i,k] B[j,k] (C = A x B^T) in double, one thread per element of C,
// for any launch shape (a grid-stride loop over the flattened thread index): it is launched with the
// seed's rule.
extern "C" __global__ void matmul_rect(const float* A, const float* B, float* C, long long M, long long N, long long K) {
  const unsigned long long threads = (unsigned long long)gridDim.x * gridDim.y * gridDim.z * blockDim.x * blockDim.y * blockDim.z;
  const unsigned long long block = ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned long long first = block * blockDim.x * blockDim.y * blockDim.z +
                                   (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;

  for (unsigned long long e = first; e < (unsigned long long)(M * N); e += threads) {
    const long long i = (long long)(e / (unsigned long long)N), j = (long long)(e % (unsigned long long)N);
    double s = 0.0;
    for (long long k = 0; k < K; ++k) s += (double)A[i * K + k] * (double)B[j * K + k];
    C[e] = (float)s;
  }
}
