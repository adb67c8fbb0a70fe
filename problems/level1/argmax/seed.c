// Seed for argmax: idx[b,c] = the first r with the largest x[b,r,c], x row-major B x R x C.
//
// Outputs are reduced BLOCK at a time: the sweep goes down r, updating BLOCK running (value, index)
// pairs from one contiguous piece of row r. BLOCK = 1 walks down a column, a stride of C floats per
// load; a wide BLOCK reads rows contiguously and the compare-and-select vectorizes. A strict
// comparison keeps the first index on a tie.
#include <stdint.h>

#ifndef BLOCK
#define BLOCK 1
#endif

void argmax(const float* x, int64_t* idx, int64_t B, int64_t R, int64_t C) {
  for (int64_t b = 0; b < B; ++b) {
    const float* slice = x + b * R * C;
    int64_t* out = idx + b * C;
    for (int64_t c0 = 0; c0 < C; c0 += BLOCK) {
      const int64_t n = C - c0 < BLOCK ? C - c0 : BLOCK;
      float best[BLOCK];
      int64_t at[BLOCK];
      for (int64_t c = 0; c < n; ++c) {
        best[c] = slice[c0 + c];
        at[c] = 0;
      }
      for (int64_t r = 1; r < R; ++r) {
        const float* row = slice + r * C + c0;
        for (int64_t c = 0; c < n; ++c) {
          const int better = row[c] > best[c];
          best[c] = better ? row[c] : best[c];
          at[c] = better ? r : at[c];
        }
      }
      for (int64_t c = 0; c < n; ++c) out[c0 + c] = at[c];
    }
  }
}
