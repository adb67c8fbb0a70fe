// Causal scaled dot-product attention in fp32: for each batch b, head h and query row i,
//   out[b, h, i, :] = sum over keys j <= i of softmax_j(q[b, h, i, :] . k[b, h, j, :] / sqrt(head_dim)) v[b, h, j, :]
// q, k, v and out are (batch_size, heads, seq_len, head_dim), row-major. Grid: x the query rows in blocks of THREADS,
// y the batch and head. DMAX bounds head_dim (the spec's constraint): the loops over it run to DMAX, unrolled,
// so that the row of q and the accumulator stay in registers (2 DMAX of them).
// One thread per query row, the online softmax: a running max m and sum l of exp(s - m), the output accumulator
// rescaled by exp(m_old - m_new) when the max grows, divided by l at the end; the row of q and the accumulator
// live in registers. The threads of a warp are consecutive rows of one head, so they read the same key row at
// once (a broadcast from L1), but each warp reads all of k and v up to its rows again, nothing is staged in shared
// memory, and the products run on the FMA units, not the tensor cores.
#ifndef THREADS
#define THREADS 64
#endif
#ifndef DMAX
#define DMAX 64
#endif

extern "C" __global__ void __launch_bounds__(THREADS)
    attention(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
              float* __restrict__ out, long long batch_size, long long heads, long long seq_len, long long head_dim) {
  (void)batch_size;
  (void)heads;
  const long long S = seq_len, D = head_dim;
  const long long i = (long long)blockIdx.x * THREADS + threadIdx.x;
  if (i >= S) return;
  const long long head = (long long)blockIdx.y * S * D;
  const float* kh = k + head;
  const float* vh = v + head;
  const float scale = rsqrtf((float)D);
  float qi[DMAX], acc[DMAX];
#pragma unroll
  for (int d = 0; d < DMAX; ++d) {
    qi[d] = d < D ? q[head + i * D + d] * scale : 0.f;
    acc[d] = 0.f;
  }
  float m = __int_as_float(0xff800000), l = 0.f;  // -inf (NVRTC has no math.h macros)
  for (long long j = 0; j <= i; ++j) {
    float s = 0.f;
#pragma unroll
    for (int d = 0; d < DMAX; ++d)
      if (d < D) s += qi[d] * kh[j * D + d];
    const float m_new = fmaxf(m, s);
    const float correction = __expf(m - m_new);  // 0 on the first key, where m is -inf
    const float p = __expf(s - m_new);
    l = l * correction + p;
#pragma unroll
    for (int d = 0; d < DMAX; ++d)
      if (d < D) acc[d] = acc[d] * correction + p * vh[j * D + d];
    m = m_new;
  }
  const float inv = 1.f / l;
#pragma unroll
  for (int d = 0; d < DMAX; ++d)
    if (d < D) out[head + i * D + d] = acc[d] * inv;
}
