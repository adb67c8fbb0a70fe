// Index of the maximum over the middle axis: idx[b,c] = the first r with the largest x[b,r,c].
// The reduction runs over the middle axis r of a row-major B x R x C tensor, one output per column c.
// A block is TX x RY threads: threadIdx.x runs along c (so a warp's loads are consecutive), and RY threads
// split the r axis of each column (rows r = y, y + RY, ...), each with U independent partial results,
// which are then combined through shared memory. The seed point (TX 32, RY 1, U 1) gives each output
// one thread that walks its column alone: one dependent chain, few threads in flight.
// Partial results are (value, index) pairs; combining them keeps the larger value and, on a tie, the
// smaller index, so the first index wins as in a sequential scan.
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

__device__ __forceinline__ void better(float& m, long long& at, float v, long long r) {
  if (v > m || (v == m && r < at)) {
    m = v;
    at = r;
  }
}

extern "C" __global__ void __launch_bounds__(TX * RY) argmax(const float* __restrict__ x, long long* __restrict__ idx,
                                                             long long B, long long R, long long C) {
  __shared__ float part_v[RY][TX];
  __shared__ long long part_i[RY][TX];
  const long long b = blockIdx.y;
  const long long c = (long long)blockIdx.x * TX + threadIdx.x;
  float m[U];
  long long at[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    m[u] = KE_LOWEST;
    at[u] = R;  // past every real index, so any value beats it on a tie
  }
  if (c < C) {
    const float* col = x + b * R * C + c;
    long long r = threadIdx.y;
    for (; r + (long long)(U - 1) * RY < R; r += (long long)U * RY) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const long long rr = r + (long long)u * RY;
        const float v = col[rr * C];
        if (v > m[u]) {  // rows of one accumulator only increase: strict > keeps the first
          m[u] = v;
          at[u] = rr;
        }
      }
    }
    for (; r < R; r += RY) better(m[0], at[0], col[r * C], r);
  }
#pragma unroll
  for (int u = 1; u < U; ++u) better(m[0], at[0], m[u], at[u]);
  part_v[threadIdx.y][threadIdx.x] = m[0];
  part_i[threadIdx.y][threadIdx.x] = at[0];
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    float v = part_v[0][threadIdx.x];
    long long a = part_i[0][threadIdx.x];
    for (int t = 1; t < RY; ++t) better(v, a, part_v[t][threadIdx.x], part_i[t][threadIdx.x]);
    idx[b * C + c] = a;
  }
}
