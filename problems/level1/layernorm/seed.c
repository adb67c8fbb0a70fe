// Seed for layernorm over the rows of a row-major M x N matrix:
// y = (x - mean) / sqrt(var + eps) * gamma + beta, biased variance computed around the mean.
//
// ACC: independent partial sums for the mean and the variance; ACC = 1 makes each one serial chain
// of dependent float additions, which the compiler may not reorder (no -ffast-math) or vectorize.
#include <math.h>
#include <stdint.h>

#ifndef ACC
#define ACC 1
#endif

void layernorm(const float* x, const float* gamma, const float* beta, float* y, int64_t M, int64_t N, float eps) {
  for (int64_t i = 0; i < M; ++i) {
    const float* in = x + i * N;
    float* out = y + i * N;
    float acc[ACC];
    for (int u = 0; u < ACC; ++u) acc[u] = 0.0f;
    int64_t j = 0;
    for (; j + ACC <= N; j += ACC)
      for (int u = 0; u < ACC; ++u) acc[u] += in[j + u];
    float sum = 0.0f;
    for (int u = 0; u < ACC; ++u) sum += acc[u];
    for (; j < N; ++j) sum += in[j];
    const float mean = sum / (float)N;

    for (int u = 0; u < ACC; ++u) acc[u] = 0.0f;
    j = 0;
    for (; j + ACC <= N; j += ACC)
      for (int u = 0; u < ACC; ++u) acc[u] += (in[j + u] - mean) * (in[j + u] - mean);
    float sq = 0.0f;
    for (int u = 0; u < ACC; ++u) sq += acc[u];
    for (; j < N; ++j) sq += (in[j] - mean) * (in[j] - mean);
    const float rstd = 1.0f / sqrtf(sq / (float)N + eps);

    for (j = 0; j < N; ++j) out[j] = (in[j] - mean) * rstd * gamma[j] + beta[j];
  }
}
