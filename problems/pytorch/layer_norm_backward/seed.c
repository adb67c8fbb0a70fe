// Seed for layer_norm_backward: the backward of nn.LayerNorm(hidden) (layer_norm_affine's module) over each of
// the batch_size * seq_len rows of hidden floats, y = xhat * norm_weight + norm_bias with
// xhat = (x - mean) * rstd, rstd = 1 / sqrt(var + 1e-5), var the biased variance. Given grad_out (dL/dy), with
// g = grad_out * norm_weight:
//   grad_x[r, j]         = rstd * (g[j] - mean_k(g[k]) - xhat[j] * mean_k(g[k] * xhat[k]))
//   grad_norm_weight[j]  = sum over rows of grad_out[r, j] * xhat[r, j]
//   grad_norm_bias[j]    = sum over rows of grad_out[r, j]
// The forward's statistics are not saved for the backward here: each row's mean and rstd are recomputed.
//
// GW:  0 sums the two weight gradients column by column, down the rows (a stride of hidden floats per
//      element); 1 accumulates them row by row (contiguous, vectorizes).
// ACC: independent partial sums for each row's mean and variance (1: one dependent chain of float additions).
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#ifndef GW
#define GW 0
#endif
#ifndef ACC
#define ACC 1
#endif

// The sum of (a[j] - shift)^power over j < n, power 1 or 2, in ACC independent partial sums.
static float shifted_sum(const float* a, float shift, int power, int64_t n) {
  float part[ACC];
  for (int k = 0; k < ACC; ++k) part[k] = 0.0f;
  int64_t j = 0;
  for (; j + ACC <= n; j += ACC)
    for (int k = 0; k < ACC; ++k) {
      const float d = a[j + k] - shift;
      part[k] += power == 2 ? d * d : d;
    }
  float total = 0.0f;
  for (int k = 0; k < ACC; ++k) total += part[k];
  for (; j < n; ++j) {
    const float d = a[j] - shift;
    total += power == 2 ? d * d : d;
  }
  return total;
}

void layer_norm_backward(const float* x, const float* norm_weight, const float* norm_bias, const float* grad_out,
                         float* grad_x, float* grad_norm_weight, float* grad_norm_bias, int64_t batch_size,
                         int64_t seq_len, int64_t hidden) {
  (void)norm_bias;  // the bias only shifts the output: no gradient depends on it
  const int64_t rows = batch_size * seq_len, n = hidden;
  const float eps = 1e-5f;
  float* means = malloc(sizeof(float) * (size_t)(rows > 0 ? rows : 1));
  float* rstds = malloc(sizeof(float) * (size_t)(rows > 0 ? rows : 1));
  if (GW) {
    for (int64_t j = 0; j < n; ++j) {
      grad_norm_weight[j] = 0.0f;
      grad_norm_bias[j] = 0.0f;
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    const float* go = grad_out + r * n;
    const float mean = shifted_sum(xr, 0.0f, 1, n) / (float)n;
    const float rstd = 1.0f / sqrtf(shifted_sum(xr, mean, 2, n) / (float)n + eps);
    means[r] = mean;
    rstds[r] = rstd;
    float sum_g = 0.0f, sum_g_xhat = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
      const float g = go[j] * norm_weight[j];
      sum_g += g;
      sum_g_xhat += g * (xr[j] - mean) * rstd;
    }
    const float mean_g = sum_g / (float)n, mean_g_xhat = sum_g_xhat / (float)n;
    for (int64_t j = 0; j < n; ++j) {
      const float xhat = (xr[j] - mean) * rstd;
      grad_x[r * n + j] = rstd * (go[j] * norm_weight[j] - mean_g - xhat * mean_g_xhat);
    }
    if (GW) {
      for (int64_t j = 0; j < n; ++j) {
        grad_norm_weight[j] += go[j] * (xr[j] - mean) * rstd;
        grad_norm_bias[j] += go[j];
      }
    }
  }
  if (!GW) {
    for (int64_t j = 0; j < n; ++j) {
      float sum_w = 0.0f, sum_b = 0.0f;
      for (int64_t r = 0; r < rows; ++r) {
        sum_w += grad_out[r * n + j] * (x[r * n + j] - means[r]) * rstds[r];
        sum_b += grad_out[r * n + j];
      }
      grad_norm_weight[j] = sum_w;
      grad_norm_bias[j] = sum_b;
    }
  }
  free(means);
  free(rstds);
}
