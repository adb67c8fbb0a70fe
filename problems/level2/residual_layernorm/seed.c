// Seed for residual_layernorm: h = x + r; y = (h - mean) / sqrt(var + eps) * gamma + beta per row.
//
// FUSE = 0: h is written for the whole matrix first, then each row of h is read back for the mean,
//           the variance and the normalization.
// FUSE = 1: each row's h is written and summed in one pass, then normalized while it is in cache.
// ACC: independent partial sums for the mean and variance (ACC = 1: serial chains).
#include <math.h>
#include <stdint.h>

#ifndef ACC
#define ACC 1
#endif
#ifndef FUSE
#define FUSE 0
#endif

static float row_sum(const float* v, int64_t N) {
  float acc[ACC];
  for (int u = 0; u < ACC; ++u) acc[u] = 0.0f;
  int64_t j = 0;
  for (; j + ACC <= N; j += ACC)
    for (int u = 0; u < ACC; ++u) acc[u] += v[j + u];
  float s = 0.0f;
  for (int u = 0; u < ACC; ++u) s += acc[u];
  for (; j < N; ++j) s += v[j];
  return s;
}

static float row_sq_dev(const float* v, int64_t N, float mean) {
  float acc[ACC];
  for (int u = 0; u < ACC; ++u) acc[u] = 0.0f;
  int64_t j = 0;
  for (; j + ACC <= N; j += ACC)
    for (int u = 0; u < ACC; ++u) acc[u] += (v[j + u] - mean) * (v[j + u] - mean);
  float s = 0.0f;
  for (int u = 0; u < ACC; ++u) s += acc[u];
  for (; j < N; ++j) s += (v[j] - mean) * (v[j] - mean);
  return s;
}

static void normalize_row(const float* hr, const float* gamma, const float* beta, float* yr, int64_t N, float eps) {
  const float mean = row_sum(hr, N) / (float)N;
  const float rstd = 1.0f / sqrtf(row_sq_dev(hr, N, mean) / (float)N + eps);
  for (int64_t j = 0; j < N; ++j) yr[j] = (hr[j] - mean) * rstd * gamma[j] + beta[j];
}

void residual_layernorm(const float* x, const float* r, const float* gamma, const float* beta, float* h, float* y,
                        int64_t M, int64_t N, float eps) {
#if FUSE
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) h[i * N + j] = x[i * N + j] + r[i * N + j];
    normalize_row(h + i * N, gamma, beta, y + i * N, N, eps);
  }
#else
  for (int64_t e = 0; e < M * N; ++e) h[e] = x[e] + r[e];
  for (int64_t i = 0; i < M; ++i) normalize_row(h + i * N, gamma, beta, y + i * N, N, eps);
#endif
}
