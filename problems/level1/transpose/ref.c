// Trusted reference for transpose: y[j*M + i] = x[i*N + j] for an M x N row-major x.
#include <stddef.h>
#include <stdint.h>

void transpose(const float* x, float* y, int64_t M, int64_t N) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) y[j * M + i] = x[i * N + j];
}
