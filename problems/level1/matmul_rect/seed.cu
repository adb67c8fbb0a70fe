// C = A x B^T, fp32: A is M x K, B is N x K (a linear layer's weight), C is M x N, all row-major.
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

extern "C" __global__ void __launch_bounds__(NT) matmul_rect(const float* __restrict__ A, const float* __restrict__ B,
                                                   float* __restrict__ C, long long M, long long N, long long K) {
  __shared__ float As[BK][BM + 1];
  __shared__ float Bs[BK][BN + 1];
  const int tx = threadIdx.x % (BN / TN), ty = threadIdx.x / (BN / TN);
  const long long row0 = (long long)blockIdx.y * BM, col0 = (long long)blockIdx.x * BN;
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;
  for (long long k0 = 0; k0 < K; k0 += BK) {
    for (int e = threadIdx.x; e < BM * BK; e += NT) {
      const int r = e / BK, kk = e % BK;
      const long long gr = row0 + r, gk = k0 + kk;
      As[kk][r] = (gr < M && gk < K) ? A[gr * K + gk] : 0.f;
    }
    for (int e = threadIdx.x; e < BN * BK; e += NT) {
      const int r = e / BK, kk = e % BK;
      const long long gr = col0 + r, gk = k0 + kk;
      Bs[kk][r] = (gr < N && gk < K) ? B[gr * K + gk] : 0.f;
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
      if (r < M && c < N) C[r * N + c] = acc[i][j];
    }
}
