// Maximum over the middle axis: y[b,c] = max_r x[b,r,c].
// The reduction runs over the middle axis r of a row-major B x R x C tensor, one output per column c.
// A block is TX x RY threads: threadIdx.x runs along c (so a warp's loads are consecutive), and RY threads
// split the r axis of each column (rows r = y, y + RY, ...), each with U independent partial results,
// which are then combined through shared memory. The seed point (TX 32, RY 1, U 1) gives each output
// one thread that walks its column alone: one dependent chain, few threads in flight.
#ifndef TX
#define TX 32
#endif
#ifndef RY
#define RY 1
#endif
#ifndef U
#define U 1
#endif

#define KE_LOWEST (-3.402823466e+38f)

extern "C" __global__ void __launch_bounds__(TX * RY) reduce_max(const float* __restrict__ x, float* __restrict__ y,
                                                                 long long B, long long R, long long C) {
  __shared__ float part[RY][TX];
  const long long b = blockIdx.y;
  const long long c = (long long)blockIdx.x * TX + threadIdx.x;
  float m[U];
#pragma unroll
  for (int u = 0; u < U; ++u) m[u] = KE_LOWEST;
  if (c < C) {
    const float* col = x + b * R * C + c;
    long long r = threadIdx.y;
    for (; r + (long long)(U - 1) * RY < R; r += (long long)U * RY) {
#pragma unroll
      for (int u = 0; u < U; ++u) m[u] = fmaxf(m[u], col[(r + (long long)u * RY) * C]);
    }
    for (; r < R; r += RY) m[0] = fmaxf(m[0], col[r * C]);
  }
#pragma unroll
  for (int u = 1; u < U; ++u) m[0] = fmaxf(m[0], m[u]);
  part[threadIdx.y][threadIdx.x] = m[0];
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    float v = part[0][threadIdx.x];
    for (int t = 1; t < RY; ++t) v = fmaxf(v, part[t][threadIdx.x]);
    y[b * C + c] = v;
  }
}
