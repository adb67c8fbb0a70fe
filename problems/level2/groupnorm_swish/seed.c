// Seed for groupnorm_swish over an NCHW tensor with G groups of C / G channels:
// v = (x - mean) / sqrt(var + eps) * gamma[c] + beta[c] per (sample, group), then y = v * sigmoid(v).
//
// ACC: independent partial sums for the mean and variance (ACC = 1: serial chains).
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

void groupnorm_swish(const float* x, const float* gamma, const float* beta, float* y, int64_t N, int64_t C, int64_t H,
                     int64_t W, int64_t G, float eps) {
  const int64_t cpg = C / G, plane = H * W, count = cpg * plane;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < G; ++g) {
      const float* in = x + (n * C + g * cpg) * plane;
      float* out = y + (n * C + g * cpg) * plane;
      float acc[ACC];
      for (int u = 0; u < ACC; ++u) acc[u] = 0.0f;
      int64_t k = 0;
      for (; k + ACC <= count; k += ACC)
        for (int u = 0; u < ACC; ++u) acc[u] += in[k + u];
      float sum = 0.0f;
      for (int u = 0; u < ACC; ++u) sum += acc[u];
      for (; k < count; ++k) sum += in[k];
      const float mean = sum / (float)count;

      for (int u = 0; u < ACC; ++u) acc[u] = 0.0f;
      k = 0;
      for (; k + ACC <= count; k += ACC)
        for (int u = 0; u < ACC; ++u) acc[u] += (in[k + u] - mean) * (in[k + u] - mean);
      float sq = 0.0f;
      for (int u = 0; u < ACC; ++u) sq += acc[u];
      for (; k < count; ++k) sq += (in[k] - mean) * (in[k] - mean);
      const float rstd = 1.0f / sqrtf(sq / (float)count + eps);

      for (int64_t c = 0; c < cpg; ++c) {
        const float scale = rstd * gamma[g * cpg + c];
        const float shift = beta[g * cpg + c] - mean * scale;
        for (int64_t p = 0; p < plane; ++p) {
          const float v = in[c * plane + p] * scale + shift;
          out[c * plane + p] = v / (1.0f + EXP(-v));
        }
      }
    }
}
