// Seed for softmax_matmul: O[b,i,:] = softmax(S[b,i,:]) V[b], fused per row of S.
//
// The row's exponentials p_j = exp(s_j - max) go into a local array, then:
// AXPY = 0: each O[i,d] is a dot product of p with column d of V (stride D), one serial chain;
// AXPY = 1: the output row accumulates p_j * V[j,:] for each j (contiguous and vectorizable), ACC
//           rows of V per pass over the output row.
// FAST_EXP = 0: the C library's expf; FAST_EXP = 1: an inline expf (within 2 ulp) that vectorizes.
#include <math.h>
#include <stdint.h>
#include <string.h>

#ifndef FAST_EXP
#define FAST_EXP 0
#endif
#ifndef AXPY
#define AXPY 0
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

void softmax_matmul(const float* S, const float* V, float* O, int64_t B, int64_t T, int64_t D) {
  float p[T];
  for (int64_t b = 0; b < B; ++b) {
    const float* v = V + b * T * D;
    for (int64_t i = 0; i < T; ++i) {
      const float* s = S + (b * T + i) * T;
      float* o = O + (b * T + i) * D;
      float peak = s[0];
      for (int64_t j = 1; j < T; ++j) peak = s[j] > peak ? s[j] : peak;
      float sum = 0.0f;
      for (int64_t j = 0; j < T; ++j) p[j] = EXP(s[j] - peak);
      for (int64_t j = 0; j < T; ++j) sum += p[j];
      const float inv = 1.0f / sum;
#if AXPY
      for (int64_t d = 0; d < D; ++d) o[d] = 0.0f;
      int64_t j = 0;
      for (; j + ACC <= T; j += ACC)
        for (int64_t d = 0; d < D; ++d) {
          float t = o[d];
          for (int u = 0; u < ACC; ++u) t += p[j + u] * v[(j + u) * D + d];
          o[d] = t;
        }
      for (; j < T; ++j)
        for (int64_t d = 0; d < D; ++d) o[d] += p[j] * v[j * D + d];
      for (int64_t d = 0; d < D; ++d) o[d] *= inv;
#else
      for (int64_t d = 0; d < D; ++d) {
        float t = 0.0f;
        for (int64_t j = 0; j < T; ++j) t += p[j] * v[j * D + d];
        o[d] = t * inv;
      }
#endif
    }
  }
}
