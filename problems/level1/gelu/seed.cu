// Element-wise exact GELU, y = 0.5 x (1 + erf(x / sqrt 2)), over a flat array of M * N floats. A block
// handles THREADS * ITEMS vectors of VEC floats; each thread loads all of its ITEMS vectors before
// computing any (independent loads in flight).
// BLOCKED = 1: a thread's ITEMS vectors are consecutive, so at each step the 32 threads of a warp touch
//              addresses ITEMS * VEC * 4 bytes apart: the accesses are not coalesced.
// BLOCKED = 0: vector i of the block goes to thread i % THREADS: a warp reads 32 consecutive vectors.
// VEC = 2 or 4: 8- or 16-byte accesses when the array length is a multiple of VEC (else scalar).
// The seed point (BLOCKED 1, ITEMS 8, VEC 1, THREADS 256) is the CPU habit of giving each thread a chunk.
#ifndef THREADS
#define THREADS 256
#endif
#ifndef ITEMS
#define ITEMS 8
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef BLOCKED
#define BLOCKED 1
#endif

// Exact GELU (erf form), full-precision erff.
__device__ __forceinline__ float op(float v) { return 0.5f * v * (1.f + erff(v * 0.70710678118654752f)); }

template <int V> struct Vec;
template <> struct Vec<1> {
  typedef float T;
  static __device__ __forceinline__ float apply(float v) { return op(v); }
};
template <> struct Vec<2> {
  typedef float2 T;
  static __device__ __forceinline__ float2 apply(float2 v) { return make_float2(op(v.x), op(v.y)); }
};
template <> struct Vec<4> {
  typedef float4 T;
  static __device__ __forceinline__ float4 apply(float4 v) { return make_float4(op(v.x), op(v.y), op(v.z), op(v.w)); }
};

template <int V>
__device__ __forceinline__ void run(const float* __restrict__ x, float* __restrict__ y, long long n, long long chunk) {
  typedef typename Vec<V>::T T;
  const T* src = reinterpret_cast<const T*>(x);
  T* dst = reinterpret_cast<T*>(y);
  const long long nv = n / V;  // whole vectors
  const long long base = chunk * THREADS * ITEMS;  // in vectors
  T v[ITEMS];
#pragma unroll
  for (int it = 0; it < ITEMS; ++it) {
    const long long i = base + (BLOCKED ? (long long)threadIdx.x * ITEMS + it : (long long)it * THREADS + threadIdx.x);
    if (i < nv) v[it] = src[i];
  }
#pragma unroll
  for (int it = 0; it < ITEMS; ++it) {
    const long long i = base + (BLOCKED ? (long long)threadIdx.x * ITEMS + it : (long long)it * THREADS + threadIdx.x);
    if (i < nv) dst[i] = Vec<V>::apply(v[it]);
  }
}

extern "C" __global__ void __launch_bounds__(THREADS) gelu(const float* __restrict__ x, float* __restrict__ y,
                                                             long long M, long long N) {
  const long long n = M * N;
  if (VEC > 1 && n % VEC == 0) {
    run<VEC>(x, y, n, blockIdx.x);
  } else {  // scalar accesses: the block's share of the array is VEC chunks of THREADS * ITEMS floats
#pragma unroll
    for (int s = 0; s < VEC; ++s) run<1>(x, y, n, (long long)blockIdx.x * VEC + s);
  }
}
