// Seed for relu_nchw: out = relu(x) = max(x, 0) for an NCHW tensor of batch_size x channels x height x
// width floats (torch.relu). Exact: a NaN stays NaN, as in PyTorch.
//
// The seed loops as a channels-last kernel would: for each image, pixel by pixel, across the channels.
// In NCHW memory the channels of one pixel are height * width floats apart, so with BLOCK = 1 every load
// and store lands on another cache line (and, for large planes, another page) and nothing vectorizes.
// BLOCK: pixels handled per visit of a channel. Each visit reads and writes BLOCK contiguous floats;
//        BLOCK >= height * width walks every plane contiguously, one streaming, vectorized pass.
#include <stdint.h>

#ifndef BLOCK
#define BLOCK 1
#endif

void relu_nchw(const float* x, float* out, int64_t batch_size, int64_t channels, int64_t height, int64_t width) {
  const int64_t plane = height * width;
  for (int64_t n = 0; n < batch_size; ++n) {
    const float* xn = x + n * channels * plane;
    float* on = out + n * channels * plane;
    for (int64_t p0 = 0; p0 < plane; p0 += BLOCK) {
      const int64_t p1 = p0 + BLOCK < plane ? p0 + BLOCK : plane;
      for (int64_t c = 0; c < channels; ++c)
        for (int64_t p = p0; p < p1; ++p) {
          const float v = xn[c * plane + p];
          on[c * plane + p] = v < 0.0f ? 0.0f : v;
        }
    }
  }
}
