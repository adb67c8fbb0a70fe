// Embedding bags averaged: out[b, :] = mean over positions j of bag b of W[idx[j], :], bag b = offsets[b] ..
// offsets[b + 1] - 1 (the last bag runs to NNZ; an empty bag gives zeros). int32 indices and offsets.
// TPB threads share a bag, and a block of THREADS threads holds THREADS / TPB bags. Lane l of a bag owns
// the column pieces l, l + TPB, ... (VEC floats each, VEC-wide loads when D is a multiple of VEC) and, for
// each, walks the bag UNROLL positions at a time: UNROLL indices, then UNROLL row pieces loaded before any
// is used, into UNROLL independent partial sums; the sum is scaled once by 1 / length.
// The seed point (TPB 1, VEC 1, UNROLL 1) is one thread per bag, walking every column of every gathered
// row itself: the threads of a warp read 32 different rows at once (no load is coalesced), one 4-byte
// gather in flight per thread, and only B threads in all.
#ifndef THREADS
#define THREADS 128
#endif
#ifndef TPB
#define TPB 1
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef UNROLL
#define UNROLL 1
#endif

template <int V> struct Vec;
template <> struct Vec<1> {
  typedef float T;
  static __device__ __forceinline__ T zero() { return 0.f; }
  static __device__ __forceinline__ void add(T& acc, T v) { acc += v; }
  static __device__ __forceinline__ T scale(T v, float s) { return v * s; }
};
template <> struct Vec<2> {
  typedef float2 T;
  static __device__ __forceinline__ T zero() { return make_float2(0.f, 0.f); }
  static __device__ __forceinline__ void add(T& acc, T v) { acc.x += v.x; acc.y += v.y; }
  static __device__ __forceinline__ T scale(T v, float s) { return make_float2(v.x * s, v.y * s); }
};
template <> struct Vec<4> {
  typedef float4 T;
  static __device__ __forceinline__ T zero() { return make_float4(0.f, 0.f, 0.f, 0.f); }
  static __device__ __forceinline__ void add(T& acc, T v) { acc.x += v.x; acc.y += v.y; acc.z += v.z; acc.w += v.w; }
  static __device__ __forceinline__ T scale(T v, float s) { return make_float4(v.x * s, v.y * s, v.z * s, v.w * s); }
};

// This lane's columns of bag b, positions [start, end).
template <int V>
__device__ __forceinline__ void bag(const float* __restrict__ W, const int* __restrict__ idx, float* __restrict__ out,
                                    long long D, long long b, long long start, long long end, int lane) {
  typedef typename Vec<V>::T T;
  const long long DV = D / V;
  const T* Wv = reinterpret_cast<const T*>(W);
  const float s = end > start ? 1.f / (float)(end - start) : 0.f;
  for (long long c = lane; c < DV; c += TPB) {
    T acc[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) acc[u] = Vec<V>::zero();
    long long j = start;
    for (; j + UNROLL <= end; j += UNROLL) {
      long long r[UNROLL];
      T v[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) r[u] = idx[j + u];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) v[u] = Wv[r[u] * DV + c];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) Vec<V>::add(acc[u], v[u]);
    }
    for (; j < end; ++j) Vec<V>::add(acc[0], Wv[(long long)idx[j] * DV + c]);
#pragma unroll
    for (int u = 1; u < UNROLL; ++u) Vec<V>::add(acc[0], acc[u]);
    reinterpret_cast<T*>(out)[b * DV + c] = Vec<V>::scale(acc[0], s);
  }
}

extern "C" __global__ void __launch_bounds__(THREADS) embedding_bag_mean(const float* __restrict__ W,
                                                                         const int* __restrict__ idx,
                                                                         const int* __restrict__ offsets,
                                                                         float* __restrict__ out, long long V,
                                                                         long long D, long long B, long long NNZ) {
  (void)V;
  const int lane = threadIdx.x % TPB;
  const long long b = (long long)blockIdx.x * (THREADS / TPB) + threadIdx.x / TPB;
  if (b >= B) return;
  const long long start = offsets[b], end = b + 1 < B ? (long long)offsets[b + 1] : NNZ;
  if (VEC > 1 && D % VEC == 0) bag<VEC>(W, idx, out, D, b, start, end, lane);
  else bag<1>(W, idx, out, D, b, start, end, lane);
}
