// The table's gradient of nn.EmbeddingBag(mode="sum") on the GPU, dense (emb_bag_sum's module): every position
// p of bag b (offsets[b] .. offsets[b + 1] - 1, the last bag running to num_indices) adds grad_out[b, :] into row
// indices[p] of grad_bag_weight; a row named k times gets k additions, a row never named is zeros.
//
// A program of two kernels: clear the whole table's gradient, then each bag adds its gradient row into its rows
// with atomics, TPB consecutive lanes per bag (lane l owning columns l, l + TPB, ...), THREADS / TPB bags a block.
// The atomics' order varies from call to call; a row is named a few times at most here, so the sums stay well
// within the tolerance. The seed point (TPB 1) is one thread per bag: a warp's 32 threads add to 32 different
// rows at once (uncoalesced). TPB >= 32 adds each row as contiguous 128-byte pieces. The clear writes the whole
// table (64 MB at the large shape) and is most of the time: vector stores for it, and sorting the positions by
// row so that each named row is written once (no atomics) and the rest only cleared, are the next steps.
/* kernelevolve-plan
{"steps": [
   {"kernel": "clear_table", "grid": ["cdiv(num_embeddings * embedding_dim, THREADS)"], "block": ["THREADS"],
    "args": ["grad_bag_weight", "num_embeddings * embedding_dim"]},
   {"kernel": "embedding_bag_backward", "grid": ["cdiv(batch_size, THREADS / TPB)"], "block": ["THREADS"],
    "args": ["indices", "offsets", "grad_out", "grad_bag_weight", "num_indices", "batch_size", "embedding_dim"]}]}
*/
#ifndef THREADS
#define THREADS 128
#endif
#ifndef TPB
#define TPB 1
#endif

extern "C" __global__ void clear_table(float* table, long long n) {
  const long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (e < n) table[e] = 0.f;
}

extern "C" __global__ void __launch_bounds__(THREADS)
    embedding_bag_backward(const long long* __restrict__ indices, const long long* __restrict__ offsets,
                           const float* __restrict__ grad_out, float* grad_bag_weight, long long num_indices,
                           long long batch_size, long long embedding_dim) {
  const long long D = embedding_dim;
  const int lane = threadIdx.x % TPB;
  const long long b = (long long)blockIdx.x * (THREADS / TPB) + threadIdx.x / TPB;
  if (b >= batch_size) return;
  const long long start = offsets[b], end = b + 1 < batch_size ? offsets[b + 1] : num_indices;
  for (long long d = lane; d < D; d += TPB) {
    const float g = grad_out[b * D + d];
    for (long long p = start; p < end; ++p) atomicAdd(&grad_bag_weight[indices[p] * D + d], g);
  }
}
