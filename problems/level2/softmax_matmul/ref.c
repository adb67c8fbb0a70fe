// Trusted reference for softmax_matmul, in double: O[b,i,:] = sum_j softmax(S[b,i,:])_j V[b,j,:].
#include <math.h>
#include <stdint.h>

void softmax_matmul(const float* S, const float* V, float* O, int64_t B, int64_t T, int64_t D) {
  double acc[D];
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < T; ++i) {
      const float* s = S + (b * T + i) * T;
      double peak = s[0];
      for (int64_t j = 1; j < T; ++j) peak = s[j] > peak ? s[j] : peak;
      double sum = 0.0;
      for (int64_t d = 0; d < D; ++d) acc[d] = 0.0;
      for (int64_t j = 0; j < T; ++j) {
        const double p = exp((double)s[j] - peak);
        sum += p;
        const float* v = V + (b * T + j) * D;
        for (int64_t d = 0; d < D; ++d) acc[d] += p * (double)v[d];
      }
      for (int64_t d = 0; d < D; ++d) O[(b * T + i) * D + d] = (float)(acc[d] / sum);
    }
}
