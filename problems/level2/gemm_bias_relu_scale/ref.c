// Trusted reference for gemm_bias_relu_scale: y = relu(x W^T + b) * scale, accumulated in double.
#include <stdint.h>

void gemm_bias_relu_scale(const float* x, const float* W, const float* b, float* y, int64_t M, int64_t N, int64_t K,
                          float scale) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double sum = (double)b[j];
      for (int64_t k = 0; k < K; ++k) sum += (double)x[i * K + k] * (double)W[j * K + k];
      y[i * N + j] = (float)((sum > 0.0 ? sum : 0.0) * (double)scale);
    }
}
