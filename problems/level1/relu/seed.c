// Seed for relu: y = max(x, 0) over a row-major M x N matrix.
//
// The matrix is swept BLOCK columns at a time, every row visiting its BLOCK elements of the block.
// BLOCK = 1 walks column by column: a stride of N floats between accesses on both x and y, so each
// access touches a new cache line. A wide BLOCK walks rows contiguously and vectorizes.
#include <stdint.h>

#ifndef BLOCK
#define BLOCK 1
#endif

void relu(const float* x, float* y, int64_t M, int64_t N) {
  for (int64_t j0 = 0; j0 < N; j0 += BLOCK) {
    const int64_t j1 = j0 + BLOCK < N ? j0 + BLOCK : N;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = j0; j < j1; ++j) y[i * N + j] = x[i * N + j] > 0.0f ? x[i * N + j] : 0.0f;
  }
}
