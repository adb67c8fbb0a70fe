// Seed for linear_relu: out[i, j] = relu(sum over k of x[i, k] * fc_weight[j, k] + fc_bias[j]), x of
// batch_size x in_features, fc_weight of out_features x in_features as nn.Linear stores it (row-major fp32).
//
// Every output is a dot product of two contiguous rows, then the bias and ReLU in registers.
// ACC: independent partial sums per dot product (ACC = 1: one dependent chain of float additions over
//      in_features, one add per four cycles of latency, and no vectorization).
// JB:  outputs (i, j) .. (i, j + JB - 1) computed together, so each loaded piece of x's row i serves JB
//      rows of the weight.
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

void linear_relu(const float* x, const float* fc_weight, const float* fc_bias, float* out, int64_t batch_size,
                 int64_t in_features, int64_t out_features) {
  const int64_t K = in_features, N = out_features;
  for (int64_t i = 0; i < batch_size; ++i) {
    const float* xi = x + i * K;
    float* o = out + i * N;
    int64_t j = 0;
    for (; j + JB <= N; j += JB) dots(xi, fc_weight + j * K, K, JB, o + j);
    for (; j < N; ++j) dots(xi, fc_weight + j * K, K, 1, o + j);
    for (j = 0; j < N; ++j) {
      const float v = o[j] + fc_bias[j];
      o[j] = v < 0.0f ? 0.0f : v;
    }
  }
}
