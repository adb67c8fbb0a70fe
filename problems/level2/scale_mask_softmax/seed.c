// Seed for scale_mask_softmax: y = softmax(x * scale + causal mask) over each row of B T x T matrices;
// the mask is -inf for column j > row i, so those outputs are 0.
//
// SKIP = 0: every row is processed over all T columns, masked ones as -inf scores whose exponential
//           is 0; SKIP = 1: only columns j <= i are computed, the rest of the row is zero-filled.
// FAST_EXP = 0: the C library's expf, a call per element that the compiler cannot vectorize;
// FAST_EXP = 1: an inline expf (Cody-Waite reduction, degree-6 polynomial, within 2 ulp) that it can.
// ACC: independent partial maxima and sums (ACC = 1: serial chains).
#include <math.h>
#include <stdint.h>
#include <string.h>

#ifndef SKIP
#define SKIP 0
#endif
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

#if SKIP
// Only the n = i + 1 unmasked columns are visited; no mask tests in the loops.
#define SCORE(j) (in[j] * scale)
#define LIVE(j) 1
#else
// All T columns are visited; a masked column has a -inf score and contributes nothing.
#define SCORE(j) ((j) <= i ? in[j] * scale : -INFINITY)
#define LIVE(j) ((j) <= i)
#endif

void scale_mask_softmax(const float* x, float* y, int64_t B, int64_t T, float scale) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < T; ++i) {
      const float* in = x + (b * T + i) * T;
      float* out = y + (b * T + i) * T;
      const int64_t n = SKIP ? i + 1 : T;  // columns visited
      float mx[ACC];
      for (int u = 0; u < ACC; ++u) mx[u] = -INFINITY;
      int64_t j = 0;
      for (; j + ACC <= n; j += ACC)
        for (int u = 0; u < ACC; ++u) mx[u] = SCORE(j + u) > mx[u] ? SCORE(j + u) : mx[u];
      float peak = mx[0];
      for (int u = 1; u < ACC; ++u) peak = mx[u] > peak ? mx[u] : peak;
      for (; j < n; ++j) peak = SCORE(j) > peak ? SCORE(j) : peak;

      float acc[ACC];
      for (int u = 0; u < ACC; ++u) acc[u] = 0.0f;
      j = 0;
      for (; j + ACC <= n; j += ACC)
        for (int u = 0; u < ACC; ++u) acc[u] += LIVE(j + u) ? EXP(SCORE(j + u) - peak) : 0.0f;
      float sum = 0.0f;
      for (int u = 0; u < ACC; ++u) sum += acc[u];
      for (; j < n; ++j) sum += LIVE(j) ? EXP(SCORE(j) - peak) : 0.0f;

      const float inv = 1.0f / sum;
      for (j = 0; j < n; ++j) out[j] = LIVE(j) ? EXP(SCORE(j) - peak) * inv : 0.0f;
      for (; j < T; ++j) out[j] = 0.0f;
    }
}
