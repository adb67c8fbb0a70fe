// Trusted reference for jagged_segment_sum, accumulated in double: out[b, d] = sum over j in
// [offsets[b], end_b) of values[j, d], end_b = offsets[b + 1] (NNZ for the last segment).
#include <stdint.h>

void jagged_segment_sum(const float* values, const int64_t* offsets, float* out, int64_t NNZ, int64_t D, int64_t B) {
  for (int64_t b = 0; b < B; ++b) {
    const int64_t start = offsets[b], end = b + 1 < B ? offsets[b + 1] : NNZ;
    for (int64_t d = 0; d < D; ++d) {
      double s = 0.0;
      for (int64_t j = start; j < end; ++j) s += (double)values[j * D + d];
      out[b * D + d] = (float)s;
    }
  }
}
