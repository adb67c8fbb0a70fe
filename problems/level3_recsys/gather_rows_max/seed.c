// Seed for gather_rows_max: out[b, d] = max over l < L of W[idx[b, l], d], L >= 1 indices per sample.
//
// BLOCK: the output is built in column blocks of BLOCK columns; for each block, every sample walks its L
//        gathered rows and folds BLOCK floats of each. BLOCK = 1 visits each gathered row D times, one
//        float (and one reload of the index) per visit; BLOCK >= D reads each row once, in contiguous,
//        vectorizable pieces.
// LU:    rows folded at once (independent maxima, combined at the end); LU = 1 is one serial chain.
#include <stdint.h>

#ifndef BLOCK
#define BLOCK 1
#endif
#ifndef LU
#define LU 1
#endif

static inline float max2(float a, float b) { return b > a ? b : a; }

void gather_rows_max(const float* W, const int32_t* idx, float* out, int64_t V, int64_t D, int64_t B, int64_t L) {
  (void)V;
  for (int64_t d0 = 0; d0 < D; d0 += BLOCK) {
    const int64_t w = D - d0 < BLOCK ? D - d0 : BLOCK;
    for (int64_t b = 0; b < B; ++b) {
      const int32_t* ix = idx + b * L;
      float m[LU][BLOCK];
      const float* first = W + (int64_t)ix[0] * D + d0;
      for (int u = 0; u < LU; ++u)
        for (int64_t c = 0; c < w; ++c) m[u][c] = first[c];
      int64_t l = 1;
      for (; l + LU <= L; l += LU)
        for (int u = 0; u < LU; ++u) {
          const float* row = W + (int64_t)ix[l + u] * D + d0;
          for (int64_t c = 0; c < w; ++c) m[u][c] = max2(m[u][c], row[c]);
        }
      for (; l < L; ++l) {
        const float* row = W + (int64_t)ix[l] * D + d0;
        for (int64_t c = 0; c < w; ++c) m[0][c] = max2(m[0][c], row[c]);
      }
      for (int64_t c = 0; c < w; ++c) {
        float r = m[0][c];
        for (int u = 1; u < LU; ++u) r = max2(r, m[u][c]);
        out[b * D + d0 + c] = r;
      }
    }
  }
}
