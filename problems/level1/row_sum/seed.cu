// Row sums y[i] = sum_j x[i, j] of a row-major M x N fp32 matrix.
// TPR threads share a row and a block of THREADS threads holds THREADS / TPR rows. Each thread walks its
// row in steps of VEC floats (when rows are VEC-aligned), keeping UNROLL loads and partial sums in flight;
// the TPR partial sums are then combined with warp shuffles (and shared memory beyond a warp).
// The seed point (TPR 1, VEC 1, UNROLL 1) is the plain loop: one thread per row.
#ifndef THREADS
#define THREADS 256
#endif
#ifndef TPR
#define TPR 1
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef UNROLL
#define UNROLL 1
#endif

template <int V> struct Vec;
template <> struct Vec<1> { typedef float T; static __device__ float sum(float v) { return v; } };
template <> struct Vec<2> { typedef float2 T; static __device__ float sum(float2 v) { return v.x + v.y; } };
template <> struct Vec<4> { typedef float4 T; static __device__ float sum(float4 v) { return (v.x + v.y) + (v.z + v.w); } };

// This thread's share of one row: elements lane, lane + TPR, ... counted in V-wide vectors.
template <int V>
__device__ float row_part(const float* __restrict__ row, long long N, int lane) {
  typedef typename Vec<V>::T T;
  const T* r = reinterpret_cast<const T*>(row);
  const long long n = N / V;
  float acc[UNROLL];
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) acc[u] = 0.f;
  long long j = lane;
  for (; j + (long long)(UNROLL - 1) * TPR < n; j += (long long)UNROLL * TPR) {
    T v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) v[u] = r[j + (long long)u * TPR];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) acc[u] += Vec<V>::sum(v[u]);
  }
  for (; j < n; j += TPR) acc[0] += Vec<V>::sum(r[j]);
  float s = 0.f;
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) s += acc[u];
  return s;
}

extern "C" __global__ void __launch_bounds__(THREADS) row_sum(const float* __restrict__ x, float* __restrict__ y,
                                                              long long M, long long N) {
  const int lane = threadIdx.x % TPR;
  const int local_row = threadIdx.x / TPR;
  const long long row = (long long)blockIdx.x * (THREADS / TPR) + local_row;
  float s = 0.f;
  if (row < M) {
    const float* r = x + row * N;
    s = (VEC > 1 && N % VEC == 0) ? row_part<VEC>(r, N, lane) : row_part<1>(r, N, lane);
  }
  constexpr int width = TPR < 32 ? TPR : 32;
#pragma unroll
  for (int offset = width / 2; offset > 0; offset /= 2) s += __shfl_down_sync(0xffffffffu, s, offset, width);
  if (TPR > 32) {
    __shared__ float partial[THREADS / 32];
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = s;
    __syncthreads();
    if (lane == 0) {
      s = 0.f;
      for (int w = 0; w < TPR / 32; ++w) s += partial[local_row * (TPR / 32) + w];
    }
  }
  if (lane == 0 && row < M) y[row] = s;
}
