// Trusted reference for matmul: C[M,N] = A[M,K] x B[K,N], all row-major, accumulated in double.
#include <stddef.h>
#include <stdint.h>

void matmul(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K) {
  enum { STRIP = 64 };  // columns of C accumulated at once, so B is read along its rows
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j0 = 0; j0 < N; j0 += STRIP) {
      const int64_t width = N - j0 < STRIP ? N - j0 : STRIP;
      double acc[STRIP];
      for (int64_t j = 0; j < width; ++j) acc[j] = 0.0;
      for (int64_t k = 0; k < K; ++k) {
        const double a = (double)A[i * K + k];
        const float* b = B + k * N + j0;
        for (int64_t j = 0; j < width; ++j) acc[j] += a * (double)b[j];
      }
      for (int64_t j = 0; j < width; ++j) C[i * N + j0 + j] = (float)acc[j];
    }
  }
}
