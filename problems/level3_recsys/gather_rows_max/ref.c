// Trusted reference for gather_rows_max: out[b, d] = max over l < L of W[idx[b, l], d] (exact).
#include <stdint.h>

void gather_rows_max(const float* W, const int32_t* idx, float* out, int64_t V, int64_t D, int64_t B, int64_t L) {
  (void)V;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t d = 0; d < D; ++d) {
      float m = W[(int64_t)idx[b * L] * D + d];
      for (int64_t l = 1; l < L; ++l) {
        const float v = W[(int64_t)idx[b * L + l] * D + d];
        if (v > m) m = v;
      }
      out[b * D + d] = m;
    }
}
