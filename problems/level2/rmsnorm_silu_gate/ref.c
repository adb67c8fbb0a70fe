// Trusted reference for rmsnorm_silu_gate, in double: y = x / sqrt(mean(x^2) + eps) * w * z / (1 + exp(-z)).
#include <math.h>
#include <stdint.h>

void rmsnorm_silu_gate(const float* x, const float* z, const float* w, float* y, int64_t M, int64_t N, float eps) {
  for (int64_t i = 0; i < M; ++i) {
    double sq = 0.0;
    for (int64_t j = 0; j < N; ++j) sq += (double)x[i * N + j] * (double)x[i * N + j];
    const double r = 1.0 / sqrt(sq / (double)N + (double)eps);
    for (int64_t j = 0; j < N; ++j) {
      const double g = (double)z[i * N + j];
      y[i * N + j] = (float)((double)x[i * N + j] * r * (double)w[j] * (g / (1.0 + exp(-g))));
    }
  }
}
