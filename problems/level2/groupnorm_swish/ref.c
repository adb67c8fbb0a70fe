// Trusted reference for groupnorm_swish, in double: per (n, group) mean and biased variance,
// v = (x - mean) / sqrt(var + eps) * gamma[c] + beta[c], y = v / (1 + exp(-v)).
#include <math.h>
#include <stdint.h>

void groupnorm_swish(const float* x, const float* gamma, const float* beta, float* y, int64_t N, int64_t C, int64_t H,
                     int64_t W, int64_t G, float eps) {
  const int64_t cpg = C / G, plane = H * W, count = cpg * plane;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < G; ++g) {
      const int64_t base = (n * C + g * cpg) * plane;
      double mean = 0.0;
      for (int64_t k = 0; k < count; ++k) mean += (double)x[base + k];
      mean /= (double)count;
      double var = 0.0;
      for (int64_t k = 0; k < count; ++k) var += ((double)x[base + k] - mean) * ((double)x[base + k] - mean);
      var /= (double)count;
      const double rstd = 1.0 / sqrt(var + (double)eps);
      for (int64_t c = g * cpg; c < (g + 1) * cpg; ++c)
        for (int64_t p = 0; p < plane; ++p) {
          const int64_t at = (n * C + c) * plane + p;
          const double v = ((double)x[at] - mean) * rstd * (double)gamma[c] + (double)beta[c];
          y[at] = (float)(v / (1.0 + exp(-v)));
        }
    }
}
