// Trusted reference: C[b,i,j] = sum_k A[b,i,k] B[b,k,j] in double, one thread per element of C, for any
// launch shape (a grid-stride loop over the flattened thread index): it is launched with the seed's rule.
extern "C" __global__ void bmm(const float* A, const float* B, float* C, long long BATCH, long long M, long long N,
                               long long K) {
  const unsigned long long threads = (unsigned long long)gridDim.x * gridDim.y * gridDim.z * blockDim.x * blockDim.y * blockDim.z;
  const unsigned long long block = ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned long long first = block * blockDim.x * blockDim.y * blockDim.z +
                                   (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;

  for (unsigned long long e = first; e < (unsigned long long)(BATCH * M * N); e += threads) {
    const long long b = (long long)(e / (unsigned long long)(M * N));
    const long long i = (long long)((e / (unsigned long long)N) % (unsigned long long)M);
    const long long j = (long long)(e % (unsigned long long)N);
    double s = 0.0;
    for (long long k = 0; k < K; ++k) s += (double)A[(b * M + i) * K + k] * (double)B[(b * K + k) * N + j];
    C[e] = (float)s;
  }
}
