// Seed for col_mean: y[j] = (1/M) sum_i x[i,j], x row-major M x N.
//
// Columns are reduced BLOCK at a time: the sweep goes down the rows, adding one contiguous piece of
// each row into BLOCK running sums. BLOCK = 1 walks down a column, a stride of N floats per load, in
// one serial chain of additions; a wide BLOCK reads rows contiguously and the sums vectorize.
#include <stdint.h>

#ifndef BLOCK
#define BLOCK 1
#endif

void col_mean(const float* x, float* y, int64_t M, int64_t N) {
  for (int64_t j0 = 0; j0 < N; j0 += BLOCK) {
    const int64_t n = N - j0 < BLOCK ? N - j0 : BLOCK;
    float acc[BLOCK];
    for (int64_t j = 0; j < n; ++j) acc[j] = 0.0f;
    for (int64_t i = 0; i < M; ++i) {
      const float* row = x + i * N + j0;
      for (int64_t j = 0; j < n; ++j) acc[j] += row[j];
    }
    for (int64_t j = 0; j < n; ++j) y[j0 + j] = acc[j] / (float)M;
  }
}
