// Seed for matvec: y[i] = sum_k A[i,k] * x[k], A row-major M x K.
//
// The columns of A are taken BLOCK at a time: for each block every row adds its BLOCK products to
// y[i]. BLOCK = 1 is the column-oriented (gaxpy) loop, a stride of K floats between loads, so nearly
// every load misses the cache. Within a block, ACC independent partial sums break the single chain
// of dependent float additions and let the compiler vectorize.
#include <stdint.h>

#ifndef BLOCK
#define BLOCK 1
#endif
#ifndef ACC
#define ACC 1
#endif

void matvec(const float* A, const float* x, float* y, int64_t M, int64_t K) {
  for (int64_t i = 0; i < M; ++i) y[i] = 0.0f;
  for (int64_t k0 = 0; k0 < K; k0 += BLOCK) {
    const int64_t k1 = k0 + BLOCK < K ? k0 + BLOCK : K;
    for (int64_t i = 0; i < M; ++i) {
      const float* row = A + i * K;
      float acc[ACC];
      for (int u = 0; u < ACC; ++u) acc[u] = 0.0f;
      int64_t k = k0;
      for (; k + ACC <= k1; k += ACC)
        for (int u = 0; u < ACC; ++u) acc[u] += row[k + u] * x[k + u];
      float sum = 0.0f;
      for (int u = 0; u < ACC; ++u) sum += acc[u];
      for (; k < k1; ++k) sum += row[k] * x[k];
      y[i] += sum;
    }
  }
}
