// Trusted reference for matmul_rect: C[i,j] = sum_k A[i,k] * B[j,k] (C = A x B^T), accumulated in double.
#include <stdint.h>

void matmul_rect(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double sum = 0.0;
      for (int64_t k = 0; k < K; ++k) sum += (double)A[i * K + k] * (double)B[j * K + k];
      C[i * N + j] = (float)sum;
    }
}
