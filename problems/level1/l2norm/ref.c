// Trusted reference for l2norm over rows, in double: y = x / max(||x||_2, 1e-12).
#include <math.h>
#include <stdint.h>

void l2norm(const float* x, float* y, int64_t M, int64_t N) {
  for (int64_t i = 0; i < M; ++i) {
    const float* in = x + i * N;
    double sq = 0.0;
    for (int64_t j = 0; j < N; ++j) sq += (double)in[j] * (double)in[j];
    double norm = sqrt(sq);
    if (norm < 1e-12) norm = 1e-12;
    for (int64_t j = 0; j < N; ++j) y[i * N + j] = (float)((double)in[j] / norm);
  }
}
