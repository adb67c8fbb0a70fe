// Trusted reference: causal softmax of x * scale over each row in double (0 above the diagonal), one thread
// per row, for any launch shape (a grid-stride loop over the flattened thread index): it is launched with
// the seed's rule.
extern "C" __global__ void scale_mask_softmax(const float* x, float* y, long long B, long long T, float scale) {
  const unsigned long long threads = (unsigned long long)gridDim.x * gridDim.y * gridDim.z * blockDim.x * blockDim.y * blockDim.z;
  const unsigned long long block = ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned long long first = block * blockDim.x * blockDim.y * blockDim.z +
                                   (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;

  for (unsigned long long r = first; r < (unsigned long long)(B * T); r += threads) {
    const long long i = (long long)(r % (unsigned long long)T);
    const float* in = x + r * T;
    float* out = y + r * T;
    double peak = (double)in[0] * (double)scale;
    for (long long j = 1; j <= i; ++j) peak = fmax(peak, (double)in[j] * (double)scale);
    double sum = 0.0;
    for (long long j = 0; j <= i; ++j) sum += exp((double)in[j] * (double)scale - peak);
    for (long long j = 0; j < T; ++j) out[j] = j <= i ? (float)(exp((double)in[j] * (double)scale - peak) / sum) : 0.f;
  }
}
