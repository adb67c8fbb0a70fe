// Seed for dlrm_interaction (DLRM's dot-product feature interaction): for each sample b of features
// (batch_size x num_fields x embedding_dim fp32), the dot products of every pair of its feature rows i < j,
// in row-major pair order: out[b, p] = dot(features[b, i, :], features[b, j, :]), p running over
// (0, 1), (0, 2), ..., (0, F - 1), (1, 2), ..., (F - 2, F - 1); num_pairs = F (F - 1) / 2.
//
// ACC: independent partial sums per dot product (ACC = 1: one dependent chain of float additions over
//      embedding_dim, no vectorization).
// JB:  pairs (i, j) .. (i, j + JB - 1) computed together, so each loaded piece of row i serves JB of them.
#include <stdint.h>

#ifndef ACC
#define ACC 1
#endif
#ifndef JB
#define JB 1
#endif

// res[c] = dot(a, w + c * D) for c < nj; inlined with the constant JB for full blocks.
static inline __attribute__((always_inline)) void dots(const float* a, const float* w, int64_t D, int64_t nj,
                                                       float* res) {
  float acc[JB][ACC];
  for (int64_t c = 0; c < nj; ++c)
    for (int u = 0; u < ACC; ++u) acc[c][u] = 0.0f;
  int64_t k = 0;
  for (; k + ACC <= D; k += ACC)
    for (int64_t c = 0; c < nj; ++c)
      for (int u = 0; u < ACC; ++u) acc[c][u] += a[k + u] * w[c * D + k + u];
  for (int64_t c = 0; c < nj; ++c) {
    float s = 0.0f;
    for (int u = 0; u < ACC; ++u) s += acc[c][u];
    for (int64_t t = k; t < D; ++t) s += a[t] * w[c * D + t];
    res[c] = s;
  }
}

void dlrm_interaction(const float* features, float* out, int64_t batch_size, int64_t num_fields,
                      int64_t embedding_dim, int64_t num_pairs) {
  const int64_t F = num_fields, D = embedding_dim;
  for (int64_t b = 0; b < batch_size; ++b) {
    const float* x = features + b * F * D;
    float* o = out + b * num_pairs;
    for (int64_t i = 0; i + 1 < F; ++i) {
      int64_t j = i + 1;
      for (; j + JB <= F; j += JB, o += JB) dots(x + i * D, x + j * D, D, JB, o);
      for (; j < F; ++j, ++o) dots(x + i * D, x + j * D, D, 1, o);
    }
  }
}
