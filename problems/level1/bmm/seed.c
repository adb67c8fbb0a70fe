// Seed for bmm: C[b] = A[b] x B[b] for every b, row-major.
//
// IKJ = 0: i-j-k, one dot product per element of C: B is read down a column and the sum is a serial
//          chain of dependent float additions, so nothing vectorizes.
// IKJ = 1: i-k-j, C's row accumulates KU scaled rows of B per pass: contiguous and vectorizable, and
//          KU > 1 loads and stores the row of C KU times less often.
#include <stdint.h>

#ifndef IKJ
#define IKJ 0
#endif
#ifndef KU
#define KU 1
#endif

void bmm(const float* A, const float* B, float* C, int64_t BATCH, int64_t M, int64_t N, int64_t K) {
  for (int64_t b = 0; b < BATCH; ++b) {
    const float* a = A + b * M * K;
    const float* bb = B + b * K * N;
    float* c = C + b * M * N;
    for (int64_t i = 0; i < M; ++i) {
#if IKJ
      float* row = c + i * N;
      for (int64_t j = 0; j < N; ++j) row[j] = 0.0f;
      int64_t k = 0;
      for (; k + KU <= K; k += KU) {
        float s[KU];
        for (int u = 0; u < KU; ++u) s[u] = a[i * K + k + u];
        for (int64_t j = 0; j < N; ++j) {
          float v = row[j];
          for (int u = 0; u < KU; ++u) v += s[u] * bb[(k + u) * N + j];
          row[j] = v;
        }
      }
      for (; k < K; ++k) {
        const float s = a[i * K + k];
        for (int64_t j = 0; j < N; ++j) row[j] += s * bb[k * N + j];
      }
#else
      for (int64_t j = 0; j < N; ++j) {
        float sum = 0.0f;
        for (int64_t k = 0; k < K; ++k) sum += a[i * K + k] * bb[k * N + j];
        c[i * N + j] = sum;
      }
#endif
    }
  }
}
