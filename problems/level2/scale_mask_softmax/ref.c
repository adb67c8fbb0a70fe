// Trusted reference for scale_mask_softmax, in double: for row i of each T x T matrix,
// y[i,j] = exp(s_j - max) / sum_{k <= i} exp(s_k - max) for j <= i, with s = x * scale, and 0 for j > i.
#include <math.h>
#include <stdint.h>

void scale_mask_softmax(const float* x, float* y, int64_t B, int64_t T, float scale) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < T; ++i) {
      const float* in = x + (b * T + i) * T;
      float* out = y + (b * T + i) * T;
      double peak = (double)in[0] * (double)scale;
      for (int64_t j = 1; j <= i; ++j) {
        const double s = (double)in[j] * (double)scale;
        peak = s > peak ? s : peak;
      }
      double sum = 0.0;
      for (int64_t j = 0; j <= i; ++j) sum += exp((double)in[j] * (double)scale - peak);
      for (int64_t j = 0; j < T; ++j) out[j] = j <= i ? (float)(exp((double)in[j] * (double)scale - peak) / sum) : 0.0f;
    }
}
