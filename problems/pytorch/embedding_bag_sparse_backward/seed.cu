// The table's gradient of nn.EmbeddingBag(mode="sum", sparse=True) on the GPU, in autograd's sparse form,
// coalesced: grad_bag_weight_nnz[0] distinct rows named, grad_bag_weight_indices[0..nnz) those rows in ascending
// order (then -1 up to num_indices), grad_bag_weight_values[u, :] the sum of grad_out[b, :] over every position of
// every bag b naming row grad_bag_weight_indices[u] (zeros from nnz on). Bag b is offsets[b] .. offsets[b + 1] - 1,
// the last bag running to num_indices.
//
// A program of five kernels over a table-sized temporary, slot: clear it; mark the rows named; number them in
// ascending order with one block scanning the whole table (1024 rows a pass), writing the indices, their -1 tail
// and nnz; clear the values; then each bag adds its gradient row into its rows' slots with atomics (TPB lanes
// per bag, lane l owning columns l, l + TPB, ...). The order of the atomics varies from call to call, within
// the tolerance. The numbering's one block and its walk of the whole table are the seed's cost: a sort of the
// positions by index (a radix sort, then run boundaries) grows with num_indices only and needs no atomics.
/* kernelevolve-plan
{"temporaries": [{"name": "slot", "dtype": "i64", "shape": ["num_embeddings"]}],
 "steps": [
   {"kernel": "clear_slots", "grid": ["cdiv(num_embeddings, THREADS)"], "block": ["THREADS"],
    "args": ["slot", "num_embeddings"]},
   {"kernel": "mark_rows", "grid": ["cdiv(num_indices, THREADS)"], "block": ["THREADS"],
    "args": ["indices", "slot", "num_indices"]},
   {"kernel": "number_rows", "grid": [1], "block": [1024],
    "args": ["slot", "grad_bag_weight_indices", "grad_bag_weight_nnz", "num_embeddings", "num_indices"]},
   {"kernel": "clear_values", "grid": ["cdiv(num_indices * embedding_dim, THREADS)"], "block": ["THREADS"],
    "args": ["grad_bag_weight_values", "num_indices * embedding_dim"]},
   {"kernel": "embedding_bag_sparse_backward", "grid": ["cdiv(batch_size, THREADS / TPB)"], "block": ["THREADS"],
    "args": ["indices", "offsets", "grad_out", "slot", "grad_bag_weight_values", "num_indices", "batch_size",
             "embedding_dim"]}]}
*/
#ifndef THREADS
#define THREADS 128
#endif
#ifndef TPB
#define TPB 1
#endif

extern "C" __global__ void clear_slots(long long* slot, long long n) {
  const long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (r < n) slot[r] = 0;
}

extern "C" __global__ void mark_rows(const long long* __restrict__ indices, long long* slot, long long n) {
  const long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (p < n) slot[indices[p]] = 1;  // every writer stores the same 1: no atomic needed
}

// One block of 1024 threads: each pass scans 1024 flags (warp shuffles, then the 32 warp totals), gives each
// marked row its rank among the marked rows, and writes the row into the indices at that rank.
extern "C" __global__ void __launch_bounds__(1024) number_rows(long long* slot, long long* __restrict__ rows,
                                                               long long* __restrict__ nnz_out,
                                                               long long num_embeddings, long long num_indices) {
  __shared__ int warp_total[32];
  __shared__ long long base;
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
  if (t == 0) base = 0;
  __syncthreads();
  for (long long r0 = 0; r0 < num_embeddings; r0 += 1024) {
    const long long r = r0 + t;
    const int flag = r < num_embeddings && slot[r] != 0;
    int incl = flag;
    for (int d = 1; d < 32; d <<= 1) {
      const int v = __shfl_up_sync(0xffffffffu, incl, d);
      if (lane >= d) incl += v;
    }
    if (lane == 31) warp_total[warp] = incl;
    __syncthreads();
    if (warp == 0) {
      int w = warp_total[lane];
      for (int d = 1; d < 32; d <<= 1) {
        const int v = __shfl_up_sync(0xffffffffu, w, d);
        if (lane >= d) w += v;
      }
      warp_total[lane] = w;  // inclusive totals of the warps up to this one
    }
    __syncthreads();
    const long long rank = base + (warp > 0 ? warp_total[warp - 1] : 0) + incl - flag;
    if (flag) {
      slot[r] = rank;
      rows[rank] = r;
    }
    __syncthreads();
    if (t == 0) base += warp_total[31];
    __syncthreads();
  }
  for (long long u = base + t; u < num_indices; u += 1024) rows[u] = -1;
  if (t == 0) nnz_out[0] = base;
}

extern "C" __global__ void clear_values(float* values, long long n) {
  const long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (e < n) values[e] = 0.f;
}

extern "C" __global__ void __launch_bounds__(THREADS)
    embedding_bag_sparse_backward(const long long* __restrict__ indices, const long long* __restrict__ offsets,
                                  const float* __restrict__ grad_out, long long* slot, float* values,
                                  long long num_indices, long long batch_size, long long embedding_dim) {
  const long long D = embedding_dim;
  const int lane = threadIdx.x % TPB;
  const long long b = (long long)blockIdx.x * (THREADS / TPB) + threadIdx.x / TPB;
  if (b >= batch_size) return;
  const long long start = offsets[b], end = b + 1 < batch_size ? offsets[b + 1] : num_indices;
  for (long long d = lane; d < D; d += TPB) {
    const float g = grad_out[b * D + d];
    for (long long p = start; p < end; ++p) atomicAdd(&values[slot[indices[p]] * D + d], g);
  }
}
