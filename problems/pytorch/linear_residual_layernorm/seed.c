// Seed for linear_residual_layernorm: h = x fc_weight^T + fc_bias + residual, then out = nn.LayerNorm(hidden)
// of each row of h: (h - mean) / sqrt(var + 1e-5) * norm_weight + norm_bias (biased variance). x is
// batch_size x in_features, fc_weight hidden x in_features as nn.Linear stores it, residual and out
// batch_size x hidden, row-major fp32.
//
// Row by row: the dot products, bias and residual into out's row, then its mean and variance (two passes),
// then the normalization in place.
// ACC: independent partial sums per dot product and per statistic (ACC = 1: one dependent chain of float
//      additions each, which neither pipelines nor vectorizes).
// JB:  outputs (i, j) .. (i, j + JB - 1) computed together, so each loaded piece of x's row i serves JB
//      rows of the weight.
#include <math.h>
#include <stdint.h>

#ifndef ACC
#define ACC 1
#endif
#ifndef JB
#define JB 1
#endif

// res[c] = dot(a, w + c * K) for c < nj; inlined with the constant JB for full blocks.
static inline __attribute__((always_inline)) void dots(const float* a, const float* w, int64_t K, int64_t nj,
                                                       float* res) {
  float acc[JB][ACC];
  for (int64_t c = 0; c < nj; ++c)
    for (int u = 0; u < ACC; ++u) acc[c][u] = 0.0f;
  int64_t k = 0;
  for (; k + ACC <= K; k += ACC)
    for (int64_t c = 0; c < nj; ++c)
      for (int u = 0; u < ACC; ++u) acc[c][u] += a[k + u] * w[c * K + k + u];
  for (int64_t c = 0; c < nj; ++c) {
    float s = 0.0f;
    for (int u = 0; u < ACC; ++u) s += acc[c][u];
    for (int64_t t = k; t < K; ++t) s += a[t] * w[c * K + t];
    res[c] = s;
  }
}

void linear_residual_layernorm(const float* x, const float* residual, const float* fc_weight, const float* fc_bias,
                               const float* norm_weight, const float* norm_bias, float* out, int64_t batch_size,
                               int64_t in_features, int64_t hidden) {
  const int64_t K = in_features, n = hidden;
  for (int64_t i = 0; i < batch_size; ++i) {
    const float* xi = x + i * K;
    const float* ri = residual + i * n;
    float* o = out + i * n;
    int64_t j = 0;
    for (; j + JB <= n; j += JB) dots(xi, fc_weight + j * K, K, JB, o + j);
    for (; j < n; ++j) dots(xi, fc_weight + j * K, K, 1, o + j);
    for (j = 0; j < n; ++j) o[j] += fc_bias[j] + ri[j];

    float acc[ACC];
    for (int u = 0; u < ACC; ++u) acc[u] = 0.0f;
    for (j = 0; j + ACC <= n; j += ACC)
      for (int u = 0; u < ACC; ++u) acc[u] += o[j + u];
    float sum = 0.0f;
    for (int u = 0; u < ACC; ++u) sum += acc[u];
    for (; j < n; ++j) sum += o[j];
    const float mean = sum / (float)n;

    for (int u = 0; u < ACC; ++u) acc[u] = 0.0f;
    for (j = 0; j + ACC <= n; j += ACC)
      for (int u = 0; u < ACC; ++u) acc[u] += (o[j + u] - mean) * (o[j + u] - mean);
    float sq = 0.0f;
    for (int u = 0; u < ACC; ++u) sq += acc[u];
    for (; j < n; ++j) sq += (o[j] - mean) * (o[j] - mean);
    const float rstd = 1.0f / sqrtf(sq / (float)n + 1e-5f);

    for (j = 0; j < n; ++j) o[j] = (o[j] - mean) * rstd * norm_weight[j] + norm_bias[j];
  }
}
