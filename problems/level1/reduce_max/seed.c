// Seed for reduce_max: y[b,c] = max over r of x[b,r,c], x row-major B x R x C.
//
// Outputs are reduced BLOCK at a time: for each block, the sweep goes down r and updates BLOCK
// running maxima from one contiguous piece of row r. BLOCK = 1 walks down a column, a stride of C
// floats per load; a wide BLOCK reads rows contiguously and the maxima vectorize.
#include <stdint.h>

#ifndef BLOCK
#define BLOCK 1
#endif

void reduce_max(const float* x, float* y, int64_t B, int64_t R, int64_t C) {
  for (int64_t b = 0; b < B; ++b) {
    const float* slice = x + b * R * C;
    float* out = y + b * C;
    for (int64_t c0 = 0; c0 < C; c0 += BLOCK) {
      const int64_t c1 = c0 + BLOCK < C ? c0 + BLOCK : C;
      for (int64_t c = c0; c < c1; ++c) out[c] = slice[c];
      for (int64_t r = 1; r < R; ++r) {
        const float* row = slice + r * C;
        for (int64_t c = c0; c < c1; ++c) out[c] = row[c] > out[c] ? row[c] : out[c];
      }
    }
  }
}
