// The DLRM interaction (problems/pytorch/dlrm_interaction) as a first kernel written by hand for the operator's
// A/B (bench/operator_device.sh runs the search from it), the way a model would rewrite the suite's seed: the same
// launch (one block per sample, THREADS threads, STAGE * the sample's padded rows of shared memory), with 32-bit
// index arithmetic (the seed's 64-bit divisions while staging cost more than its dot products), the sample staged
// with float4 loads, and four independent sums per dot product.
#ifndef THREADS
#define THREADS 128
#endif
#ifndef STAGE
#define STAGE 1
#endif

extern "C" __global__ void __launch_bounds__(THREADS) dlrm_interaction(const float* __restrict__ features,
                                                                      float* __restrict__ out, long long batch_size,
                                                                      long long num_fields, long long embedding_dim,
                                                                      long long num_pairs) {
  const int b = blockIdx.x, F = (int)num_fields, D = (int)embedding_dim, P = (int)num_pairs;
  if (b >= batch_size) return;
  const float* xb = features + (long long)b * F * D;
#if STAGE
  extern __shared__ float xs[];  // F rows of D + 1 floats: a warp's pairs read different banks
  const int stride = D + 1;
  if ((D & 3) == 0 && ((unsigned long long)xb & 15) == 0) {
    const float4* x4 = reinterpret_cast<const float4*>(xb);
    const int quads = D / 4;
    for (int e = threadIdx.x; e < F * quads; e += THREADS) {
      const float4 v = __ldg(x4 + e);
      const int r = e / quads, c = (e - r * quads) * 4;
      float* dst = xs + r * stride + c;
      dst[0] = v.x, dst[1] = v.y, dst[2] = v.z, dst[3] = v.w;
    }
  } else {
    for (int e = threadIdx.x; e < F * D; e += THREADS) {
      const int r = e / D;
      xs[r * stride + (e - r * D)] = __ldg(xb + e);
    }
  }
  __syncthreads();
  const float* rows = xs;
#else
  const int stride = D;
  const float* rows = xb;
#endif
  for (int p = threadIdx.x; p < P; p += THREADS) {
    int i = 0, first = 0;  // first: the index of pair (i, i + 1)
    while (p >= first + (F - 1 - i)) {
      first += F - 1 - i;
      ++i;
    }
    const float* a = rows + i * stride;
    const float* c = rows + (i + 1 + (p - first)) * stride;
    float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
    int k = 0;
    for (; k + 4 <= D; k += 4) {
      s0 = fmaf(a[k], c[k], s0);
      s1 = fmaf(a[k + 1], c[k + 1], s1);
      s2 = fmaf(a[k + 2], c[k + 2], s2);
      s3 = fmaf(a[k + 3], c[k + 3], s3);
    }
    for (; k < D; ++k) s0 = fmaf(a[k], c[k], s0);
    out[(long long)b * P + p] = (s0 + s1) + (s2 + s3);
  }
}
