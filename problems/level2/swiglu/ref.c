// Trusted reference for swiglu, in double: y[i,j] = silu(x[i,:] . W1[j,:]) * (x[i,:] . W3[j,:]).
#include <math.h>
#include <stdint.h>

void swiglu(const float* x, const float* W1, const float* W3, float* y, int64_t M, int64_t N, int64_t K) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double g = 0.0, u = 0.0;
      for (int64_t k = 0; k < K; ++k) {
        g += (double)x[i * K + k] * (double)W1[j * K + k];
        u += (double)x[i * K + k] * (double)W3[j * K + k];
      }
      y[i * N + j] = (float)(g / (1.0 + exp(-g)) * u);
    }
}
