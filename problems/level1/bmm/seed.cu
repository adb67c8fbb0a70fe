// Batched fp32 product C[b] = A[b] x B[b]: A is BATCH x M x K, B is BATCH x K x N, C is BATCH x M x N,
// all row-major; blockIdx.z is the batch.
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

extern "C" __global__ void __launch_bounds__(NT) bmm(const float* __restrict__ A, const float* __restrict__ B,
                                           float* __restrict__ C, long long BATCH, long long M, long long N,
                                           long long K) {
  __shared__ float As[BK][BM + 1];
  __shared__ float Bs[BK][BN + 1];
  const int tx = threadIdx.x % (BN / TN), ty = threadIdx.x / (BN / TN);
  const long long row0 = (long long)blockIdx.y * BM, col0 = (long long)blockIdx.x * BN;
  const float* a = A + (long long)blockIdx.z * M * K;
  const float* b = B + (long long)blockIdx.z * K * N;
  float* c_out = C + (long long)blockIdx.z * M * N;
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;
  for (long long k0 = 0; k0 < K; k0 += BK) {
    for (int e = threadIdx.x; e < BM * BK; e += NT) {
      const int r = e / BK, kk = e % BK;
      const long long gr = row0 + r, gk = k0 + kk;
      As[kk][r] = (gr < M && gk < K) ? a[gr * K + gk] : 0.f;
    }
    for (int e = threadIdx.x; e < BK * BN; e += NT) {
      const int kk = e / BN, c = e % BN;
      const long long gk = k0 + kk, gc = col0 + c;
      Bs[kk][c] = (gk < K && gc < N) ? b[gk * N + gc] : 0.f;
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
      if (r < M && c < N) c_out[r * N + c] = acc[i][j];
    }
}
