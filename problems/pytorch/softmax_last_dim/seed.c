// Seed for softmax_last_dim: out[r, :] = exp(x[r, :] - max_r) / sum(exp(x[r, :] - max_r)) for every row r of
// the batch_size * seq_len rows of num_classes floats (torch.softmax(x, dim=-1)).
//
// Three passes per row: the maximum, the exponentials (stored in out) with their sum, then the scaling.
// FAST_EXP: 0 calls libm's expf, an opaque call per element that stops vectorization of the middle pass
//           (it dominates the time); 1 inlines a range reduction and a degree-6 polynomial (relative
//           error about 2e-7), so the pass vectorizes.
// ACC:      independent partial maxima and sums per row (ACC = 1: one dependent chain each).
#include <math.h>
#include <stdint.h>

#ifndef FAST_EXP
#define FAST_EXP 0
#endif
#ifndef ACC
#define ACC 1
#endif

#if FAST_EXP
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
#define EXP exp_fast
#else
#define EXP expf
#endif

void softmax_last_dim(const float* x, float* out, int64_t batch_size, int64_t seq_len, int64_t num_classes) {
  const int64_t rows = batch_size * seq_len, n = num_classes;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* o = out + r * n;
    float m[ACC];
    for (int a = 0; a < ACC; ++a) m[a] = -INFINITY;
    int64_t j = 0;
    for (; j + ACC <= n; j += ACC)
      for (int a = 0; a < ACC; ++a) m[a] = xr[j + a] > m[a] ? xr[j + a] : m[a];
    float mx = m[0];
    for (int a = 1; a < ACC; ++a) mx = m[a] > mx ? m[a] : mx;
    for (; j < n; ++j) mx = xr[j] > mx ? xr[j] : mx;

    float s[ACC];
    for (int a = 0; a < ACC; ++a) s[a] = 0.0f;
    j = 0;
    for (; j + ACC <= n; j += ACC)
      for (int a = 0; a < ACC; ++a) {
        const float e = EXP(xr[j + a] - mx);
        o[j + a] = e;
        s[a] += e;
      }
    float sum = 0.0f;
    for (int a = 0; a < ACC; ++a) sum += s[a];
    for (; j < n; ++j) {
      const float e = EXP(xr[j] - mx);
      o[j] = e;
      sum += e;
    }

    const float inv = 1.0f / sum;
    for (j = 0; j < n; ++j) o[j] *= inv;
  }
}
