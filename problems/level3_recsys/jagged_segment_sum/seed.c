// Seed for jagged_segment_sum: out[b, :] = sum of values[j, :] over j in offsets[b] .. offsets[b + 1] - 1,
// the last segment running to NNZ; an empty segment gives a row of zeros.
//
// BLOCK: the output is built in column blocks of BLOCK columns: for each block, every segment adds BLOCK
//        floats of each of its rows. BLOCK = 1 reads each segment D times down a column, a stride of D
//        floats between loads; BLOCK >= D reads every row once, contiguously (and vectorizes).
// U:     rows added at once into U independent partial sums (U = 1: one serial chain per column).
#include <stdint.h>

#ifndef BLOCK
#define BLOCK 1
#endif
#ifndef U
#define U 1
#endif

void jagged_segment_sum(const float* values, const int64_t* offsets, float* out, int64_t NNZ, int64_t D, int64_t B) {
  for (int64_t d0 = 0; d0 < D; d0 += BLOCK) {
    const int64_t w = D - d0 < BLOCK ? D - d0 : BLOCK;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t start = offsets[b], end = b + 1 < B ? offsets[b + 1] : NNZ;
      float acc[U][BLOCK];
      for (int u = 0; u < U; ++u)
        for (int64_t c = 0; c < w; ++c) acc[u][c] = 0.0f;
      int64_t j = start;
      for (; j + U <= end; j += U)
        for (int u = 0; u < U; ++u) {
          const float* row = values + (j + u) * D + d0;
          for (int64_t c = 0; c < w; ++c) acc[u][c] += row[c];
        }
      for (; j < end; ++j) {
        const float* row = values + j * D + d0;
        for (int64_t c = 0; c < w; ++c) acc[0][c] += row[c];
      }
      for (int64_t c = 0; c < w; ++c) {
        float s = acc[0][c];
        for (int u = 1; u < U; ++u) s += acc[u][c];
        out[b * D + d0 + c] = s;
      }
    }
  }
}
