// C = A x B, row-major fp32 (A: M x K, B: K x N, C: M x N).
// A block of WM x WN threads computes a BM x BN = (WM * TM) x (WN * TN) tile of C, each thread a TM x TN
// sub-tile kept in registers. K is walked in slices of BK staged in shared memory, two stages deep: while one
// slice is multiplied, the next is fetched from global memory into registers. A is stored transposed
// (k-major) in shared memory so that a thread's TM values of A, like its TN values of B, are contiguous.
// A thread's rows (columns) come in groups of 4 spread a quarter tile apart, so a warp's 16-byte shared
// loads do not conflict. Global loads are 16 bytes wide where rows are 16-byte aligned (K, N multiples
// of 4); edge tiles are zero-padded. The seed point (16 x 16 threads, 1 x 1 output each, BK 16) is the
// textbook shared-memory tiled kernel.
#ifndef TM
#define TM 1
#endif
#ifndef TN
#define TN 1
#endif
#ifndef WM
#define WM 16
#endif
#ifndef WN
#define WN 16
#endif
#ifndef BK
#define BK 16
#endif
#ifndef MINB
#define MINB 1
#endif

#define BM (WM * TM)                // the block's tile of C: WM x WN threads, TM x TN outputs each
#define BN (WN * TN)
#define NT (WM * WN)                // threads per block
#define AS (BM + 4)                 // padded row of the transposed A tile
#define A_CHUNKS (BM * BK / 4)      // float4 pieces of an A slice
#define B_CHUNKS (BK * BN / 4)
#define A_PER ((A_CHUNKS + NT - 1) / NT)
#define B_PER ((B_CHUNKS + NT - 1) / NT)

// Row of this thread's i-th output within the tile (tr: the thread's row index), and column likewise.
__device__ __forceinline__ int tile_row(int tr, int i) {
  return TM % 4 == 0 ? (i / 4) * (BM / (TM / 4 > 0 ? TM / 4 : 1)) + tr * 4 + i % 4 : i * (BM / TM) + tr;
}
__device__ __forceinline__ int tile_col(int tc, int j) {
  return TN % 4 == 0 ? (j / 4) * (BN / (TN / 4 > 0 ? TN / 4 : 1)) + tc * 4 + j % 4 : j * (BN / TN) + tc;
}

