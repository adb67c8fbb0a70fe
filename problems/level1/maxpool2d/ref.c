// Trusted reference for maxpool2d: 3 x 3 window, stride 2, padding 1 (padded taps are skipped), NCHW.
#include <stdint.h>

void maxpool2d(const float* x, float* y, int64_t N, int64_t C, int64_t H, int64_t W, int64_t OH, int64_t OW) {
  for (int64_t p = 0; p < N * C; ++p) {
    const float* in = x + p * H * W;
    float* out = y + p * OH * OW;
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        float m = -__builtin_inff();
        for (int64_t ih = 2 * oh - 1; ih <= 2 * oh + 1; ++ih)
          for (int64_t iw = 2 * ow - 1; iw <= 2 * ow + 1; ++iw)
            if (ih >= 0 && ih < H && iw >= 0 && iw < W && in[ih * W + iw] > m) m = in[ih * W + iw];
        out[oh * OW + ow] = m;
      }
  }
}
