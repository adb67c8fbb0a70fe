// Trusted reference for residual_layernorm, in double: h = x + r; y = layernorm(h) * gamma + beta.
#include <math.h>
#include <stdint.h>

void residual_layernorm(const float* x, const float* r, const float* gamma, const float* beta, float* h, float* y,
                        int64_t M, int64_t N, float eps) {
  for (int64_t i = 0; i < M; ++i) {
    double mean = 0.0;
    for (int64_t j = 0; j < N; ++j) {
      const float s = x[i * N + j] + r[i * N + j];  // the residual stream is a float tensor
      h[i * N + j] = s;
      mean += (double)s;
    }
    mean /= (double)N;
    double var = 0.0;
    for (int64_t j = 0; j < N; ++j) var += ((double)h[i * N + j] - mean) * ((double)h[i * N + j] - mean);
    var /= (double)N;
    const double rstd = 1.0 / sqrt(var + (double)eps);
    for (int64_t j = 0; j < N; ++j)
      y[i * N + j] = (float)(((double)h[i * N + j] - mean) * rstd * (double)gamma[j] + (double)beta[j]);
  }
}
