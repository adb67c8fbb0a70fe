// Seed for softmax over the rows of a row-major M x N matrix: y = exp(x - max) / sum(exp(x - max)).
//
// FAST_EXP = 0: the C library's expf, a call per element that the compiler cannot vectorize;
// FAST_EXP = 1: an inline expf (Cody-Waite reduction, degree-6 polynomial, within 2 ulp) that it can.
// ACC: independent partial maxima and sums; ACC = 1 makes each a serial chain.
#include <math.h>
#include <stdint.h>
#include <string.h>

#ifndef FAST_EXP
#define FAST_EXP 0
#endif
#ifndef ACC
#define ACC 1
#endif

static inline float fast_expf(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  const float k = __builtin_floorf(x * 1.44269504088896341f + 0.5f);
  float r = x - k * 0.693359375f;
  r = r + k * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = ((int32_t)k + 127) << 23;
  float scale;
  memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

#if FAST_EXP
#define EXP fast_expf
#else
#define EXP expf
#endif

void softmax(const float* x, float* y, int64_t M, int64_t N) {
  for (int64_t i = 0; i < M; ++i) {
    const float* in = x + i * N;
    float* out = y + i * N;
    float mx[ACC];
    for (int u = 0; u < ACC; ++u) mx[u] = in[0];
    int64_t j = 0;
    for (; j + ACC <= N; j += ACC)
      for (int u = 0; u < ACC; ++u) mx[u] = in[j + u] > mx[u] ? in[j + u] : mx[u];
    float peak = mx[0];
    for (int u = 1; u < ACC; ++u) peak = mx[u] > peak ? mx[u] : peak;
    for (; j < N; ++j) peak = in[j] > peak ? in[j] : peak;

    float acc[ACC];
    for (int u = 0; u < ACC; ++u) acc[u] = 0.0f;
    j = 0;
    for (; j + ACC <= N; j += ACC)
      for (int u = 0; u < ACC; ++u) acc[u] += EXP(in[j + u] - peak);
    float sum = 0.0f;
    for (int u = 0; u < ACC; ++u) sum += acc[u];
    for (; j < N; ++j) sum += EXP(in[j] - peak);

    const float inv = 1.0f / sum;
    for (j = 0; j < N; ++j) out[j] = EXP(in[j] - peak) * inv;
  }
}
