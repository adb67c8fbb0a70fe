// Seed for emb_bag_sum: nn.EmbeddingBag(mode="sum"), out[b, :] = sum over positions p of bag b of
// bag_weight[indices[p], :]. Bag b is the positions offsets[b] .. offsets[b + 1] - 1 (the last bag runs to
// num_indices), offsets start at 0 and never decrease; an empty bag gives a row of zeros. bag_weight is
// num_embeddings x embedding_dim fp32, indices and offsets int64.
//
// Bound by the random row gathers.
// BLOCK: the output is built in blocks of BLOCK columns; for each block every bag walks its positions
//        again. BLOCK = 1 visits each gathered row embedding_dim times, one float (and one reload of the
//        index) per visit; BLOCK >= embedding_dim reads each row once, in contiguous, vectorizable pieces.
// U:     positions of a bag gathered at once into U independent partial sums, so that U random row loads
//        are in flight instead of one.
#include <stdint.h>

#ifndef BLOCK
#define BLOCK 1
#endif
#ifndef U
#define U 1
#endif

void emb_bag_sum(const int64_t* indices, const int64_t* offsets, const float* bag_weight, float* out,
                 int64_t num_indices, int64_t batch_size, int64_t num_embeddings, int64_t embedding_dim) {
  (void)num_embeddings;
  const int64_t D = embedding_dim;
  for (int64_t d0 = 0; d0 < D; d0 += BLOCK) {
    const int64_t w = D - d0 < BLOCK ? D - d0 : BLOCK;
    for (int64_t b = 0; b < batch_size; ++b) {
      const int64_t start = offsets[b], end = b + 1 < batch_size ? offsets[b + 1] : num_indices;
      float acc[U][BLOCK];
      for (int u = 0; u < U; ++u)
        for (int64_t c = 0; c < w; ++c) acc[u][c] = 0.0f;
      int64_t p = start;
      for (; p + U <= end; p += U)
        for (int u = 0; u < U; ++u) {
          const float* row = bag_weight + indices[p + u] * D + d0;
          for (int64_t c = 0; c < w; ++c) acc[u][c] += row[c];
        }
      for (; p < end; ++p) {
        const float* row = bag_weight + indices[p] * D + d0;
        for (int64_t c = 0; c < w; ++c) acc[0][c] += row[c];
      }
      for (int64_t c = 0; c < w; ++c) {
        float s = acc[0][c];
        for (int u = 1; u < U; ++u) s += acc[u][c];
        out[b * D + d0 + c] = s;
      }
    }
  }
}
