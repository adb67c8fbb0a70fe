// Trusted reference: jagged segment sums in double, one thread per output element, for any launch shape (a
// grid-stride loop over the flattened thread index): it is launched with the seed's rule.
extern "C" __global__ void jagged_segment_sum(const float* values, const long long* offsets, float* out,
                                              long long NNZ, long long D, long long B) {
  const unsigned long long threads = (unsigned long long)gridDim.x * gridDim.y * gridDim.z * blockDim.x * blockDim.y * blockDim.z;
  const unsigned long long block = ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned long long first = block * blockDim.x * blockDim.y * blockDim.z +
                                   (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  for (unsigned long long e = first; e < (unsigned long long)(B * D); e += threads) {
    const long long b = (long long)(e / (unsigned long long)D), d = (long long)(e % (unsigned long long)D);
    const long long start = offsets[b], end = b + 1 < B ? offsets[b + 1] : NNZ;
    double s = 0.0;
    for (long long j = start; j < end; ++j) s += (double)values[j * D + d];
    out[e] = (float)s;
  }
}
