// Seed for conv2d_relu_bias: y = relu(conv2d(x, w)) + bias[co]; 3 x 3, stride 1, no padding, NCHW.
//
// OW_INNER = 0: one dot product per output over (ci, kh, kw), a serial chain of float additions.
// OW_INNER = 1: each output row accumulates weight * input row segments: the innermost loop runs
//               along ow, contiguous and vectorizable; CO_TILE output channels share each input load.
#include <stdint.h>

#ifndef OW_INNER
#define OW_INNER 0
#endif
#ifndef CO_TILE
#define CO_TILE 1
#endif

void conv2d_relu_bias(const float* x, const float* w, const float* bias, float* y, int64_t N, int64_t CI, int64_t CO,
                      int64_t H, int64_t W, int64_t OH, int64_t OW) {
#if OW_INNER
  for (int64_t n = 0; n < N; ++n)
    for (int64_t co0 = 0; co0 < CO; co0 += CO_TILE) {
      const int64_t tile = CO - co0 < CO_TILE ? CO - co0 : CO_TILE;
      for (int64_t oh = 0; oh < OH; ++oh) {
        float* out[CO_TILE];
        for (int64_t t = 0; t < tile; ++t) {
          out[t] = y + ((n * CO + co0 + t) * OH + oh) * OW;
          for (int64_t ow = 0; ow < OW; ++ow) out[t][ow] = 0.0f;
        }
        for (int64_t ci = 0; ci < CI; ++ci)
          for (int64_t kh = 0; kh < 3; ++kh)
            for (int64_t kw = 0; kw < 3; ++kw) {
              const float* row = x + ((n * CI + ci) * H + oh + kh) * W + kw;
              if (tile == CO_TILE) {
                float wv[CO_TILE];
                for (int t = 0; t < CO_TILE; ++t) wv[t] = w[(((co0 + t) * CI + ci) * 3 + kh) * 3 + kw];
                for (int64_t ow = 0; ow < OW; ++ow) {
                  const float v = row[ow];
                  for (int t = 0; t < CO_TILE; ++t) out[t][ow] += wv[t] * v;
                }
              } else {
                for (int64_t t = 0; t < tile; ++t) {
                  const float wv = w[(((co0 + t) * CI + ci) * 3 + kh) * 3 + kw];
                  for (int64_t ow = 0; ow < OW; ++ow) out[t][ow] += wv * row[ow];
                }
              }
            }
        for (int64_t t = 0; t < tile; ++t)
          for (int64_t ow = 0; ow < OW; ++ow) out[t][ow] = (out[t][ow] > 0.0f ? out[t][ow] : 0.0f) + bias[co0 + t];
      }
    }
#else
  for (int64_t n = 0; n < N; ++n)
    for (int64_t co = 0; co < CO; ++co)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          float sum = 0.0f;
          for (int64_t ci = 0; ci < CI; ++ci)
            for (int64_t kh = 0; kh < 3; ++kh)
              for (int64_t kw = 0; kw < 3; ++kw)
                sum += x[((n * CI + ci) * H + oh + kh) * W + ow + kw] * w[((co * CI + ci) * 3 + kh) * 3 + kw];
          y[((n * CO + co) * OH + oh) * OW + ow] = (sum > 0.0f ? sum : 0.0f) + bias[co];
        }
#endif
}
