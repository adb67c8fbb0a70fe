// Trusted reference: DLRM's dot interaction in double, one thread per output, for any launch shape (a
// grid-stride loop over the flattened thread index): it is launched with the seed's rule.
extern "C" __global__ void dot_interaction(const float* X, float* out, long long B, long long F, long long D, long long P) {
  const unsigned long long threads = (unsigned long long)gridDim.x * gridDim.y * gridDim.z * blockDim.x * blockDim.y * blockDim.z;
  const unsigned long long block = ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned long long first = block * blockDim.x * blockDim.y * blockDim.z +
                                   (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  for (unsigned long long e = first; e < (unsigned long long)(B * P); e += threads) {
    const long long b = (long long)(e / (unsigned long long)P), p = (long long)(e % (unsigned long long)P);
    long long i = 1;  // the row of pair p: the largest i with i * (i - 1) / 2 <= p
    while ((i + 1) * i / 2 <= p) ++i;
    const long long j = p - i * (i - 1) / 2;
    double s = 0.0;
    for (long long k = 0; k < D; ++k) s += (double)X[(b * F + i) * D + k] * (double)X[(b * F + j) * D + k];
    out[e] = (float)s;
  }
}
