// Seed for gemm_sigmoid_rowsum: y[i] = sum_j sigmoid(x[i,:] . W[j,:] + b[j]), W stored N x K.
//
// ACC: independent partial sums per dot product (ACC = 1: one serial chain of float additions).
// JB:  columns computed together; each piece of x's row loaded once serves JB dot products.
// FAST_EXP = 0: the C library's expf; FAST_EXP = 1: an inline expf (within 2 ulp) that vectorizes.
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

static inline float sigmoid(float v) { return 1.0f / (1.0f + EXP(-v)); }

void gemm_sigmoid_rowsum(const float* x, const float* W, const float* b, float* y, int64_t M, int64_t N, int64_t K) {
  for (int64_t i = 0; i < M; ++i) {
    const float* a = x + i * K;
    float total = 0.0f;
    int64_t j0 = 0;
    for (; j0 + JB <= N; j0 += JB) {
      float acc[JB][ACC];
      for (int c = 0; c < JB; ++c)
        for (int u = 0; u < ACC; ++u) acc[c][u] = 0.0f;
      int64_t k = 0;
      for (; k + ACC <= K; k += ACC)
        for (int c = 0; c < JB; ++c)
          for (int u = 0; u < ACC; ++u) acc[c][u] += a[k + u] * W[(j0 + c) * K + k + u];
      for (int c = 0; c < JB; ++c) {
        float sum = b[j0 + c];
        for (int u = 0; u < ACC; ++u) sum += acc[c][u];
        for (int64_t t = k; t < K; ++t) sum += a[t] * W[(j0 + c) * K + t];
        total += sigmoid(sum);
      }
    }
    for (; j0 < N; ++j0) {  // columns left over when JB does not divide N
      float sum = b[j0];
      for (int64_t t = 0; t < K; ++t) sum += a[t] * W[j0 * K + t];
      total += sigmoid(sum);
    }
    y[i] = total;
  }
}
