// DLRM's dot interaction: out[b, i * (i - 1) / 2 + j] = dot(X[b, i, :], X[b, j, :]) for 0 <= j < i < F, the
// strictly lower triangle of each sample's F x F Gram matrix (X is B x F x D fp32, row-major).
// A block handles SPB consecutive samples; its THREADS threads loop over the SPB * P outputs, one dot
// product each. STAGE = 1 first copies the block's samples (contiguous in X) to shared memory with
// coalesced loads, rows padded to D + 1 floats so that the threads of a warp, working on pairs with
// different rows j, read different banks; STAGE = 0 reads both rows from global memory.
// The seed point (SPB 1, STAGE 0) reads up to F different rows per warp load (uncoalesced) and every row
// F - 1 times.
#ifndef THREADS
#define THREADS 64
#endif
#ifndef SPB
#define SPB 1
#endif
#ifndef STAGE
#define STAGE 0
#endif

extern "C" __global__ void __launch_bounds__(THREADS) dot_interaction(const float* __restrict__ X, float* __restrict__ out,
                                                                      long long B, long long F, long long D,
                                                                      long long P) {
  extern __shared__ float xs[];  // STAGE: SPB samples of F rows, each padded to D + 1 floats
  const long long b0 = (long long)blockIdx.x * SPB;
  if (b0 >= B) return;  // the whole block leaves together
  const long long nb = B - b0 < SPB ? B - b0 : SPB;
#if STAGE
  const long long stride = D + 1;
  const float* src = X + b0 * F * D;
  for (long long e = threadIdx.x; e < nb * F * D; e += THREADS) {
    const long long row = e / D, k = e - row * D;
    xs[row * stride + k] = src[e];
  }
  __syncthreads();
#endif
  for (long long q = threadIdx.x; q < nb * P; q += THREADS) {
    const long long s = q / P, p = q - s * P;
    long long i = (long long)((1.f + sqrtf(1.f + 8.f * (float)p)) * 0.5f);  // the row of pair p, then exact
    while (i > 1 && i * (i - 1) / 2 > p) --i;
    while ((i + 1) * i / 2 <= p) ++i;
    const long long j = p - i * (i - 1) / 2;
#if STAGE
    const float* a = xs + (s * F + i) * stride;
    const float* c = xs + (s * F + j) * stride;
#else
    const float* a = X + ((b0 + s) * F + i) * D;
    const float* c = X + ((b0 + s) * F + j) * D;
#endif
    float acc = 0.f;
    for (long long k = 0; k < D; ++k) acc += a[k] * c[k];
    out[(b0 + s) * P + p] = acc;
  }
}