extern "C" __global__ void __launch_bounds__(NT, MINB) matmul(const float* __restrict__ A, const float* __restrict__ B,
                                                              float* __restrict__ C, long long M, long long N,
                                                              long long K) {
  extern __shared__ float4 shared4[];
  float* As = reinterpret_cast<float*>(shared4);  // [2][BK][AS]
  float* Bs = As + 2 * BK * AS;                   // [2][BK][BN]
  const int tid = threadIdx.x;
  const int tc = tid % (BN / TN), tr = tid / (BN / TN);
  const long long row0 = (long long)blockIdx.y * BM, col0 = (long long)blockIdx.x * BN;
  const bool vec_ok = (K % 4 == 0) && (N % 4 == 0);

  float4 a_reg[A_PER], b_reg[B_PER];
  auto fetch = [&](long long k0) {
#pragma unroll
    for (int p = 0; p < A_PER; ++p) {
      const int c = tid + p * NT;
      if (c < A_CHUNKS) {
        const long long gr = row0 + c / (BK / 4), gk = k0 + (c % (BK / 4)) * 4;
        if (vec_ok && gr < M && gk < K) {
          a_reg[p] = *reinterpret_cast<const float4*>(A + gr * K + gk);
        } else {
          a_reg[p].x = (gr < M && gk + 0 < K) ? A[gr * K + gk + 0] : 0.f;
          a_reg[p].y = (gr < M && gk + 1 < K) ? A[gr * K + gk + 1] : 0.f;
          a_reg[p].z = (gr < M && gk + 2 < K) ? A[gr * K + gk + 2] : 0.f;
          a_reg[p].w = (gr < M && gk + 3 < K) ? A[gr * K + gk + 3] : 0.f;
        }
      }
    }
#pragma unroll
    for (int p = 0; p < B_PER; ++p) {
      const int c = tid + p * NT;
      if (c < B_CHUNKS) {
        const long long gk = k0 + c / (BN / 4), gc = col0 + (c % (BN / 4)) * 4;
        if (vec_ok && gk < K && gc < N) {
          b_reg[p] = *reinterpret_cast<const float4*>(B + gk * N + gc);
        } else {
          b_reg[p].x = (gk < K && gc + 0 < N) ? B[gk * N + gc + 0] : 0.f;
          b_reg[p].y = (gk < K && gc + 1 < N) ? B[gk * N + gc + 1] : 0.f;
          b_reg[p].z = (gk < K && gc + 2 < N) ? B[gk * N + gc + 2] : 0.f;
          b_reg[p].w = (gk < K && gc + 3 < N) ? B[gk * N + gc + 3] : 0.f;
        }
      }
    }
  };
  auto stash = [&](int stage) {
    float* as = As + stage * BK * AS;
    float* bs = Bs + stage * BK * BN;
#pragma unroll
    for (int p = 0; p < A_PER; ++p) {
      const int c = tid + p * NT;
      if (c < A_CHUNKS) {
        const int m = c / (BK / 4), k = (c % (BK / 4)) * 4;
        as[(k + 0) * AS + m] = a_reg[p].x;
        as[(k + 1) * AS + m] = a_reg[p].y;
        as[(k + 2) * AS + m] = a_reg[p].z;
        as[(k + 3) * AS + m] = a_reg[p].w;
      }
    }
#pragma unroll
    for (int p = 0; p < B_PER; ++p) {
      const int c = tid + p * NT;
      if (c < B_CHUNKS) *reinterpret_cast<float4*>(bs + (c / (BN / 4)) * BN + (c % (BN / 4)) * 4) = b_reg[p];
    }
  };

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

  const int slices = (int)((K + BK - 1) / BK);
  fetch(0);
  stash(0);
  __syncthreads();
  for (int t = 0; t < slices; ++t) {
    const int cur = t & 1;
    if (t + 1 < slices) fetch((long long)(t + 1) * BK);  // in flight while this slice is multiplied
    const float* as = As + cur * BK * AS;
    const float* bs = Bs + cur * BK * BN;
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float a[TM], b[TN];
      if (TM % 4 == 0) {
#pragma unroll
        for (int g = 0; g < TM / 4; ++g) {
          const float4 v = *reinterpret_cast<const float4*>(as + k * AS + tile_row(tr, 4 * g));
          a[4 * g + 0] = v.x; a[4 * g + 1] = v.y; a[4 * g + 2] = v.z; a[4 * g + 3] = v.w;
        }
      } else {
#pragma unroll
        for (int i = 0; i < TM; ++i) a[i] = as[k * AS + tile_row(tr, i)];
      }
      if (TN % 4 == 0) {
#pragma unroll
        for (int g = 0; g < TN / 4; ++g) {
          const float4 v = *reinterpret_cast<const float4*>(bs + k * BN + tile_col(tc, 4 * g));
          b[4 * g + 0] = v.x; b[4 * g + 1] = v.y; b[4 * g + 2] = v.z; b[4 * g + 3] = v.w;
        }
      } else {
#pragma unroll
        for (int j = 0; j < TN; ++j) b[j] = bs[k * BN + tile_col(tc, j)];
      }
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    if (t + 1 < slices) stash(cur ^ 1);
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const long long r = row0 + tile_row(tr, i);
    if (r >= M) continue;
    if (TN % 4 == 0 && vec_ok) {
#pragma unroll
      for (int g = 0; g < TN / 4; ++g) {
        const long long c = col0 + tile_col(tc, 4 * g);
        if (c < N)
          *reinterpret_cast<float4*>(C + r * N + c) =
              make_float4(acc[i][4 * g + 0], acc[i][4 * g + 1], acc[i][4 * g + 2], acc[i][4 * g + 3]);
      }
    } else {
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        const long long c = col0 + tile_col(tc, j);
        if (c < N) C[r * N + c] = acc[i][j];
      }
    }
  }
}
