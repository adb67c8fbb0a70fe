// Seed for gelu_tanh: out = 0.5 x (1 + tanh(u)), u = sqrt(2 / pi) (x + 0.044715 x^3), element-wise over a
// batch_size x features fp32 tensor (F.gelu(x, approximate="tanh")).
//
// The loop is contiguous; the cost is the transcendental function per element.
// TANH_IMPL: 0 calls libm's tanhf, as the formula reads: an opaque call per element, no vectorization.
//            1 uses the identity 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)) with libm's expf (a cheaper call).
//            2 uses the same identity with an inlined exp (range reduction and a degree-6 polynomial,
//            relative error about 2e-7), so the loop vectorizes.
#include <math.h>
#include <stdint.h>

#ifndef TANH_IMPL
#define TANH_IMPL 0
#endif

#if TANH_IMPL == 2
// exp(x) = 2^k exp(r), k = round(x / ln 2), r = x - k ln 2 (ln 2 in two parts); Cephes' polynomial for exp(r).
static inline float exp_fast(float x) {
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  const float y = x * 1.44269504f;
  const int32_t k = (int32_t)(y + (y < 0.0f ? -0.5f : 0.5f));
  const float kf = (float)k;
  const float r = (x - kf * 0.693145751953125f) - kf * 1.428606765330187e-6f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  union { int32_t i; float f; } scale;
  scale.i = (k + 127) << 23;
  return p * scale.f;
}
#endif

void gelu_tanh(const float* x, float* out, int64_t batch_size, int64_t features) {
  const int64_t n = batch_size * features;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float u = 0.7978845608f * (v + 0.044715f * v * v * v);
#if TANH_IMPL == 0
    out[i] = 0.5f * v * (1.0f + tanhf(u));
#elif TANH_IMPL == 1
    out[i] = v / (1.0f + expf(-2.0f * u));
#else
    out[i] = v / (1.0f + exp_fast(-2.0f * u));
#endif
  }
}
