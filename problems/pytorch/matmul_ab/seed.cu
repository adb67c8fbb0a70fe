// Matrix product out = a @ b, a of M x K, b of K x N, row-major fp32 (torch.matmul).
// The plain kernel: one output per thread, a dot product over K straight from global memory. A block is
// TX x (THREADS / TX) threads over a TX-wide, THREADS / TX-tall tile of out; threadIdx.x runs along a row,
// so a warp's loads of b's row k are contiguous and its loads of a are broadcasts.
// Every element of a is loaded N times and of b M times, from L2 or memory: there is no reuse through
// shared memory or registers, so this is bound by load bandwidth far below the FMA peak. TX sets how the
// warps cover the tile (TX 8: a warp spans 4 rows of 8 columns; TX 32: one row of 32), THREADS the block.
#ifndef THREADS
#define THREADS 64
#endif
#ifndef TX
#define TX 8
#endif

extern "C" __global__ void __launch_bounds__(THREADS) matmul_ab(const float* __restrict__ a, const float* __restrict__ b,
                                                               float* __restrict__ out, long long M, long long K,
                                                               long long N) {
  const long long col = (long long)blockIdx.x * TX + threadIdx.x;
  const long long row = (long long)blockIdx.y * (THREADS / TX) + threadIdx.y;
  if (row >= M || col >= N) return;
  const float* ar = a + row * K;
  float acc = 0.f;
  for (long long k = 0; k < K; ++k) acc += ar[k] * b[k * N + col];
  out[row * N + col] = acc;
}
