// Trusted reference for conv2d_relu_bias (3 x 3, stride 1, no padding, NCHW), in double:
// y = relu(conv2d(x, w)) + bias[co]. One output row is accumulated in a double array.
#include <stdint.h>

void conv2d_relu_bias(const float* x, const float* w, const float* bias, float* y, int64_t N, int64_t CI, int64_t CO,
                      int64_t H, int64_t W, int64_t OH, int64_t OW) {
  double acc[OW];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t co = 0; co < CO; ++co)
      for (int64_t oh = 0; oh < OH; ++oh) {
        for (int64_t ow = 0; ow < OW; ++ow) acc[ow] = 0.0;
        for (int64_t ci = 0; ci < CI; ++ci)
          for (int64_t kh = 0; kh < 3; ++kh)
            for (int64_t kw = 0; kw < 3; ++kw) {
              const double wv = w[((co * CI + ci) * 3 + kh) * 3 + kw];
              const float* row = x + ((n * CI + ci) * H + oh + kh) * W + kw;
              for (int64_t ow = 0; ow < OW; ++ow) acc[ow] += wv * (double)row[ow];
            }
        for (int64_t ow = 0; ow < OW; ++ow)
          y[((n * CO + co) * OH + oh) * OW + ow] = (float)((acc[ow] > 0.0 ? acc[ow] : 0.0) + (double)bias[co]);
      }
}
