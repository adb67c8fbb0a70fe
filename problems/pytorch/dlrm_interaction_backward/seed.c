// Seed for dlrm_interaction_backward: the backward of DLRM's dot interaction (dlrm_interaction's module), whose
// forward gives out[b, p] = dot(features[b, i, :], features[b, j, :]) for the pairs i < j of each sample's
// num_fields rows, p in row-major pair order ((0, 1), (0, 2), ..., (0, F - 1), (1, 2), ...). Given grad_out
// (dL/dout, batch_size x num_pairs), each pair (i, j) of sample b adds grad_out[b, p] * features[b, j, :] into
// grad_features[b, i, :] and grad_out[b, p] * features[b, i, :] into grad_features[b, j, :]; in matrix form,
// grad_features[b] = (G + G^T) @ features[b] with G the strictly upper triangle that grad_out[b] fills.
//
// GATHER: 0 walks the pairs and scatters each one's two contributions into both rows (every row of
//         grad_features read and written again F - 1 times); 1 builds each row i at once, summing over the
//         other rows j with the pair's index computed from (min(i, j), max(i, j)), and writes it once.
#include <stdint.h>

#ifndef GATHER
#define GATHER 0
#endif

// The index of pair (i, j), i < j, in row-major order over the strict upper triangle of an F x F matrix.
static inline int64_t pair_index(int64_t i, int64_t j, int64_t F) { return i * (2 * F - i - 1) / 2 + (j - i - 1); }

void dlrm_interaction_backward(const float* features, const float* grad_out, float* grad_features, int64_t batch_size,
                               int64_t num_fields, int64_t embedding_dim, int64_t num_pairs) {
  const int64_t F = num_fields, D = embedding_dim;
  for (int64_t b = 0; b < batch_size; ++b) {
    const float* x = features + b * F * D;
    const float* g = grad_out + b * num_pairs;
    float* dx = grad_features + b * F * D;
#if GATHER
    for (int64_t i = 0; i < F; ++i) {
      for (int64_t k = 0; k < D; ++k) dx[i * D + k] = 0.0f;
      for (int64_t j = 0; j < F; ++j) {
        if (j == i) continue;
        const float w = g[i < j ? pair_index(i, j, F) : pair_index(j, i, F)];
        for (int64_t k = 0; k < D; ++k) dx[i * D + k] += w * x[j * D + k];
      }
    }
#else
    for (int64_t e = 0; e < F * D; ++e) dx[e] = 0.0f;
    int64_t p = 0;
    for (int64_t i = 0; i + 1 < F; ++i)
      for (int64_t j = i + 1; j < F; ++j, ++p)
        for (int64_t k = 0; k < D; ++k) {
          dx[i * D + k] += g[p] * x[j * D + k];
          dx[j * D + k] += g[p] * x[i * D + k];
        }
#endif
  }
}
