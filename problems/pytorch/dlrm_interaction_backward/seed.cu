// The backward of DLRM's dot-product feature interaction on the GPU (dlrm_interaction's module): the forward
// gives out[b, p] = dot(features[b, i, :], features[b, j, :]) for the pairs i < j of each sample's num_fields rows
// in row-major pair order, p(i, j) = i * F - i * (i + 1) / 2 + j - i - 1. Given grad_out (batch_size x num_pairs),
//   grad_features[b, i, k] = the sum over j != i of grad_out[b, p(min(i, j), max(i, j))] * features[b, j, k],
// that is (G + G^T) @ features[b], G the strictly upper triangle that grad_out[b] fills.
//
// One block per sample; thread t builds the outputs t, t + THREADS, ... of the sample's num_fields x
// embedding_dim (row i = e / D, column k = e % D), each a sum over the other rows written once. STAGE = 1 first
// copies the sample's features and gradients to shared memory (coalesced), so that the F - 1 reads of each
// feature come from there. The seed point (STAGE 0, THREADS 32): one warp per sample, every feature read
// F - 1 times from global memory (L1 and L2 catch most). Several samples per block, register blocks of rows
// and columns (each sample a small symmetric F x F by F x D product), or a batched tensor-core GEMM are the
// next steps.
#ifndef THREADS
#define THREADS 32
#endif
#ifndef STAGE
#define STAGE 0
#endif

extern "C" __global__ void __launch_bounds__(THREADS)
    dlrm_interaction_backward(const float* __restrict__ features, const float* __restrict__ grad_out,
                              float* __restrict__ grad_features, long long batch_size, long long num_fields,
                              long long embedding_dim, long long num_pairs) {
  const long long b = blockIdx.x, F = num_fields, D = embedding_dim;
  if (b >= batch_size) return;  // the whole block leaves together
  const float* x = features + b * F * D;
  const float* g = grad_out + b * num_pairs;
#if STAGE
  extern __shared__ float stage[];  // the sample's F x D features, then its num_pairs gradients
  for (long long e = threadIdx.x; e < F * D; e += THREADS) stage[e] = x[e];
  for (long long p = threadIdx.x; p < num_pairs; p += THREADS) stage[F * D + p] = g[p];
  __syncthreads();
  x = stage;
  g = stage + F * D;
#endif
  float* dx = grad_features + b * F * D;
  for (long long e = threadIdx.x; e < F * D; e += THREADS) {
    const long long i = e / D, k = e % D;
    float sum = 0.f;
    for (long long j = 0; j < F; ++j) {
      if (j == i) continue;
      const long long lo = i < j ? i : j, hi = i < j ? j : i;
      sum += g[lo * F - lo * (lo + 1) / 2 + hi - lo - 1] * x[j * D + k];
    }
    dx[e] = sum;
  }
}
