// Trusted reference for rmsnorm over rows, in double: y = x / sqrt(mean(x^2) + eps) * w.
#include <math.h>
#include <stdint.h>

void rmsnorm(const float* x, const float* w, float* y, int64_t M, int64_t N, float eps) {
  for (int64_t i = 0; i < M; ++i) {
    const float* in = x + i * N;
    double sq = 0.0;
    for (int64_t j = 0; j < N; ++j) sq += (double)in[j] * (double)in[j];
    const double r = 1.0 / sqrt(sq / (double)N + (double)eps);
    for (int64_t j = 0; j < N; ++j) y[i * N + j] = (float)((double)in[j] * r * (double)w[j]);
  }
}
