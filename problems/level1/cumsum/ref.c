// Trusted reference for cumsum along rows: y[i,j] = sum over k <= j of x[i,k], accumulated in double.
#include <stdint.h>

void cumsum(const float* x, float* y, int64_t M, int64_t N) {
  for (int64_t i = 0; i < M; ++i) {
    double sum = 0.0;
    for (int64_t j = 0; j < N; ++j) {
      sum += (double)x[i * N + j];
      y[i * N + j] = (float)sum;
    }
  }
}
