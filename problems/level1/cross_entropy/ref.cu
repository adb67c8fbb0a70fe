// Trusted reference: per-sample cross-entropy in double, one thread per row, for any launch shape (a
// grid-stride loop over the flattened thread index): it is launched with the seed's rule.
extern "C" __global__ void cross_entropy(const float* logits, const long long* target, float* loss, long long M,
                                         long long C) {
  const unsigned long long threads = (unsigned long long)gridDim.x * gridDim.y * gridDim.z * blockDim.x * blockDim.y * blockDim.z;
  const unsigned long long block = ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned long long first = block * blockDim.x * blockDim.y * blockDim.z +
                                   (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;

  for (unsigned long long i = first; i < (unsigned long long)M; i += threads) {
    const float* row = logits + i * C;
    const long long t = ((target[i] % C) + C) % C;
    double peak = (double)row[0];
    for (long long j = 1; j < C; ++j) peak = fmax(peak, (double)row[j]);
    double sum = 0.0;
    for (long long j = 0; j < C; ++j) sum += exp((double)row[j] - peak);
    loss[i] = (float)(peak + log(sum) - (double)row[t]);
  }
}
