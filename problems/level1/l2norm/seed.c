// Seed for l2norm over the rows of a row-major M x N matrix: y = x / max(||x||_2, 1e-12).
//
// ACC: independent partial sums of squares; ACC = 1 is one serial chain of float additions.
// RECIP = 1: multiply by 1 / norm instead of dividing every element by the norm.
#include <math.h>
#include <stdint.h>

#ifndef ACC
#define ACC 1
#endif
#ifndef RECIP
#define RECIP 0
#endif

void l2norm(const float* x, float* y, int64_t M, int64_t N) {
  for (int64_t i = 0; i < M; ++i) {
    const float* in = x + i * N;
    float* out = y + i * N;
    float acc[ACC];
    for (int u = 0; u < ACC; ++u) acc[u] = 0.0f;
    int64_t j = 0;
    for (; j + ACC <= N; j += ACC)
      for (int u = 0; u < ACC; ++u) acc[u] += in[j + u] * in[j + u];
    float sq = 0.0f;
    for (int u = 0; u < ACC; ++u) sq += acc[u];
    for (; j < N; ++j) sq += in[j] * in[j];
    float norm = sqrtf(sq);
    if (norm < 1e-12f) norm = 1e-12f;
#if RECIP
    const float inv = 1.0f / norm;
    for (j = 0; j < N; ++j) out[j] = in[j] * inv;
#else
    for (j = 0; j < N; ++j) out[j] = in[j] / norm;
#endif
  }
}
