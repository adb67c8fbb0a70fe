// Seed for silu: y = x / (1 + exp(-x)), element-wise.
//
// FAST_EXP = 0: the C library's expf, a call per element that the compiler cannot vectorize;
// FAST_EXP = 1: an inline expf (Cody-Waite reduction, degree-6 polynomial, within 2 ulp) that it can.
#include <math.h>
#include <stdint.h>
#include <string.h>

#ifndef FAST_EXP
#define FAST_EXP 0
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

void silu(const float* x, float* y, int64_t M, int64_t N) {
  for (int64_t i = 0; i < M * N; ++i) y[i] = x[i] / (1.0f + EXP(-x[i]));
}
