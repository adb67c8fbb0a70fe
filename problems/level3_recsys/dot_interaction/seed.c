// Seed for dot_interaction (DLRM): out[b, i * (i - 1) / 2 + j] = dot(X[b, i, :], X[b, j, :]) for
// 0 <= j < i < F: the strictly lower triangle of each sample's F x F Gram matrix, row by row.
//
// ACC: independent partial sums per dot product (ACC = 1: one serial chain of float additions over D).
// JB:  pairs (i, j) .. (i, j + JB - 1) computed together; each piece of row i loaded once serves JB of them.
#include <stdint.h>

#ifndef ACC
#define ACC 1
#endif
#ifndef JB
#define JB 1
#endif

void dot_interaction(const float* X, float* out, int64_t B, int64_t F, int64_t D, int64_t P) {
  for (int64_t b = 0; b < B; ++b) {
    const float* x = X + b * F * D;
    float* o = out + b * P;
    for (int64_t i = 1; i < F; ++i) {
      const float* a = x + i * D;
      float* oi = o + i * (i - 1) / 2;
      int64_t j0 = 0;
      for (; j0 + JB <= i; j0 += JB) {
        float acc[JB][ACC];
        for (int c = 0; c < JB; ++c)
          for (int u = 0; u < ACC; ++u) acc[c][u] = 0.0f;
        int64_t k = 0;
        for (; k + ACC <= D; k += ACC)
          for (int c = 0; c < JB; ++c)
            for (int u = 0; u < ACC; ++u) acc[c][u] += a[k + u] * x[(j0 + c) * D + k + u];
        for (int c = 0; c < JB; ++c) {
          float s = 0.0f;
          for (int u = 0; u < ACC; ++u) s += acc[c][u];
          for (int64_t t = k; t < D; ++t) s += a[t] * x[(j0 + c) * D + t];
          oi[j0 + c] = s;
        }
      }
      for (; j0 < i; ++j0) {  // pairs left over when JB does not divide i
        float s = 0.0f;
        for (int64_t t = 0; t < D; ++t) s += a[t] * x[j0 * D + t];
        oi[j0] = s;
      }
    }
  }
}
