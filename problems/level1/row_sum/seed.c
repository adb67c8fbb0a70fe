// Seed for row_sum: y[i] = sum over j of x[i*N + j].
//
// The matrix is consumed in column blocks of BLOCK columns: for each block, every row adds its
// BLOCK elements to y[i]. With BLOCK = 1 the walk goes down the columns, a stride of N floats
// between consecutive loads, so nearly every load misses the cache and the TLB. A wide BLOCK walks
// each row contiguously. Within a block, ACC independent partial sums break the single chain of
// dependent float additions (and let the compiler vectorize); ACC = 1 adds one element at a time.
#include <stddef.h>
#include <stdint.h>

#ifndef BLOCK
#define BLOCK 1
#endif
#ifndef ACC
#define ACC 1
#endif

void row_sum(const float* x, float* y, int64_t M, int64_t N) {
  for (int64_t i = 0; i < M; ++i) y[i] = 0.0f;
  for (int64_t j0 = 0; j0 < N; j0 += BLOCK) {
    const int64_t j1 = j0 + BLOCK < N ? j0 + BLOCK : N;
    for (int64_t i = 0; i < M; ++i) {
      const float* row = x + i * N;
      float acc[ACC];
      for (int a = 0; a < ACC; ++a) acc[a] = 0.0f;
      int64_t j = j0;
      for (; j + ACC <= j1; j += ACC)
        for (int a = 0; a < ACC; ++a) acc[a] += row[j + a];
      float sum = 0.0f;
      for (int a = 0; a < ACC; ++a) sum += acc[a];
      for (; j < j1; ++j) sum += row[j];
      y[i] += sum;
    }
  }
}
