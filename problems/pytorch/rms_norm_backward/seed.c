// Seed for rms_norm_backward: the backward of RMSNorm over each of the batch_size * seq_len rows of hidden
// floats, y = x * r * weight with r = 1 / sqrt(mean(x^2) + 1e-6). Given grad_out (dL/dy):
//   grad_x[r, j]    = r * (g[j] - n[j] * mean_k(g[k] * n[k])), g = grad_out * weight, n = x * r
//   grad_weight[j]  = sum over rows of grad_out[r, j] * n[r, j]
//
// GW:  0 sums grad_weight column by column, down the rows (a stride of hidden floats: a cache line per
//      element); 1 accumulates it row by row into grad_weight (contiguous, vectorizes).
// ACC: independent partial sums for each row's two reductions (1: one dependent chain of float additions).
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#ifndef GW
#define GW 0
#endif
#ifndef ACC
#define ACC 1
#endif

static float row_sum(const float* a, const float* b, int64_t n) {
  float acc[ACC];
  for (int k = 0; k < ACC; ++k) acc[k] = 0.0f;
  int64_t j = 0;
  for (; j + ACC <= n; j += ACC)
    for (int k = 0; k < ACC; ++k) acc[k] += a[j + k] * b[j + k];
  float sum = 0.0f;
  for (int k = 0; k < ACC; ++k) sum += acc[k];
  for (; j < n; ++j) sum += a[j] * b[j];
  return sum;
}

void rms_norm_backward(const float* x, const float* weight, const float* grad_out, float* grad_x, float* grad_weight,
                       int64_t batch_size, int64_t seq_len, int64_t hidden) {
  const int64_t rows = batch_size * seq_len, n = hidden;
  const float eps = 1e-6f;
  float* rstds = malloc(sizeof(float) * (size_t)(rows > 0 ? rows : 1));
  if (GW) {
    for (int64_t j = 0; j < n; ++j) grad_weight[j] = 0.0f;
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    const float* go = grad_out + r * n;
    const float rstd = 1.0f / sqrtf(row_sum(xr, xr, n) / (float)n + eps);
    rstds[r] = rstd;
    // mean(g * n) = rstd * mean(grad_out * weight * x)
    float dot = 0.0f;
    for (int64_t j = 0; j < n; ++j) dot += go[j] * weight[j] * xr[j];
    const float c = rstd * rstd * dot / (float)n;
    for (int64_t j = 0; j < n; ++j) grad_x[r * n + j] = rstd * (go[j] * weight[j] - xr[j] * c);
    if (GW) {
      for (int64_t j = 0; j < n; ++j) grad_weight[j] += go[j] * xr[j] * rstd;
    }
  }
  if (!GW) {
    for (int64_t j = 0; j < n; ++j) {
      float sum = 0.0f;
      for (int64_t r = 0; r < rows; ++r) sum += grad_out[r * n + j] * x[r * n + j] * rstds[r];
      grad_weight[j] = sum;
    }
  }
  free(rstds);
}
