// Mean over the first axis of a row-major M x N matrix: y[j] = (1/M) sum_i x[i,j].
// A block is TX x RY threads: threadIdx.x runs along the columns j (a warp's loads are consecutive), and
// RY threads split the rows of each column (rows i = y, y + RY, ...), each with U independent partial
// sums, combined through shared memory. The seed point (TX 32, RY 1, U 1) gives each column one thread
// that walks all M rows alone: one dependent chain of additions, and only N threads in the grid.
#ifndef TX
#define TX 32
#endif
#ifndef RY
#define RY 1
#endif
#ifndef U
#define U 1
#endif

extern "C" __global__ void __launch_bounds__(TX * RY) col_mean(const float* __restrict__ x, float* __restrict__ y,
                                                               long long M, long long N) {
  __shared__ float part[RY][TX];
  const long long j = (long long)blockIdx.x * TX + threadIdx.x;
  float s[U];
#pragma unroll
  for (int u = 0; u < U; ++u) s[u] = 0.f;
  if (j < N) {
    const float* col = x + j;
    long long i = threadIdx.y;
    for (; i + (long long)(U - 1) * RY < M; i += (long long)U * RY) {
#pragma unroll
      for (int u = 0; u < U; ++u) s[u] += col[(i + (long long)u * RY) * N];
    }
    for (; i < M; i += RY) s[0] += col[i * N];
  }
#pragma unroll
  for (int u = 1; u < U; ++u) s[0] += s[u];
  part[threadIdx.y][threadIdx.x] = s[0];
  __syncthreads();
  if (threadIdx.y == 0 && j < N) {
    float v = part[0][threadIdx.x];
    for (int t = 1; t < RY; ++t) v += part[t][threadIdx.x];
    y[j] = v / (float)M;
  }
}
