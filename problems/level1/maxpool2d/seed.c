// Seed for maxpool2d: 3 x 3 window, stride 2, padding 1, NCHW; OH = (H - 1) / 2 + 1, likewise OW.
//
// INTERIOR = 0: every tap of every output tests its bounds.
// INTERIOR = 1: outputs whose window lies inside the image (1 <= oh, 2 oh + 1 < H, same for w) take
//               a branch-free path whose stride-2 loads the compiler vectorizes; only the border tests.
// ROWMAX = 1 (with INTERIOR): the maximum of the band's three rows first, then of three neighbouring
//               columns of it: six comparisons per output instead of nine.
#include <stdint.h>

#ifndef INTERIOR
#define INTERIOR 0
#endif
#ifndef ROWMAX
#define ROWMAX 0
#endif

static inline float window_max(const float* in, int64_t H, int64_t W, int64_t oh, int64_t ow) {
  float m = -__builtin_inff();
  for (int64_t kh = 0; kh < 3; ++kh)
    for (int64_t kw = 0; kw < 3; ++kw) {
      const int64_t ih = 2 * oh - 1 + kh, iw = 2 * ow - 1 + kw;
      if (ih >= 0 && ih < H && iw >= 0 && iw < W) {
        const float v = in[ih * W + iw];
        m = v > m ? v : m;
      }
    }
  return m;
}

static inline float max3(float a, float b, float c) {
  const float m = a > b ? a : b;
  return m > c ? m : c;
}

void maxpool2d(const float* x, float* y, int64_t N, int64_t C, int64_t H, int64_t W, int64_t OH, int64_t OW) {
  for (int64_t p = 0; p < N * C; ++p) {
    const float* in = x + p * H * W;
    float* out = y + p * OH * OW;
#if INTERIOR
    // Interior outputs: 1 <= oh with 2 oh + 1 <= H - 1, and the same along w.
    const int64_t oh1 = (H - 2) / 2 + 1, ow1 = (W - 2) / 2 + 1;  // first row / column past the interior
    float band[W];  // the column maxima of one band of three rows (ROWMAX)
    for (int64_t oh = 0; oh < OH; ++oh) {
      if (oh < 1 || oh >= oh1) {
        for (int64_t ow = 0; ow < OW; ++ow) out[oh * OW + ow] = window_max(in, H, W, oh, ow);
        continue;
      }
      out[oh * OW] = window_max(in, H, W, oh, 0);
      const float* r0 = in + (2 * oh - 1) * W;
      const float* r1 = r0 + W;
      const float* r2 = r1 + W;
#if ROWMAX
      for (int64_t iw = 0; iw < W; ++iw) band[iw] = max3(r0[iw], r1[iw], r2[iw]);
      for (int64_t ow = 1; ow < ow1; ++ow) out[oh * OW + ow] = max3(band[2 * ow - 1], band[2 * ow], band[2 * ow + 1]);
#else
      (void)band;
      for (int64_t ow = 1; ow < ow1; ++ow) {
        const int64_t c = 2 * ow - 1;
        out[oh * OW + ow] = max3(max3(r0[c], r0[c + 1], r0[c + 2]), max3(r1[c], r1[c + 1], r1[c + 2]),
                                 max3(r2[c], r2[c + 1], r2[c + 2]));
      }
#endif
      for (int64_t ow = ow1; ow < OW; ++ow) out[oh * OW + ow] = window_max(in, H, W, oh, ow);
    }
#else
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) out[oh * OW + ow] = window_max(in, H, W, oh, ow);
#endif
  }
}
