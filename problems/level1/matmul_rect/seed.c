// Seed for matmul_rect: C[i,j] = sum_k A[i,k] * B[j,k] (C = A x B^T, B stored N x K like a linear layer).
//
// ACC: independent partial sums per dot product. ACC = 1 is one serial chain of dependent float
//      additions (a few cycles each, nothing vectorizes); 8 or 16 fill the vector units.
// JB:  columns of C computed together; each piece of A's row loaded once serves JB dot products.
#include <stdint.h>

#ifndef ACC
#define ACC 1
#endif
#ifndef JB
#define JB 1
#endif

void matmul_rect(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K) {
  for (int64_t i = 0; i < M; ++i) {
    const float* a = A + i * K;
    int64_t j0 = 0;
    for (; j0 + JB <= N; j0 += JB) {
      float acc[JB][ACC];
      for (int b = 0; b < JB; ++b)
        for (int u = 0; u < ACC; ++u) acc[b][u] = 0.0f;
      int64_t k = 0;
      for (; k + ACC <= K; k += ACC)
        for (int b = 0; b < JB; ++b)
          for (int u = 0; u < ACC; ++u) acc[b][u] += a[k + u] * B[(j0 + b) * K + k + u];
      for (int b = 0; b < JB; ++b) {
        float sum = 0.0f;
        for (int u = 0; u < ACC; ++u) sum += acc[b][u];
        for (int64_t t = k; t < K; ++t) sum += a[t] * B[(j0 + b) * K + t];
        C[i * N + j0 + b] = sum;
      }
    }
    for (; j0 < N; ++j0) {  // columns left over when JB does not divide N
      float sum = 0.0f;
      for (int64_t t = 0; t < K; ++t) sum += a[t] * B[j0 * K + t];
      C[i * N + j0] = sum;
    }
  }
}
