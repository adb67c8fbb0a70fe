// Seed for rmsnorm_silu_gate: y = x / sqrt(mean(x^2) + eps) * w * silu(z) over each row.
//
// ACC: independent partial sums of squares (ACC = 1: one serial chain of float additions).
// FAST_EXP = 0: the C library's expf, which does not vectorize; FAST_EXP = 1: an inline expf
// (Cody-Waite reduction, degree-6 polynomial, within 2 ulp) that does.
#include <math.h>
#include <stdint.h>
#include <string.h>

#ifndef ACC
#define ACC 1
#endif
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

void rmsnorm_silu_gate(const float* x, const float* z, const float* w, float* y, int64_t M, int64_t N, float eps) {
  for (int64_t i = 0; i < M; ++i) {
    const float* in = x + i * N;
    const float* gate = z + i * N;
    float* out = y + i * N;
    float acc[ACC];
    for (int u = 0; u < ACC; ++u) acc[u] = 0.0f;
    int64_t j = 0;
    for (; j + ACC <= N; j += ACC)
      for (int u = 0; u < ACC; ++u) acc[u] += in[j + u] * in[j + u];
    float sq = 0.0f;
    for (int u = 0; u < ACC; ++u) sq += acc[u];
    for (; j < N; ++j) sq += in[j] * in[j];
    const float r = 1.0f / sqrtf(sq / (float)N + eps);
    for (j = 0; j < N; ++j) out[j] = in[j] * r * w[j] * (gate[j] / (1.0f + EXP(-gate[j])));
  }
}
