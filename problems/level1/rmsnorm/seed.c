// Seed for rmsnorm over the rows of a row-major M x N matrix: y = x / sqrt(mean(x^2) + eps) * w.
//
// ACC: independent partial sums of squares; ACC = 1 is one serial chain of dependent float
// additions, which the compiler may not reorder (no -ffast-math) or vectorize.
#include <math.h>
#include <stdint.h>

#ifndef ACC
#define ACC 1
#endif

void rmsnorm(const float* x, const float* w, float* y, int64_t M, int64_t N, float eps) {
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
    const float r = 1.0f / sqrtf(sq / (float)N + eps);
    for (j = 0; j < N; ++j) out[j] = in[j] * r * w[j];
  }
}
