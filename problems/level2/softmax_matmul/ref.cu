// Trusted reference: O[b,i,d] = sum_j softmax(S[b,i,:])_j V[b,j,d] in double, one thread per output, for any
// launch shape (a grid-stride loop over the flattened thread index): it is launched with the seed's rule.
extern "C" __global__ void softmax_matmul(const float* S, const float* V, float* O, long long B, long long T, long long D) {
  const unsigned long long threads = (unsigned long long)gridDim.x * gridDim.y * gridDim.z * blockDim.x * blockDim.y * blockDim.z;
  const unsigned long long block = ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned long long first = block * blockDim.x * blockDim.y * blockDim.z +
                                   (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;

  for (unsigned long long e = first; e < (unsigned long long)(B * T * D); e += threads) {
    const long long b = (long long)(e / (unsigned long long)(T * D));
    const long long i = (long long)((e / (unsigned long long)D) % (unsigned long long)T);
    const long long d = (long long)(e % (unsigned long long)D);
    const float* s = S + (b * T + i) * T;
    double peak = (double)s[0];
    for (long long j = 1; j < T; ++j) peak = fmax(peak, (double)s[j]);
    double sum = 0.0, acc = 0.0;
    for (long long j = 0; j < T; ++j) {
      const double p = exp((double)s[j] - peak);
      sum += p;
      acc += p * (double)V[(b * T + j) * D + d];
    }
    O[e] = (float)(acc / sum);
  }
}
