// Seed for matmul: C[M,N] = A[M,K] x B[K,N], all row-major.
//
// The product runs over TILE_M x TILE_N x TILE_K blocks; a tile at least as large as its
// dimension means no tiling on that axis. Inside a block, IKJ picks the loop order:
//   IKJ = 0: i-j-k, a dot product per element of C: B is read down a column (stride N) and the
//            sum is one dependent chain of float additions, so nothing vectorizes;
//   IKJ = 1: i-k-j, an axpy per row of C: B and C are read along rows, contiguous and vectorizable.
// Tiles small enough that the B block stays in cache reuse it across rows of A.
#include <stddef.h>
#include <stdint.h>

#ifndef TILE_M
#define TILE_M 1024
#endif
#ifndef TILE_N
#define TILE_N 1024
#endif
#ifndef TILE_K
#define TILE_K 1024
#endif
#ifndef IKJ
#define IKJ 0
#endif

void matmul(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K) {
  for (int64_t e = 0; e < M * N; ++e) C[e] = 0.0f;
  for (int64_t i0 = 0; i0 < M; i0 += TILE_M) {
    const int64_t i1 = i0 + TILE_M < M ? i0 + TILE_M : M;
    for (int64_t j0 = 0; j0 < N; j0 += TILE_N) {
      const int64_t j1 = j0 + TILE_N < N ? j0 + TILE_N : N;
      for (int64_t k0 = 0; k0 < K; k0 += TILE_K) {
        const int64_t k1 = k0 + TILE_K < K ? k0 + TILE_K : K;
        for (int64_t i = i0; i < i1; ++i) {
#if IKJ
          for (int64_t k = k0; k < k1; ++k) {
            const float a = A[i * K + k];
            for (int64_t j = j0; j < j1; ++j) C[i * N + j] += a * B[k * N + j];
          }
#else
          for (int64_t j = j0; j < j1; ++j) {
            float sum = C[i * N + j];
            for (int64_t k = k0; k < k1; ++k) sum += A[i * K + k] * B[k * N + j];
            C[i * N + j] = sum;
          }
#endif
        }
      }
    }
  }
}
