// O[b] = softmax(S[b]) V[b], fp32, row-major: S is B x T x T (softmax over each row), V and O are B x T x D.
// A block computes a BM x BN tile of O[b] (blockIdx.z = b). First its warps find each of its BM rows' max
// and sum of exponentials (one pass over the row); then the product runs like a GEMM over K = T, the A
// slice being the probabilities exp(s - max) / sum, computed as S is staged into shared memory.
// A block computes a BM x BN tile of the output with (BM / TM) * (BN / TN) threads, each thread a TM x TN
// sub-tile held in registers (rows TM apart by BM / TM, columns by BN / TN, so a warp's shared-memory reads
// are consecutive or broadcast). K is walked in slices of BK: both operands' slices are staged in shared
// memory (k-major, padded by one against bank conflicts) with coalesced global loads, then multiplied.
// The seed point (16 x 16 x 16 tiles, 1 x 1 per thread) is the textbook shared-memory tiled kernel: every
// multiply-add needs two shared-memory loads. Larger tiles cut global traffic, and TM x TN outputs per
// thread cut shared-memory traffic per multiply-add.
#ifndef BM
#define BM 16
#endif
#ifndef BN
#define BN 16
#endif
#ifndef BK
#define BK 16
#endif
#ifndef TM
#define TM 1
#endif
#ifndef TN
#define TN 1
#endif
#define NT ((BM / TM) * (BN / TN))  // threads per block

extern "C" __global__ void __launch_bounds__(NT) softmax_matmul(const float* __restrict__ S, const float* __restrict__ V,
                                                      float* __restrict__ O, long long B, long long T, long long D) {
  __shared__ float As[BK][BM + 1];
  __shared__ float Bs[BK][BN + 1];
  __shared__ float row_max[BM], row_inv[BM];
  const int tx = threadIdx.x % (BN / TN), ty = threadIdx.x / (BN / TN);
  const long long row0 = (long long)blockIdx.y * BM, col0 = (long long)blockIdx.x * BN;
  const float* s = S + (long long)blockIdx.z * T * T;
  const float* v = V + (long long)blockIdx.z * T * D;
  float* o = O + (long long)blockIdx.z * T * D;
  // Row statistics: warp w takes rows w, w + NT / 32, ...
  const int lane = threadIdx.x % 32;
  for (int r = threadIdx.x / 32; r < BM; r += NT / 32) {
    const long long row = row0 + r;
    float m = -3.402823466e+38f, sum = 0.f;
    if (row < T) {
      for (long long j = lane; j < T; j += 32) m = fmaxf(m, s[row * T + j]);
#pragma unroll
      for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
      for (long long j = lane; j < T; j += 32) sum += expf(s[row * T + j] - m);
#pragma unroll
      for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    }
    if (lane == 0) {
      row_max[r] = m;
      row_inv[r] = row < T ? 1.f / sum : 0.f;
    }
  }
  __syncthreads();
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;
  for (long long k0 = 0; k0 < T; k0 += BK) {
    for (int e = threadIdx.x; e < BM * BK; e += NT) {
      const int r = e / BK, kk = e % BK;
      const long long gr = row0 + r, gk = k0 + kk;
      As[kk][r] = (gr < T && gk < T) ? expf(s[gr * T + gk] - row_max[r]) * row_inv[r] : 0.f;
    }
    for (int e = threadIdx.x; e < BK * BN; e += NT) {
      const int kk = e / BN, c = e % BN;
      const long long gk = k0 + kk, gc = col0 + c;
      Bs[kk][c] = (gk < T && gc < D) ? v[gk * D + gc] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = As[kk][ty + i * (BM / TM)];
#pragma unroll
      for (int j = 0; j < TN; ++j) b[j] = Bs[kk][tx + j * (BN / TN)];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const long long r = row0 + ty + i * (BM / TM), c = col0 + tx + j * (BN / TN);
      if (r < T && c < D) o[r * D + c] = acc[i][j];
    }
}
