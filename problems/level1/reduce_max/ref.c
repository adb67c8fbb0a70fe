// Trusted reference for reduce_max: y[b,c] = max over r of x[b,r,c].
#include <stdint.h>

void reduce_max(const float* x, float* y, int64_t B, int64_t R, int64_t C) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) {
      float m = x[(b * R) * C + c];
      for (int64_t r = 1; r < R; ++r) {
        const float v = x[(b * R + r) * C + c];
        if (v > m) m = v;
      }
      y[b * C + c] = m;
    }
}
