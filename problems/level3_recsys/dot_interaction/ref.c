// Trusted reference for dot_interaction, in double: out[b, i * (i - 1) / 2 + j] = dot(X[b, i, :], X[b, j, :])
// for 0 <= j < i < F.
#include <stdint.h>

void dot_interaction(const float* X, float* out, int64_t B, int64_t F, int64_t D, int64_t P) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 1; i < F; ++i)
      for (int64_t j = 0; j < i; ++j) {
        double s = 0.0;
        for (int64_t k = 0; k < D; ++k) s += (double)X[(b * F + i) * D + k] * (double)X[(b * F + j) * D + k];
        out[b * P + i * (i - 1) / 2 + j] = (float)s;
      }
}
