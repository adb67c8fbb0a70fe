// Seed for layer_norm_affine: nn.LayerNorm(hidden) over each of the batch_size * seq_len rows of hidden floats:
// out[r, j] = (x[r, j] - mean_r) / sqrt(var_r + 1e-5) * norm_weight[j] + norm_bias[j], var_r the biased
// variance (two passes: the mean, then the mean of squared deviations).
//
// ACC:   independent partial sums for the mean and the variance (ACC = 1: one dependent chain of float
//        additions per row and pass, which neither pipelines nor vectorizes).
// HOIST: 0 takes a square root and a division per element, as the formula reads; 1 computes
//        1 / sqrt(var + eps) once per row and multiplies.
#include <math.h>
#include <stdint.h>

#ifndef ACC
#define ACC 1
#endif
#ifndef HOIST
#define HOIST 0
#endif

void layer_norm_affine(const float* x, const float* norm_weight, const float* norm_bias, float* out,
                       int64_t batch_size, int64_t seq_len, int64_t hidden) {
  const int64_t rows = batch_size * seq_len, n = hidden;
  const float eps = 1e-5f;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* o = out + r * n;
    float acc[ACC];
    for (int a = 0; a < ACC; ++a) acc[a] = 0.0f;
    int64_t j = 0;
    for (; j + ACC <= n; j += ACC)
      for (int a = 0; a < ACC; ++a) acc[a] += xr[j + a];
    float sum = 0.0f;
    for (int a = 0; a < ACC; ++a) sum += acc[a];
    for (; j < n; ++j) sum += xr[j];
    const float mean = sum / (float)n;

    for (int a = 0; a < ACC; ++a) acc[a] = 0.0f;
    j = 0;
    for (; j + ACC <= n; j += ACC)
      for (int a = 0; a < ACC; ++a) {
        const float d = xr[j + a] - mean;
        acc[a] += d * d;
      }
    float sq = 0.0f;
    for (int a = 0; a < ACC; ++a) sq += acc[a];
    for (; j < n; ++j) sq += (xr[j] - mean) * (xr[j] - mean);
    const float var = sq / (float)n;

#if HOIST
    const float rstd = 1.0f / sqrtf(var + eps);
    for (j = 0; j < n; ++j) o[j] = (xr[j] - mean) * rstd * norm_weight[j] + norm_bias[j];
#else
    for (j = 0; j < n; ++j) o[j] = (xr[j] - mean) / sqrtf(var + eps) * norm_weight[j] + norm_bias[j];
#endif
  }
}
