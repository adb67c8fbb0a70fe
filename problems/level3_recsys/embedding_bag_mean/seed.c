// Seed for embedding_bag_mean: out[b, :] = mean over the positions j of bag b of W[idx[j], :]; bag b is
// offsets[b] .. offsets[b + 1] - 1 (the last bag runs to NNZ), and an empty bag gives a row of zeros.
//
// SEGMENT = 0: as a framework runs it through an offset-to-bag map: zero the output; for every position j,
//              find its bag (the last b with offsets[b] <= j; none when j < offsets[0]) by a binary search
//              and add the row into that bag's output row; then divide every row by its bag's length.
//              Three passes over the output, and a dependent search per position.
// SEGMENT = 1: each bag walks its own positions, accumulates, and scales once by 1 / length.
// U:           rows added together per pass over the bag's output row (SEGMENT = 1): U = 1 loads and stores
//              the output row once per row gathered.
#include <stdint.h>

#ifndef SEGMENT
#define SEGMENT 0
#endif
#ifndef U
#define U 1
#endif

void embedding_bag_mean(const float* W, const int32_t* idx, const int32_t* offsets, float* out, int64_t V, int64_t D,
                        int64_t B, int64_t NNZ) {
  (void)V;
#if !SEGMENT
  for (int64_t e = 0; e < B * D; ++e) out[e] = 0.0f;
  for (int64_t j = 0; j < NNZ; ++j) {
    if (B == 0 || offsets[0] > j) continue;  // before the first bag
    int64_t lo = 0, hi = B - 1;               // the last b with offsets[b] <= j lies in [lo, hi]
    while (lo < hi) {
      const int64_t mid = (lo + hi + 1) / 2;
      if (offsets[mid] <= j) lo = mid;
      else hi = mid - 1;
    }
    const float* row = W + (int64_t)idx[j] * D;
    float* o = out + lo * D;
    for (int64_t d = 0; d < D; ++d) o[d] += row[d];
  }
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = (b + 1 < B ? offsets[b + 1] : NNZ) - offsets[b];
    if (n > 0)
      for (int64_t d = 0; d < D; ++d) out[b * D + d] /= (float)n;
  }
#else
  for (int64_t b = 0; b < B; ++b) {
    const int64_t start = offsets[b], end = b + 1 < B ? offsets[b + 1] : NNZ;
    float* o = out + b * D;
    for (int64_t d = 0; d < D; ++d) o[d] = 0.0f;
    int64_t j = start;
    for (; j + U <= end; j += U) {
      const float* rows[U];
      for (int u = 0; u < U; ++u) rows[u] = W + (int64_t)idx[j + u] * D;
      for (int64_t d = 0; d < D; ++d) {
        float s = rows[0][d];
        for (int u = 1; u < U; ++u) s += rows[u][d];
        o[d] += s;
      }
    }
    for (; j < end; ++j) {
      const float* row = W + (int64_t)idx[j] * D;
      for (int64_t d = 0; d < D; ++d) o[d] += row[d];
    }
    const float scale = end > start ? 1.0f / (float)(end - start) : 0.0f;
    for (int64_t d = 0; d < D; ++d) o[d] *= scale;
  }
#endif
}
