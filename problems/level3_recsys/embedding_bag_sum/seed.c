// Seed for embedding_bag_sum: out[b, :] = sum over the bag's positions j of psw[j] * W[idx[j], :]; bag b
// is offsets[b] .. offsets[b + 1] - 1, the last bag runs to NNZ, and an empty bag gives a row of zeros.
//
// BLOCK: the output is built in column blocks of BLOCK columns; for each block, every bag walks its
//        positions and adds BLOCK floats of each gathered row. BLOCK = 1 visits every gathered row D times,
//        one float (and one reload of the index and the weight) per visit; BLOCK >= D reads each row once,
//        in contiguous, vectorizable pieces.
// PF:    prefetch the rows PF positions ahead (0: none), so that several random gathers are in flight.
#include <stdint.h>

#ifndef BLOCK
#define BLOCK 1
#endif
#ifndef PF
#define PF 0
#endif

void embedding_bag_sum(const float* W, const int64_t* idx, const int64_t* offsets, const float* psw, float* out,
                       int64_t V, int64_t D, int64_t B, int64_t NNZ) {
  (void)V;
  for (int64_t d0 = 0; d0 < D; d0 += BLOCK) {
    const int64_t w = D - d0 < BLOCK ? D - d0 : BLOCK;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t start = offsets[b], end = b + 1 < B ? offsets[b + 1] : NNZ;
      float acc[BLOCK];
      for (int64_t c = 0; c < w; ++c) acc[c] = 0.0f;
      for (int64_t j = start; j < end; ++j) {
#if PF
        if (j + PF < end) {
          const float* ahead = W + idx[j + PF] * D + d0;
          for (int64_t c = 0; c < w; c += 16) __builtin_prefetch(ahead + c);
        }
#endif
        const float s = psw[j];
        const float* row = W + idx[j] * D + d0;
        for (int64_t c = 0; c < w; ++c) acc[c] += s * row[c];
      }
      for (int64_t c = 0; c < w; ++c) out[b * D + d0 + c] = acc[c];
    }
  }
}
