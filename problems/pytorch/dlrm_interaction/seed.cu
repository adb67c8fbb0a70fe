// DLRM's dot-product feature interaction: out[b, p] = dot(features[b, i, :], features[b, j, :]) for the pairs
// i < j of each sample's num_fields rows in row-major order, p = 0 for (0, 1), then (0, 2), ..., (0, F - 1),
// (1, 2), ...; features is batch_size x num_fields x embedding_dim fp32, out batch_size x num_pairs.
// One block per sample; its THREADS threads loop over the sample's pairs, one dot product each (the pair's
// row i found by walking the rows' lengths F - 1, F - 2, ...).
// STAGE: 0 reads both rows of every pair from global memory: a warp's 32 pairs touch many different rows
//        at once (uncoalesced) and each row is read F - 1 times. 1 first copies the sample (contiguous in
//        features) to shared memory with coalesced loads, rows padded to embedding_dim + 1 floats so that
//        the pairs of a warp hit different banks.
// The seed point (THREADS 32, STAGE 0) has one warp per sample, all reads from global memory.
#ifndef THREADS
#define THREADS 32
#endif
#ifndef STAGE
#define STAGE 0
#endif

extern "C" __global__ void __launch_bounds__(THREADS) dlrm_interaction(const float* __restrict__ features,
                                                                      float* __restrict__ out, long long batch_size,
                                                                      long long num_fields, long long embedding_dim,
                                                                      long long num_pairs) {
  const long long b = blockIdx.x, F = num_fields, D = embedding_dim;
  if (b >= batch_size) return;  // the whole block leaves together
  const float* xb = features + b * F * D;
#if STAGE
  extern __shared__ float xs[];  // F rows of D + 1 floats
  const long long stride = D + 1;
  for (long long e = threadIdx.x; e < F * D; e += THREADS) {
    const long long r = e / D;
    xs[r * stride + (e - r * D)] = xb[e];
  }
  __syncthreads();
  const float* rows = xs;
#else
  const long long stride = D;
  const float* rows = xb;
#endif
  for (long long p = threadIdx.x; p < num_pairs; p += THREADS) {
    long long i = 0, first = 0;  // first: the index of pair (i, i + 1)
    while (p >= first + (F - 1 - i)) {
      first += F - 1 - i;
      ++i;
    }
    const long long j = i + 1 + (p - first);
    const float* a = rows + i * stride;
    const float* c = rows + j * stride;
    float acc = 0.f;
    for (long long k = 0; k < D; ++k) acc += a[k] * c[k];
    out[b * num_pairs + p] = acc;
  }
}
