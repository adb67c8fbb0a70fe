// Out-of-place transpose y[j,i] = x[i,j] of a row-major M x N fp32 matrix, in 32 x 32 tiles; a block is
// 32 x BR threads, each thread moving 32 / BR elements of the tile.
// SHARED = 0: each thread copies straight from x to y: the reads along a row of x are coalesced, the
//             writes go down a column of y (M floats apart), one cache line per element.
// SHARED = 1: the tile goes through shared memory (padded to 33 columns against bank conflicts), so both
//             the reads of x and the writes of y run along rows.
// The seed point (SHARED 0, BR 32) is the direct copy, one element per thread.
#ifndef SHARED
#define SHARED 0
#endif
#ifndef BR
#define BR 32
#endif
#define TILE 32

extern "C" __global__ void __launch_bounds__(TILE * BR) transpose(const float* __restrict__ x, float* __restrict__ y,
                                                                  long long M, long long N) {
  const long long i0 = (long long)blockIdx.y * TILE, j0 = (long long)blockIdx.x * TILE;
#if SHARED
  __shared__ float tile[TILE][TILE + 1];
#pragma unroll
  for (int k = 0; k < TILE; k += BR) {
    const long long i = i0 + threadIdx.y + k, j = j0 + threadIdx.x;
    if (i < M && j < N) tile[threadIdx.y + k][threadIdx.x] = x[i * N + j];
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < TILE; k += BR) {
    const long long j = j0 + threadIdx.y + k, i = i0 + threadIdx.x;
    if (i < M && j < N) y[j * M + i] = tile[threadIdx.x][threadIdx.y + k];
  }
#else
#pragma unroll
  for (int k = 0; k < TILE; k += BR) {
    const long long i = i0 + threadIdx.y + k, j = j0 + threadIdx.x;
    if (i < M && j < N) y[j * M + i] = x[i * N + j];
  }
#endif
}
