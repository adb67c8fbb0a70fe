// Trusted reference: 3 x 3 max pooling, stride 2, padding 1 (padded taps skipped), NCHW, one thread per
// output, for any launch shape (a grid-stride loop over the flattened thread index): it is launched with
// the seed's rule.
extern "C" __global__ void maxpool2d(const float* x, float* y, long long N, long long C, long long H, long long W,
                                     long long OH, long long OW) {
  const unsigned long long threads = (unsigned long long)gridDim.x * gridDim.y * gridDim.z * blockDim.x * blockDim.y * blockDim.z;
  const unsigned long long block = ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned long long first = block * blockDim.x * blockDim.y * blockDim.z +
                                   (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;

  const unsigned long long total = (unsigned long long)(N * C * OH * OW);
  for (unsigned long long e = first; e < total; e += threads) {
    const long long ow = (long long)(e % (unsigned long long)OW);
    const long long oh = (long long)((e / (unsigned long long)OW) % (unsigned long long)OH);
    const long long p = (long long)(e / (unsigned long long)(OW * OH));
    const float* in = x + p * H * W;
    bool any = false;
    float m = 0.f;
    for (long long ih = 2 * oh - 1; ih <= 2 * oh + 1; ++ih)
      for (long long iw = 2 * ow - 1; iw <= 2 * ow + 1; ++iw)
        if (ih >= 0 && ih < H && iw >= 0 && iw < W && (!any || in[ih * W + iw] > m)) {
          m = in[ih * W + iw];
          any = true;
        }
    y[e] = m;
  }
}
