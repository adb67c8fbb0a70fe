// Seed for linear_gelu_scale: out[i, j] = gelu(sum over k of x[i, k] * fc_weight[j, k] + fc_bias[j]) * scale,
// exact GELU gelu(v) = 0.5 v (1 + erf(v / sqrt(2))), x of batch_size x in_features, fc_weight of
// out_features x in_features as nn.Linear stores it (row-major fp32), scale a scalar argument.
//
// Every output is a dot product of two contiguous rows, then the epilogue in registers.
// IB:  rows of x computed together against each row of the weight (IB = 1 reads the whole weight,
//      out_features x in_features floats, again for every row of x; IB rows share each loaded piece).
// ACC: independent partial sums per dot product (ACC = 1: one dependent chain of float additions).
#include <math.h>
#include <stdint.h>

#ifndef IB
#define IB 1
#endif
#ifndef ACC
#define ACC 1
#endif

// res[r * N] = dot(a + r * K, w) for r < ni; inlined with the constant IB for full blocks.
static inline __attribute__((always_inline)) void dots(const float* a, const float* w, int64_t K, int64_t N,
                                                       int64_t ni, float* res) {
  float acc[IB][ACC];
  for (int64_t r = 0; r < ni; ++r)
    for (int u = 0; u < ACC; ++u) acc[r][u] = 0.0f;
  int64_t k = 0;
  for (; k + ACC <= K; k += ACC)
    for (int64_t r = 0; r < ni; ++r)
      for (int u = 0; u < ACC; ++u) acc[r][u] += a[r * K + k + u] * w[k + u];
  for (int64_t r = 0; r < ni; ++r) {
    float s = 0.0f;
    for (int u = 0; u < ACC; ++u) s += acc[r][u];
    for (int64_t t = k; t < K; ++t) s += a[r * K + t] * w[t];
    res[r * N] = s;
  }
}

void linear_gelu_scale(const float* x, float scale, const float* fc_weight, const float* fc_bias, float* out,
                       int64_t batch_size, int64_t in_features, int64_t out_features) {
  const int64_t K = in_features, N = out_features;
  for (int64_t i0 = 0; i0 < batch_size; i0 += IB) {
    const int64_t ni = batch_size - i0 < IB ? batch_size - i0 : IB;
    for (int64_t j = 0; j < N; ++j) {
      if (ni == IB) dots(x + i0 * K, fc_weight + j * K, K, N, IB, out + i0 * N + j);
      else dots(x + i0 * K, fc_weight + j * K, K, N, ni, out + i0 * N + j);
    }
    for (int64_t r = 0; r < ni; ++r)
      for (int64_t j = 0; j < N; ++j) {
        const float v = out[(i0 + r) * N + j] + fc_bias[j];
        out[(i0 + r) * N + j] = 0.5f * v * (1.0f + erff(v * 0.70710678f)) * scale;
      }
  }
}
