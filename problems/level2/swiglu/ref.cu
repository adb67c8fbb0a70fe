// Trusted reference: y[i,j] = silu(x[i,:] . W1[j,:]) * (x[i,:] . W3[j,:]) in double, one thread per output,
// for any launch shape (a grid-stride loop over the flattened thread index): it is launched with the
// seed's rule.
extern "C" __global__ void swiglu(const float* x, const float* W1, const float* W3, float* y, long long M, long long N,
                                  long long K) {
  const unsigned long long threads = (unsigned long long)gridDim.x * gridDim.y * gridDim.z * blockDim.x * blockDim.y * blockDim.z;
  const unsigned long long block = ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned long long first = block * blockDim.x * blockDim.y * blockDim.z +
                                   (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;

  for (unsigned long long e = first; e < (unsigned long long)(M * N); e += threads) {
    const long long i = (long long)(e / (unsigned long long)N), j = (long long)(e % (unsigned long long)N);
    double g = 0.0, u = 0.0;
    for (long long k = 0; k < K; ++k) {
      g += (double)x[i * K + k] * (double)W1[j * K + k];
      u += (double)x[i * K + k] * (double)W3[j * K + k];
    }
    y[e] = (float)(g / (1.0 + exp(-g)) * u);
  }
}
