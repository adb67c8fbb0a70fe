// Seed for embedding_bag_sparse_backward: the table's gradient of nn.EmbeddingBag(mode="sum", sparse=True),
// out[b, :] = sum over positions p of bag b of bag_weight[indices[p], :], in autograd's sparse form, coalesced:
//   grad_bag_weight_nnz[0]          the number of distinct rows the indices name, nnz;
//   grad_bag_weight_indices[0..nnz) those rows in ascending order, then -1 up to num_indices;
//   grad_bag_weight_values[u, :]    the gradient of row grad_bag_weight_indices[u]: the sum of grad_out[b, :] over
//                                   every position p of every bag b with indices[p] naming it; zeros from nnz on.
// Bag b is offsets[b] .. offsets[b + 1] - 1 (the last bag runs to num_indices), offsets never decrease.
//
// The seed marks the rows named in a table-sized array, numbers them in ascending order by walking the whole
// table, then adds every bag's gradient row into its rows' slots: its time grows with num_embeddings, where a
// sparse gradient's point is to grow with num_indices only (sort the positions by index instead).
// BLOCK: the values are added in blocks of BLOCK columns, every bag walked again for each block. BLOCK = 1 visits
//        each slot embedding_dim times, one float per visit; BLOCK >= embedding_dim adds whole rows.
#include <stdint.h>
#include <stdlib.h>

#ifndef BLOCK
#define BLOCK 1
#endif

void embedding_bag_sparse_backward(const int64_t* indices, const int64_t* offsets, const float* bag_weight,
                                   const float* grad_out, int64_t* grad_bag_weight_indices,
                                   float* grad_bag_weight_values, int64_t* grad_bag_weight_nnz, int64_t num_indices,
                                   int64_t batch_size, int64_t num_embeddings, int64_t embedding_dim) {
  (void)bag_weight;  // a sum is linear in the table: its gradient does not depend on it
  const int64_t D = embedding_dim;
  // slot[row]: -1 for a row no index names, else its place among the named rows in ascending order.
  int64_t* slot = malloc(sizeof(int64_t) * (size_t)(num_embeddings > 0 ? num_embeddings : 1));
  for (int64_t r = 0; r < num_embeddings; ++r) slot[r] = -1;
  for (int64_t p = 0; p < num_indices; ++p) slot[indices[p]] = 0;
  int64_t nnz = 0;
  for (int64_t r = 0; r < num_embeddings; ++r)
    if (slot[r] == 0) {
      slot[r] = nnz;
      grad_bag_weight_indices[nnz++] = r;
    }
  for (int64_t u = nnz; u < num_indices; ++u) grad_bag_weight_indices[u] = -1;
  for (int64_t e = 0; e < num_indices * D; ++e) grad_bag_weight_values[e] = 0.0f;
  grad_bag_weight_nnz[0] = nnz;
  for (int64_t d0 = 0; d0 < D; d0 += BLOCK) {
    const int64_t width = D - d0 < BLOCK ? D - d0 : BLOCK;
    for (int64_t b = 0; b < batch_size; ++b) {
      const int64_t start = offsets[b], end = b + 1 < batch_size ? offsets[b + 1] : num_indices;
      const float* g = grad_out + b * D + d0;
      for (int64_t p = start; p < end; ++p) {
        float* row = grad_bag_weight_values + slot[indices[p]] * D + d0;
        for (int64_t c = 0; c < width; ++c) row[c] += g[c];
      }
    }
  }
  free(slot);
}
