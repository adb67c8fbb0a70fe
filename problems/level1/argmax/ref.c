// Trusted reference for argmax: idx[b,c] = the first r with the largest x[b,r,c].
#include <stdint.h>

void argmax(const float* x, int64_t* idx, int64_t B, int64_t R, int64_t C) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) {
      float m = x[(b * R) * C + c];
      int64_t at = 0;
      for (int64_t r = 1; r < R; ++r) {
        const float v = x[(b * R + r) * C + c];
        if (v > m) {
          m = v;
          at = r;
        }
      }
      idx[b * C + c] = at;
    }
}
