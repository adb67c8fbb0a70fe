// Seed for embedding_bag_backward: the table's gradient of nn.EmbeddingBag(mode="sum") (emb_bag_sum's module),
// out[b, :] = sum over positions p of bag b of bag_weight[indices[p], :]. Given grad_out (dL/dout), every
// position p of bag b adds grad_out[b, :] into row indices[p] of grad_bag_weight; a row no index names stays 0,
// and a row named k times gets k additions. Bag b is offsets[b] .. offsets[b + 1] - 1 (the last bag runs to
// num_indices), offsets never decrease; an empty bag adds nothing.
//
// The gradient is written dense (num_embeddings x embedding_dim, every row, most of them zeros at a real
// table's size); a real kernel writes the sparse form, the rows named and their gradients (README).
// BLOCK: the gradient is added in blocks of BLOCK columns, every bag walked again for each block. BLOCK = 1
//        visits each named row embedding_dim times, one float per visit (and reloads its index each time);
//        BLOCK >= embedding_dim adds whole rows, contiguous and vectorizable.
#include <stdint.h>

#ifndef BLOCK
#define BLOCK 1
#endif

void embedding_bag_backward(const int64_t* indices, const int64_t* offsets, const float* bag_weight,
                            const float* grad_out, float* grad_bag_weight, int64_t num_indices, int64_t batch_size,
                            int64_t num_embeddings, int64_t embedding_dim) {
  (void)bag_weight;  // a sum is linear in the table: its gradient does not depend on it
  const int64_t D = embedding_dim;
  for (int64_t e = 0; e < num_embeddings * D; ++e) grad_bag_weight[e] = 0.0f;
  for (int64_t d0 = 0; d0 < D; d0 += BLOCK) {
    const int64_t width = D - d0 < BLOCK ? D - d0 : BLOCK;
    for (int64_t b = 0; b < batch_size; ++b) {
      const int64_t start = offsets[b], end = b + 1 < batch_size ? offsets[b + 1] : num_indices;
      const float* g = grad_out + b * D + d0;
      for (int64_t p = start; p < end; ++p) {
        float* row = grad_bag_weight + indices[p] * D + d0;
        for (int64_t c = 0; c < width; ++c) row[c] += g[c];
      }
    }
  }
}
