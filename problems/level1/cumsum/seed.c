// Seed for cumsum along the rows of a row-major M x N matrix: y[i,j] = sum over k <= j of x[i,k].
//
// Written the array way, one column at a time: y[:,0] = x[:,0], then y[:,j] = y[:,j-1] + x[:,j] for
// each j, over BLOCK rows at a time. A BLOCK of at least M is that column walk over the whole matrix:
// a stride of N floats between accesses, a new cache line for each. A small BLOCK walks a few rows in
// lockstep, contiguous along each, with BLOCK independent chains of additions in flight; BLOCK = 1 is
// one row at a time, a single chain.
#include <stdint.h>

#ifndef BLOCK
#define BLOCK 4096
#endif

void cumsum(const float* x, float* y, int64_t M, int64_t N) {
  for (int64_t i0 = 0; i0 < M; i0 += BLOCK) {
    const int64_t i1 = i0 + BLOCK < M ? i0 + BLOCK : M;
    for (int64_t i = i0; i < i1; ++i) y[i * N] = x[i * N];
    for (int64_t j = 1; j < N; ++j)
      for (int64_t i = i0; i < i1; ++i) y[i * N + j] = y[i * N + j - 1] + x[i * N + j];
  }
}
