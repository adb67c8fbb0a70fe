// Seed for scale_bias_gelu: y = gelu(x * scale + bias[j]) over a row-major M x N matrix, exact GELU.
//
// FUSE = 0: three passes over y, as an eager framework runs it: y = x * scale; y += bias; y = gelu(y).
// FUSE = 1: one pass, one read of x and one write of y per element.
// POLY = 0: the C library's erff, which the compiler cannot vectorize; POLY = 1: 1 + erf(z) inline,
//           as erfc(|z|) (Abramowitz and Stegun 7.1.26, absolute error 1.5e-7) reflected for z >= 0.
#include <math.h>
#include <stdint.h>
#include <string.h>

#ifndef FUSE
#define FUSE 0
#endif
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

static inline float gelu(float v) {
  const float z = v * 0.70710678118654752f;
#if POLY
  const float a = fabsf(z);
  const float t = 1.0f / (1.0f + 0.3275911f * a);
  const float poly = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
  const float erfc_a = poly * fast_expf(-a * a);
  return 0.5f * v * (z >= 0.0f ? 2.0f - erfc_a : erfc_a);
#else
  return 0.5f * v * (1.0f + erff(z));
#endif
}

void scale_bias_gelu(const float* x, const float* bias, float* y, int64_t M, int64_t N, float scale) {
#if FUSE
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) y[i * N + j] = gelu(x[i * N + j] * scale + bias[j]);
#else
  for (int64_t e = 0; e < M * N; ++e) y[e] = x[e] * scale;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) y[i * N + j] += bias[j];
  for (int64_t e = 0; e < M * N; ++e) y[e] = gelu(y[e]);
#endif
}
