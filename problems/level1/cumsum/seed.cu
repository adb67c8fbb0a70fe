// Inclusive prefix sum along each row of a row-major M x N fp32 matrix: y[i,j] = sum over k <= j of x[i,k].
// WARP = 0: one thread per row scans it sequentially: adjacent threads read addresses N floats apart (no
//           load is coalesced) and each row is one chain of dependent additions.
// WARP = 1: one warp per row (THREADS / 32 rows per block) walks it in chunks of 32 * ITEMS floats: lane l
//           scans its ITEMS consecutive elements in registers (16-byte loads when ITEMS is a multiple of 4
//           and N of 4), the warp scans the lanes' totals with shuffles, and a running carry links chunks.
// The seed point is WARP 0.
#ifndef THREADS
#define THREADS 128
#endif
#ifndef WARP
#define WARP 0
#endif
#ifndef ITEMS
#define ITEMS 1
#endif

extern "C" __global__ void __launch_bounds__(THREADS) cumsum(const float* __restrict__ x, float* __restrict__ y,
                                                             long long M, long long N) {
#if WARP
  const int lane = threadIdx.x % 32;
  const long long r = (long long)blockIdx.x * (THREADS / 32) + threadIdx.x / 32;
  if (r >= M) return;  // the whole warp leaves together
  const float* in = x + r * N;
  float* out = y + r * N;
  float carry = 0.f;
  for (long long c0 = 0; c0 < N; c0 += 32 * ITEMS) {
    const long long base = c0 + (long long)lane * ITEMS;
    const bool full = c0 + 32 * ITEMS <= N;
    const bool vec = ITEMS % 4 == 0 && N % 4 == 0 && full;
    float v[ITEMS];
    if (vec) {
#pragma unroll
      for (int k = 0; k < ITEMS; k += 4) {
        const float4 q = *reinterpret_cast<const float4*>(in + base + k);
        v[k] = q.x;
        v[k + 1] = q.y;
        v[k + 2] = q.z;
        v[k + 3] = q.w;
      }
    } else {
#pragma unroll
      for (int k = 0; k < ITEMS; ++k) v[k] = base + k < N ? in[base + k] : 0.f;
    }
#pragma unroll
    for (int k = 1; k < ITEMS; ++k) v[k] += v[k - 1];
    const float total = v[ITEMS - 1];
    float incl = total;
#pragma unroll
    for (int o = 1; o < 32; o *= 2) {
      const float up = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += up;
    }
    const float offset = carry + (incl - total);
    if (vec) {
#pragma unroll
      for (int k = 0; k < ITEMS; k += 4)
        *reinterpret_cast<float4*>(out + base + k) =
            make_float4(v[k] + offset, v[k + 1] + offset, v[k + 2] + offset, v[k + 3] + offset);
    } else {
#pragma unroll
      for (int k = 0; k < ITEMS; ++k)
        if (base + k < N) out[base + k] = v[k] + offset;
    }
    carry += __shfl_sync(0xffffffffu, incl, 31);
  }
#else
  const long long r = (long long)blockIdx.x * THREADS + threadIdx.x;
  if (r >= M) return;
  float sum = 0.f;
  for (long long j = 0; j < N; ++j) {
    sum += x[r * N + j];
    y[r * N + j] = sum;
  }
#endif
}
