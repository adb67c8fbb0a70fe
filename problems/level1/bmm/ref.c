// Trusted reference for bmm: C[b,i,j] = sum_k A[b,i,k] * B[b,k,j], accumulated in double.
#include <stdint.h>

void bmm(const float* A, const float* B, float* C, int64_t BATCH, int64_t M, int64_t N, int64_t K) {
  for (int64_t b = 0; b < BATCH; ++b) {
    const float* a = A + b * M * K;
    const float* bb = B + b * K * N;
    float* c = C + b * M * N;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double sum = 0.0;
        for (int64_t k = 0; k < K; ++k) sum += (double)a[i * K + k] * (double)bb[k * N + j];
        c[i * N + j] = (float)sum;
      }
  }
}
