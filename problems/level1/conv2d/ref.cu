// Trusted reference: 3 x 3 convolution, stride 1, no padding, NCHW, in double, one thread per output,
// for any launch shape (a grid-stride loop over the flattened thread index): it is launched with the
// seed's rule.
extern "C" __global__ void conv2d(const float* x, const float* w, float* y, long long N, long long CI, long long CO,
                                  long long H, long long W, long long OH, long long OW) {
  const unsigned long long threads = (unsigned long long)gridDim.x * gridDim.y * gridDim.z * blockDim.x * blockDim.y * blockDim.z;
  const unsigned long long block = ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned long long first = block * blockDim.x * blockDim.y * blockDim.z +
                                   (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;

  const unsigned long long total = (unsigned long long)(N * CO * OH * OW);
  for (unsigned long long e = first; e < total; e += threads) {
    const long long ow = (long long)(e % (unsigned long long)OW);
    const long long oh = (long long)((e / (unsigned long long)OW) % (unsigned long long)OH);
    const long long co = (long long)((e / (unsigned long long)(OW * OH)) % (unsigned long long)CO);
    const long long n = (long long)(e / (unsigned long long)(OW * OH * CO));
    double sum = 0.0;
    for (long long ci = 0; ci < CI; ++ci)
      for (long long kh = 0; kh < 3; ++kh)
        for (long long kw = 0; kw < 3; ++kw)
          sum += (double)x[((n * CI + ci) * H + oh + kh) * W + ow + kw] * (double)w[((co * CI + ci) * 3 + kh) * 3 + kw];
    y[e] = (float)sum;
  }
}
