// Seed for gemm_bias_relu_scale: y = relu(x W^T + b) * scale, W stored N x K (nn.Linear).
//
// FUSE = 0: three passes, as an eager framework runs it: y = x W^T, then y += b, then relu and scale.
// FUSE = 1: the bias, relu and scale are applied to each dot product before it is stored.
// ACC:  independent partial sums per dot product (ACC = 1: one serial chain of float additions).
// JB:   columns of y computed together; each piece of x's row loaded once serves JB dot products.
#include <stdint.h>

#ifndef FUSE
#define FUSE 0
#endif
#ifndef ACC
#define ACC 1
#endif
#ifndef JB
#define JB 1
#endif

static inline float epilogue(float v, float bias, float scale) {
  v += bias;
  return (v > 0.0f ? v : 0.0f) * scale;
}

void gemm_bias_relu_scale(const float* x, const float* W, const float* b, float* y, int64_t M, int64_t N, int64_t K,
                          float scale) {
  for (int64_t i = 0; i < M; ++i) {
    const float* a = x + i * K;
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
        float sum = 0.0f;
        for (int u = 0; u < ACC; ++u) sum += acc[c][u];
        for (int64_t t = k; t < K; ++t) sum += a[t] * W[(j0 + c) * K + t];
        y[i * N + j0 + c] = FUSE ? epilogue(sum, b[j0 + c], scale) : sum;
      }
    }
    for (; j0 < N; ++j0) {  // columns left over when JB does not divide N
      float sum = 0.0f;
      for (int64_t t = 0; t < K; ++t) sum += a[t] * W[j0 * K + t];
      y[i * N + j0] = FUSE ? epilogue(sum, b[j0], scale) : sum;
    }
  }
#if !FUSE
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) y[i * N + j] += b[j];
  for (int64_t e = 0; e < M * N; ++e) y[e] = (y[e] > 0.0f ? y[e] : 0.0f) * scale;
#endif
}
