// Trusted reference for embedding_bag_sum, accumulated in double:
// out[b, d] = sum over j in [offsets[b], end_b) of psw[j] * W[idx[j], d], end_b = offsets[b + 1] (NNZ for the last bag).
#include <stdint.h>

void embedding_bag_sum(const float* W, const int64_t* idx, const int64_t* offsets, const float* psw, float* out,
                       int64_t V, int64_t D, int64_t B, int64_t NNZ) {
  (void)V;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t start = offsets[b], end = b + 1 < B ? offsets[b + 1] : NNZ;
    for (int64_t d = 0; d < D; ++d) {
      double s = 0.0;
      for (int64_t j = start; j < end; ++j) s += (double)psw[j] * (double)W[idx[j] * D + d];
      out[b * D + d] = (float)s;
    }
  }
}
