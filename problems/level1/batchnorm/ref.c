// Trusted reference for batchnorm (inference), NCHW, in double:
// y = (x - mean[c]) / sqrt(|var[c]| + eps) * gamma[c] + beta[c].
#include <math.h>
#include <stdint.h>

void batchnorm(const float* x, const float* mean, const float* var, const float* gamma, const float* beta, float* y,
               int64_t N, int64_t C, int64_t H, int64_t W, float eps) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      const double inv = 1.0 / sqrt(fabs((double)var[c]) + (double)eps);
      for (int64_t p = 0; p < H * W; ++p) {
        const int64_t at = (n * C + c) * H * W + p;
        y[at] = (float)(((double)x[at] - (double)mean[c]) * inv * (double)gamma[c] + (double)beta[c]);
      }
    }
}
