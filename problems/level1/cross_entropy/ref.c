// Trusted reference for cross_entropy (reduction 'none'), in double:
// loss[i] = log(sum_j exp(logits[i,j])) - logits[i,t], t = target[i] modulo C into [0, C).
#include <math.h>
#include <stdint.h>

void cross_entropy(const float* logits, const int64_t* target, float* loss, int64_t M, int64_t C) {
  for (int64_t i = 0; i < M; ++i) {
    const float* row = logits + i * C;
    const int64_t t = ((target[i] % C) + C) % C;
    double peak = row[0];
    for (int64_t j = 1; j < C; ++j) peak = row[j] > peak ? row[j] : peak;
    double sum = 0.0;
    for (int64_t j = 0; j < C; ++j) sum += exp((double)row[j] - peak);
    loss[i] = (float)(peak + log(sum) - (double)row[t]);
  }
}
