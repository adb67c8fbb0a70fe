// Trusted reference for matvec: y[i] = sum_k A[i,k] * x[k], accumulated in double.
#include <stdint.h>

void matvec(const float* A, const float* x, float* y, int64_t M, int64_t K) {
  for (int64_t i = 0; i < M; ++i) {
    double sum = 0.0;
    for (int64_t k = 0; k < K; ++k) sum += (double)A[i * K + k] * (double)x[k];
    y[i] = (float)sum;
  }
}
