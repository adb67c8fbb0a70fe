// Jagged segment sums: out[b, :] = sum of values[j, :] over j in offsets[b] .. offsets[b + 1] - 1 (the last
// segment runs to NNZ; an empty one gives zeros). values is NNZ x D fp32, row-major.
// One block per segment (a grid-stride loop over segments). The block's THREADS threads form RS row slices
// of CT = THREADS / RS column threads: slice r reads rows start + r, start + r + RS, ... Each column thread
// owns cdiv(D / VEC, CT) column pieces of VEC floats (VEC-wide loads when D is a multiple of VEC): with
// BLOCKED = 1 a contiguous run of them (thread t: pieces t * n .. t * n + n - 1), so at each step the threads
// of a warp read addresses n pieces apart (uncoalesced); with BLOCKED = 0 every CT-th piece (t, t + CT, ...),
// so they read consecutive pieces. UNROLL rows are loaded before any is added, into UNROLL partial sums;
// the slices' sums are combined in shared memory.
// The seed point (THREADS 64, RS 1, VEC 1, UNROLL 1, BLOCKED 1) gives each thread a contiguous run of
// columns, walks it with one 4-byte load in flight, and one block walks a whole segment.
#ifndef THREADS
#define THREADS 64
#endif
#ifndef RS
#define RS 1
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef UNROLL
#define UNROLL 1
#endif
#ifndef BLOCKED
#define BLOCKED 1
#endif

#define CT (THREADS / RS)  // column threads per row slice

template <int V> struct Vec;
template <> struct Vec<1> {
  typedef float T;
  static __device__ __forceinline__ T zero() { return 0.f; }
  static __device__ __forceinline__ void add(T& acc, T v) { acc += v; }
};
template <> struct Vec<2> {
  typedef float2 T;
  static __device__ __forceinline__ T zero() { return make_float2(0.f, 0.f); }
  static __device__ __forceinline__ void add(T& acc, T v) { acc.x += v.x; acc.y += v.y; }
};
template <> struct Vec<4> {
  typedef float4 T;
  static __device__ __forceinline__ T zero() { return make_float4(0.f, 0.f, 0.f, 0.f); }
  static __device__ __forceinline__ void add(T& acc, T v) { acc.x += v.x; acc.y += v.y; acc.z += v.z; acc.w += v.w; }
};

// One segment, rows [start, end), into out row b. Every thread of the block calls it (it synchronizes).
template <int V>
__device__ __forceinline__ void segment(const float* __restrict__ values, float* __restrict__ out, long long D,
                                        long long start, long long end, long long b, float* part) {
  typedef typename Vec<V>::T T;
  const int r = threadIdx.x / CT, t = threadIdx.x % CT;
  const long long DV = D / V;
  const T* vals = reinterpret_cast<const T*>(values);
  T* partv = reinterpret_cast<T*>(part);
  const long long per = (DV + CT - 1) / CT;  // pieces per column thread
  for (long long k = 0; k < per; ++k) {       // the same trip count for every thread of the block
    const long long c = BLOCKED ? t * per + k : k * CT + t;
    T acc[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) acc[u] = Vec<V>::zero();
    if (c < DV) {
      long long j = start + r;
      for (; j + (long long)(UNROLL - 1) * RS < end; j += (long long)UNROLL * RS) {
        T v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) v[u] = vals[(j + (long long)u * RS) * DV + c];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) Vec<V>::add(acc[u], v[u]);
      }
      for (; j < end; j += RS) Vec<V>::add(acc[0], vals[j * DV + c]);
#pragma unroll
      for (int u = 1; u < UNROLL; ++u) Vec<V>::add(acc[0], acc[u]);
    }
    if (RS > 1) {
      __syncthreads();  // the previous piece's readers are done with part
      partv[threadIdx.x] = acc[0];
      __syncthreads();
      if (r == 0)
        for (int s = 1; s < RS; ++s) Vec<V>::add(acc[0], partv[s * CT + t]);
    }
    if (r == 0 && c < DV) reinterpret_cast<T*>(out)[b * DV + c] = acc[0];
  }
}

extern "C" __global__ void __launch_bounds__(THREADS) jagged_segment_sum(const float* __restrict__ values,
                                                                         const long long* __restrict__ offsets,
                                                                         float* __restrict__ out, long long NNZ,
                                                                         long long D, long long B) {
  __shared__ __align__(16) float part[RS > 1 ? THREADS * VEC : 1];
  const bool vec = VEC > 1 && D % VEC == 0;
  for (long long b = blockIdx.x; b < B; b += gridDim.x) {
    const long long start = offsets[b], end = b + 1 < B ? offsets[b + 1] : NNZ;
    if (vec) segment<VEC>(values, out, D, start, end, b, part);
    else segment<1>(values, out, D, start, end, b, part);
  }
}
