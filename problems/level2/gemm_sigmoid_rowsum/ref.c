// Trusted reference for gemm_sigmoid_rowsum, in double: y[i] = sum_j sigmoid(sum_k x[i,k] W[j,k] + b[j]).
#include <math.h>
#include <stdint.h>

void gemm_sigmoid_rowsum(const float* x, const float* W, const float* b, float* y, int64_t M, int64_t N, int64_t K) {
  for (int64_t i = 0; i < M; ++i) {
    double total = 0.0;
    for (int64_t j = 0; j < N; ++j) {
      double v = (double)b[j];
      for (int64_t k = 0; k < K; ++k) v += (double)x[i * K + k] * (double)W[j * K + k];
      total += 1.0 / (1.0 + exp(-v));
    }
    y[i] = (float)total;
  }
}
