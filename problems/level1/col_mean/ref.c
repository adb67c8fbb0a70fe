// Trusted reference for col_mean: y[j] = mean over i of x[i,j], accumulated in double. Columns are
// summed in strips of 64 so that x is read along its rows.
#include <stdint.h>

void col_mean(const float* x, float* y, int64_t M, int64_t N) {
  enum { STRIP = 64 };
  for (int64_t j0 = 0; j0 < N; j0 += STRIP) {
    const int64_t width = N - j0 < STRIP ? N - j0 : STRIP;
    double sum[STRIP];
    for (int64_t j = 0; j < width; ++j) sum[j] = 0.0;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < width; ++j) sum[j] += (double)x[i * N + j0 + j];
    for (int64_t j = 0; j < width; ++j) y[j0 + j] = (float)(sum[j] / (double)M);
  }
}
