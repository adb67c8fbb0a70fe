// Trusted reference: one thread per row, in double, three plain passes. Written for any launch shape
// (a grid-stride loop over the flattened thread index): the reference is launched with the seed's rule.
extern "C" __global__ void softmax(const float* x, float* y, long long M, long long N) {
  const unsigned long long threads = (unsigned long long)gridDim.x * gridDim.y * gridDim.z * blockDim.x * blockDim.y * blockDim.z;
  const unsigned long long block = ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned long long first = block * blockDim.x * blockDim.y * blockDim.z +
                                   (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  for (unsigned long long i = first; i < (unsigned long long)M; i += threads) {
    const float* in = x + i * N;
    double peak = (double)in[0];
    for (long long j = 1; j < N; ++j) peak = fmax(peak, (double)in[j]);
    double sum = 0.0;
    for (long long j = 0; j < N; ++j) sum += exp((double)in[j] - peak);
    for (long long j = 0; j < N; ++j) y[i * N + j] = (float)(exp((double)in[j] - peak) / sum);
  }
}
