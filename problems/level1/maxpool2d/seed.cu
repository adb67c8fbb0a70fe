// 2-D max pooling over an NCHW fp32 tensor, 3 x 3 window, stride 2, padding 1 (padded taps never win);
// OH = (H - 1) / 2 + 1, likewise OW. One thread per output; a block is TX x (THREADS / TX) threads over
// (ow, oh) of one (n, c) plane (blockIdx.z); each thread may compute OPT outputs along ow, TX apart.
// With TX = 1 (the seed) the 32 threads of a warp take 32 different output rows: their loads are rows
// 2 W floats apart, never coalesced. TX >= 32 puts a warp along a row.
#ifndef THREADS
#define THREADS 64
#endif
#ifndef TX
#define TX 1
#endif
#ifndef OPT
#define OPT 1
#endif
#define TY (THREADS / TX)
#define KE_LOWEST (-3.402823466e+38f)

extern "C" __global__ void __launch_bounds__(THREADS) maxpool2d(const float* __restrict__ x, float* __restrict__ y,
                                                                long long N, long long C, long long H, long long W,
                                                                long long OH, long long OW) {
  const long long plane = blockIdx.z;
  const long long oh = (long long)blockIdx.y * TY + threadIdx.y;
  if (oh >= OH) return;
  const float* in = x + plane * H * W;
  float* out = y + plane * OH * OW;
#pragma unroll
  for (int k = 0; k < OPT; ++k) {
    const long long ow = (long long)blockIdx.x * TX * OPT + threadIdx.x + (long long)k * TX;
    if (ow >= OW) continue;
    float m = KE_LOWEST;
#pragma unroll
    for (int kh = 0; kh < 3; ++kh) {
      const long long ih = 2 * oh - 1 + kh;
      if (ih < 0 || ih >= H) continue;
#pragma unroll
      for (int kw = 0; kw < 3; ++kw) {
        const long long iw = 2 * ow - 1 + kw;
        if (iw >= 0 && iw < W) m = fmaxf(m, in[ih * W + iw]);
      }
    }
    out[oh * OW + ow] = m;
  }
}
