// nn.EmbeddingBag(mode="sum"): out[b, :] = sum over positions p of bag b of bag_weight[indices[p], :]; bag b is
// offsets[b] .. offsets[b + 1] - 1 (the last bag runs to num_indices), an empty bag gives zeros. bag_weight is
// num_embeddings x embedding_dim fp32, indices and offsets int64.
// TPB threads share a bag (consecutive lanes) and a block of THREADS threads holds THREADS / TPB bags; lane l
// owns the columns l, l + TPB, ... and walks the whole bag for each of them.
// The seed point (TPB 1) is one thread per bag, walking every column of every gathered row itself: the
// threads of a warp read 32 different rows at once (no load is coalesced), one 4-byte gather in flight per
// thread, and only batch_size threads in all. TPB = 32 or more reads each row as contiguous 128-byte pieces.
#ifndef THREADS
#define THREADS 64
#endif
#ifndef TPB
#define TPB 1
#endif

extern "C" __global__ void __launch_bounds__(THREADS) emb_bag_sum(const long long* __restrict__ indices,
                                                                 const long long* __restrict__ offsets,
                                                                 const float* __restrict__ bag_weight,
                                                                 float* __restrict__ out, long long num_indices,
                                                                 long long batch_size, long long num_embeddings,
                                                                 long long embedding_dim) {
  (void)num_embeddings;
  const long long D = embedding_dim;
  const int lane = threadIdx.x % TPB;
  const long long b = (long long)blockIdx.x * (THREADS / TPB) + threadIdx.x / TPB;
  if (b >= batch_size) return;
  const long long start = offsets[b], end = b + 1 < batch_size ? offsets[b + 1] : num_indices;
  for (long long d = lane; d < D; d += TPB) {
    float acc = 0.f;
    for (long long p = start; p < end; ++p) acc += bag_weight[indices[p] * D + d];
    out[b * D + d] = acc;
  }
}
