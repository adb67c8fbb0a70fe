// Seed for swiglu: y[i,j] = silu(x[i,:] . W1[j,:]) * (x[i,:] . W3[j,:]), W1 and W3 stored N x K.
//
// ACC: independent partial sums per dot product (ACC = 1: one serial chain of float additions).
// JB:  output columns computed together; each piece of x's row feeds 2 JB dot products.
// FAST_EXP = 0: the C library's expf; FAST_EXP = 1: an inline expf (within 2 ulp).
#include <math.h>
#include <stdint.h>
#include <string.h>

#ifndef ACC
#define ACC 1
#endif
#ifndef JB
#define JB 1
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

static inline float dot(const float* a, const float* b, int64_t K) {
  float acc[ACC];
  for (int u = 0; u < ACC; ++u) acc[u] = 0.0f;
  int64_t k = 0;
  for (; k + ACC <= K; k += ACC)
    for (int u = 0; u < ACC; ++u) acc[u] += a[k + u] * b[k + u];
  float s = 0.0f;
  for (int u = 0; u < ACC; ++u) s += acc[u];
  for (; k < K; ++k) s += a[k] * b[k];
  return s;
}

void swiglu(const float* x, const float* W1, const float* W3, float* y, int64_t M, int64_t N, int64_t K) {
  for (int64_t i = 0; i < M; ++i) {
    const float* a = x + i * K;
    int64_t j0 = 0;
    for (; j0 + JB <= N; j0 += JB) {
      float g[JB][ACC], u[JB][ACC];
      for (int c = 0; c < JB; ++c)
        for (int t = 0; t < ACC; ++t) g[c][t] = u[c][t] = 0.0f;
      int64_t k = 0;
      for (; k + ACC <= K; k += ACC)
        for (int c = 0; c < JB; ++c)
          for (int t = 0; t < ACC; ++t) {
            g[c][t] += a[k + t] * W1[(j0 + c) * K + k + t];
            u[c][t] += a[k + t] * W3[(j0 + c) * K + k + t];
          }
      for (int c = 0; c < JB; ++c) {
        float gs = 0.0f, us = 0.0f;
        for (int t = 0; t < ACC; ++t) {
          gs += g[c][t];
          us += u[c][t];
        }
        for (int64_t t = k; t < K; ++t) {
          gs += a[t] * W1[(j0 + c) * K + t];
          us += a[t] * W3[(j0 + c) * K + t];
        }
        y[i * N + j0 + c] = gs / (1.0f + EXP(-gs)) * us;
      }
    }
    for (; j0 < N; ++j0) {  // columns left over when JB does not divide N
      const float gs = dot(a, W1 + j0 * K, K), us = dot(a, W3 + j0 * K, K);
      y[i * N + j0] = gs / (1.0f + EXP(-gs)) * us;
    }
  }
}
