// Trusted reference for scale_bias_gelu, in double: y = gelu(x * scale + bias[j]), exact (erf) GELU.
#include <math.h>
#include <stdint.h>

void scale_bias_gelu(const float* x, const float* bias, float* y, int64_t M, int64_t N, float scale) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      const double v = (double)x[i * N + j] * (double)scale + (double)bias[j];
      y[i * N + j] = (float)(0.5 * v * (1.0 + erf(v * 0.70710678118654752440)));
    }
}
