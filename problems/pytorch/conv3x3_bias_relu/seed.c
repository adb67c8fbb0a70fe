// Seed for conv3x3_bias_relu: out = relu(conv2d(x, conv_weight, conv_bias, stride 1, padding 1) + bias),
// NCHW fp32: x is batch_size x in_channels x height x width, conv_weight out_channels x in_channels x 3 x 3,
// conv_bias and bias (out_channels x 1 x 1) one value per output channel; out is batch_size x out_channels x
// height x width.
//
// ROWS: 0 computes one output pixel at a time: 9 * in_channels taps, each with its bounds test (the zero
//       padding), one dependent chain of additions, nothing vectorizes. 1 computes whole output rows: for
//       each input channel and tap, a multiply-add of a contiguous input row into the output row (the valid
//       range worked out once per tap), which vectorizes; the epilogue runs over the row at the end.
// COB:  output channels computed together, so each loaded input value serves COB filters.
#include <stdint.h>

#ifndef ROWS
#define ROWS 0
#endif
#ifndef COB
#define COB 1
#endif

// Output channels co0 .. co0 + nc - 1 of one image; inlined with the constant COB for full blocks.
static inline __attribute__((always_inline)) void channels(const float* xn, const float* w, const float* cb,
                                                           const float* bb, float* on, int64_t ci_n, int64_t H,
                                                           int64_t W, int64_t nc) {
#if ROWS
  for (int64_t oh = 0; oh < H; ++oh) {
    for (int64_t c = 0; c < nc; ++c)
      for (int64_t ow = 0; ow < W; ++ow) on[(c * H + oh) * W + ow] = cb[c];
    for (int64_t ci = 0; ci < ci_n; ++ci)
      for (int64_t kh = 0; kh < 3; ++kh) {
        const int64_t ih = oh + kh - 1;
        if (ih < 0 || ih >= H) continue;
        const float* xrow = xn + (ci * H + ih) * W;
        for (int64_t kw = 0; kw < 3; ++kw) {
          const int64_t lo = kw == 0 ? 1 : 0, hi = kw == 2 ? W - 1 : W;  // ow with 0 <= ow + kw - 1 < W
          float wv[COB];
          for (int64_t c = 0; c < nc; ++c) wv[c] = w[((c * ci_n + ci) * 3 + kh) * 3 + kw];
          for (int64_t ow = lo; ow < hi; ++ow) {
            const float xv = xrow[ow + kw - 1];
            for (int64_t c = 0; c < nc; ++c) on[(c * H + oh) * W + ow] += wv[c] * xv;
          }
        }
      }
    for (int64_t c = 0; c < nc; ++c)
      for (int64_t ow = 0; ow < W; ++ow) {
        const float v = on[(c * H + oh) * W + ow] + bb[c];
        on[(c * H + oh) * W + ow] = v < 0.0f ? 0.0f : v;
      }
  }
#else
  for (int64_t oh = 0; oh < H; ++oh)
    for (int64_t ow = 0; ow < W; ++ow) {
      float acc[COB];
      for (int64_t c = 0; c < nc; ++c) acc[c] = cb[c];
      for (int64_t ci = 0; ci < ci_n; ++ci)
        for (int64_t kh = 0; kh < 3; ++kh)
          for (int64_t kw = 0; kw < 3; ++kw) {
            const int64_t ih = oh + kh - 1, iw = ow + kw - 1;
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            const float xv = xn[(ci * H + ih) * W + iw];
            for (int64_t c = 0; c < nc; ++c) acc[c] += w[((c * ci_n + ci) * 3 + kh) * 3 + kw] * xv;
          }
      for (int64_t c = 0; c < nc; ++c) {
        const float v = acc[c] + bb[c];
        on[(c * H + oh) * W + ow] = v < 0.0f ? 0.0f : v;
      }
    }
#endif
}

void conv3x3_bias_relu(const float* x, const float* bias, const float* conv_weight, const float* conv_bias,
                       float* out, int64_t batch_size, int64_t in_channels, int64_t height, int64_t width,
                       int64_t out_channels) {
  const int64_t plane = height * width;
  for (int64_t n = 0; n < batch_size; ++n) {
    const float* xn = x + n * in_channels * plane;
    int64_t co = 0;
    for (; co + COB <= out_channels; co += COB)
      channels(xn, conv_weight + co * in_channels * 9, conv_bias + co, bias + co,
               out + (n * out_channels + co) * plane, in_channels, height, width, COB);
    if (co < out_channels)
      channels(xn, conv_weight + co * in_channels * 9, conv_bias + co, bias + co,
               out + (n * out_channels + co) * plane, in_channels, height, width, out_channels - co);
  }
}
