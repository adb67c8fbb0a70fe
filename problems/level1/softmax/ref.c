// Trusted reference for softmax over rows, in double: y = exp(x - max) / sum(exp(x - max)).
#include <math.h>
#include <stdint.h>

void softmax(const float* x, float* y, int64_t M, int64_t N) {
  for (int64_t i = 0; i < M; ++i) {
    const float* in = x + i * N;
    double peak = in[0];
    for (int64_t j = 1; j < N; ++j) peak = in[j] > peak ? in[j] : peak;
    double sum = 0.0;
    for (int64_t j = 0; j < N; ++j) sum += exp((double)in[j] - peak);
    for (int64_t j = 0; j < N; ++j) y[i * N + j] = (float)(exp((double)in[j] - peak) / sum);
  }
}
