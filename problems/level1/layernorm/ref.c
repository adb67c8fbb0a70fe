// Trusted reference for layernorm over rows, in double, two-pass mean and variance.
#include <math.h>
#include <stdint.h>

void layernorm(const float* x, const float* gamma, const float* beta, float* y, int64_t M, int64_t N, float eps) {
  for (int64_t i = 0; i < M; ++i) {
    const float* in = x + i * N;
    double mean = 0.0;
    for (int64_t j = 0; j < N; ++j) mean += (double)in[j];
    mean /= (double)N;
    double var = 0.0;
    for (int64_t j = 0; j < N; ++j) var += ((double)in[j] - mean) * ((double)in[j] - mean);
    var /= (double)N;
    const double rstd = 1.0 / sqrt(var + (double)eps);
    for (int64_t j = 0; j < N; ++j)
      y[i * N + j] = (float)(((double)in[j] - mean) * rstd * (double)gamma[j] + (double)beta[j]);
  }
}
