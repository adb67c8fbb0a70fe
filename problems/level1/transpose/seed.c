// Seed for transpose: y[j*M + i] = x[i*N + j], x row-major M x N, y row-major N x M.
//
// The copy runs over TILE_I x TILE_J tiles. With 1 x 1 tiles it is the naive order: x is read
// along a row while y is written down a column, a stride of M floats, so each store touches a new
// cache line (and, for power-of-two M, the same few cache sets). A tile whose rows of x and columns
// of y both stay in L1 reuses every line it brings in.
#include <stddef.h>
#include <stdint.h>

#ifndef TILE_I
#define TILE_I 1
#endif
#ifndef TILE_J
#define TILE_J 1
#endif

void transpose(const float* x, float* y, int64_t M, int64_t N) {
  for (int64_t i0 = 0; i0 < M; i0 += TILE_I) {
    const int64_t i1 = i0 + TILE_I < M ? i0 + TILE_I : M;
    for (int64_t j0 = 0; j0 < N; j0 += TILE_J) {
      const int64_t j1 = j0 + TILE_J < N ? j0 + TILE_J : N;
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = j0; j < j1; ++j) y[j * M + i] = x[i * N + j];
    }
  }
}
