// Seed for gelu (exact, erf form): y = 0.5 x (1 + erf(x / sqrt 2)), element-wise.
//
// POLY = 0: the C library's erff, a call per element that the compiler cannot vectorize.
// POLY = 1: 1 + erf(z) computed inline: erfc(|z|) ~ t (a1 + t (a2 + ...)) exp(-z^2) with
//           t = 1 / (1 + p |z|) (Abramowitz and Stegun 7.1.26, absolute error 1.5e-7), reflected
//           (2 - erfc) for z >= 0; no library call, so the loop vectorizes.
#include <math.h>
#include <stdint.h>
#include <string.h>

#ifndef POLY
#define POLY 0
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

// 1 + erf(z), accurate in absolute terms and, for negative z, relative to the (small) result.
static inline float one_plus_erf(float z) {
  const float a = fabsf(z);
  const float t = 1.0f / (1.0f + 0.3275911f * a);
  const float poly = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
  const float erfc_a = poly * fast_expf(-a * a);
  return z >= 0.0f ? 2.0f - erfc_a : erfc_a;
}

void gelu(const float* x, float* y, int64_t M, int64_t N) {
  for (int64_t i = 0; i < M * N; ++i) {
    const float v = x[i];
#if POLY
    y[i] = 0.5f * v * one_plus_erf(v * 0.70710678118654752f);
#else
    y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
#endif
  }
}
