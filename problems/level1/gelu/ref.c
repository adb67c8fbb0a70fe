// Trusted reference for gelu (exact, erf form), in double: y = 0.5 x (1 + erf(x / sqrt 2)).
#include <math.h>
#include <stdint.h>

void gelu(const float* x, float* y, int64_t M, int64_t N) {
  for (int64_t i = 0; i < M * N; ++i) {
    const double v = x[i];
    y[i] = (float)(0.5 * v * (1.0 + erf(v * 0.70710678118654752440)));
  }
}
