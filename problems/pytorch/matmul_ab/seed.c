// Seed for matmul_ab: out = a @ b, a of M x K, b of K x N, all row-major fp32 (torch.matmul).
//
// out is computed in tiles of TI rows by TJ columns, each tile's TI * TJ sums kept in a local array while
// k runs over K: for each k, TI elements of a times TJ contiguous elements of b's row k.
// TJ: with TJ = 1 each output is a dot product that walks down a column of b (a stride of N floats, a new
//     cache line per step) in one dependent chain of additions; a wide TJ reads b's rows contiguously and
//     gives TJ independent, vectorizable accumulators.
// TI: rows of a sharing each loaded piece of b (TI = 1 reloads b's row k for every row of out).
#include <stdint.h>

#ifndef TI
#define TI 1
#endif
#ifndef TJ
#define TJ 1
#endif

// One tile of ni <= TI rows and nj <= TJ columns; inlined with the constants TI, TJ for full tiles.
static inline __attribute__((always_inline)) void tile(const float* a, const float* b, float* out, int64_t K,
                                                       int64_t N, int64_t i0, int64_t j0, int64_t ni, int64_t nj) {
  float acc[TI][TJ];
  for (int64_t ii = 0; ii < ni; ++ii)
    for (int64_t jj = 0; jj < nj; ++jj) acc[ii][jj] = 0.0f;
  for (int64_t k = 0; k < K; ++k) {
    const float* brow = b + k * N + j0;
    for (int64_t ii = 0; ii < ni; ++ii) {
      const float av = a[(i0 + ii) * K + k];
      for (int64_t jj = 0; jj < nj; ++jj) acc[ii][jj] += av * brow[jj];
    }
  }
  for (int64_t ii = 0; ii < ni; ++ii)
    for (int64_t jj = 0; jj < nj; ++jj) out[(i0 + ii) * N + j0 + jj] = acc[ii][jj];
}

void matmul_ab(const float* a, const float* b, float* out, int64_t M, int64_t K, int64_t N) {
  for (int64_t i0 = 0; i0 < M; i0 += TI) {
    const int64_t ni = M - i0 < TI ? M - i0 : TI;
    int64_t j0 = 0;
    if (ni == TI)
      for (; j0 + TJ <= N; j0 += TJ) tile(a, b, out, K, N, i0, j0, TI, TJ);
    for (; j0 < N; j0 += TJ) tile(a, b, out, K, N, i0, j0, ni, N - j0 < TJ ? N - j0 : TJ);
  }
}
