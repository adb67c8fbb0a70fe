// Trusted reference for row_sum: y[i] = sum over j of x[i*N + j], accumulated in double.
#include <stddef.h>
#include <stdint.h>

void row_sum(const float* x, float* y, int64_t M, int64_t N) {
  for (int64_t i = 0; i < M; ++i) {
    double sum = 0.0;
    for (int64_t j = 0; j < N; ++j) sum += (double)x[i * N + j];
    y[i] = (float)sum;
  }
}
