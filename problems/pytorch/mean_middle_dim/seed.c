// Seed for mean_middle_dim: out[b, j] = (1 / dim1) * sum over r of x[b, r, j], x of batch_size x dim1 x dim2
// row-major fp32 (torch.mean(x, dim=1)).
//
// BLOCK: outputs computed together. For each image and each block of BLOCK columns, the dim1 rows are
//        walked and each adds its BLOCK contiguous floats into BLOCK sums. BLOCK = 1 walks down one column
//        at a time (a stride of dim2 floats, a new cache line per load, one dependent chain of additions);
//        a wide BLOCK reads the rows contiguously into independent, vectorizable sums.
#include <stdint.h>

#ifndef BLOCK
#define BLOCK 1
#endif

void mean_middle_dim(const float* x, float* out, int64_t batch_size, int64_t dim1, int64_t dim2) {
  const float inv = 1.0f / (float)dim1;
  for (int64_t b = 0; b < batch_size; ++b) {
    const float* xb = x + b * dim1 * dim2;
    for (int64_t j0 = 0; j0 < dim2; j0 += BLOCK) {
      const int64_t w = dim2 - j0 < BLOCK ? dim2 - j0 : BLOCK;
      float acc[BLOCK];
      for (int64_t c = 0; c < w; ++c) acc[c] = 0.0f;
      for (int64_t r = 0; r < dim1; ++r) {
        const float* row = xb + r * dim2 + j0;
        for (int64_t c = 0; c < w; ++c) acc[c] += row[c];
      }
      for (int64_t c = 0; c < w; ++c) out[b * dim2 + j0 + c] = acc[c] * inv;
    }
  }
}
