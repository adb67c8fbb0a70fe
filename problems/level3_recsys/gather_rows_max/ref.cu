// Trusted reference: gather then max, one thread per output, for any launch shape (a grid-stride loop over
// the flattened thread index): it is launched with the seed's rule.
extern "C" __global__ void gather_rows_max(const float* W, const int* idx, float* out, long long V, long long D,
                                           long long B, long long L) {
  const unsigned long long threads = (unsigned long long)gridDim.x * gridDim.y * gridDim.z * blockDim.x * blockDim.y * blockDim.z;
  const unsigned long long block = ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned long long first = block * blockDim.x * blockDim.y * blockDim.z +
                                   (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  (void)V;
  for (unsigned long long e = first; e < (unsigned long long)(B * D); e += threads) {
    const long long b = (long long)(e / (unsigned long long)D), d = (long long)(e % (unsigned long long)D);
    float m = W[(long long)idx[b * L] * D + d];
    for (long long l = 1; l < L; ++l) {
      const float v = W[(long long)idx[b * L + l] * D + d];
      if (v > m) m = v;
    }
    out[e] = m;
  }
}
