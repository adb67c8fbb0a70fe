// Seed for attention: causal scaled dot-product attention, for each batch b, head h and query row i:
//   s[j]   = (q[b, h, i, :] . k[b, h, j, :]) / sqrt(head_dim)   for keys j <= i (later keys masked out)
//   out[b, h, i, :] = sum_j softmax(s)[j] * v[b, h, j, :]
// q, k, v and out are (batch_size, heads, seq_len, head_dim) fp32, row-major.
//
// The seed is the three passes of the definition per query row: the scores into a row buffer, the softmax
// (max, then exponentials and their sum), then the weighted sum of v's rows. Every query row reads all of
// k and v up to it: k and v of a head stay in cache at these sizes, but nothing is reused in registers.
// ACC: independent partial sums in each score's dot product (1: one dependent chain of head_dim additions).
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#ifndef ACC
#define ACC 1
#endif

static float dot(const float* a, const float* b, int64_t n) {
  float acc[ACC];
  for (int k = 0; k < ACC; ++k) acc[k] = 0.0f;
  int64_t d = 0;
  for (; d + ACC <= n; d += ACC)
    for (int k = 0; k < ACC; ++k) acc[k] += a[d + k] * b[d + k];
  float sum = 0.0f;
  for (int k = 0; k < ACC; ++k) sum += acc[k];
  for (; d < n; ++d) sum += a[d] * b[d];
  return sum;
}

void attention(const float* q, const float* k, const float* v, float* out, int64_t batch_size, int64_t heads,
               int64_t seq_len, int64_t head_dim) {
  const int64_t S = seq_len, D = head_dim;
  const float scale = 1.0f / sqrtf((float)D);
  float* p = malloc(sizeof(float) * (size_t)(S > 0 ? S : 1));
  for (int64_t bh = 0; bh < batch_size * heads; ++bh) {
    const float* qh = q + bh * S * D;
    const float* kh = k + bh * S * D;
    const float* vh = v + bh * S * D;
    float* oh = out + bh * S * D;
    for (int64_t i = 0; i < S; ++i) {
      float max = -INFINITY;
      for (int64_t j = 0; j <= i; ++j) {
        p[j] = dot(qh + i * D, kh + j * D, D) * scale;
        if (p[j] > max) max = p[j];
      }
      float sum = 0.0f;
      for (int64_t j = 0; j <= i; ++j) {
        p[j] = expf(p[j] - max);
        sum += p[j];
      }
      const float inv = 1.0f / sum;
      float* o = oh + i * D;
      for (int64_t d = 0; d < D; ++d) o[d] = 0.0f;
      for (int64_t j = 0; j <= i; ++j) {
        const float w = p[j] * inv;
        for (int64_t d = 0; d < D; ++d) o[d] += w * vh[j * D + d];
      }
    }
  }
  free(p);
}
