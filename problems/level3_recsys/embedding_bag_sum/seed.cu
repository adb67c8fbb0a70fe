// Embedding bags with per-sample weights: out[b, :] = sum over positions j of bag b of psw[j] * W[idx[j], :],
// bag b = offsets[b] .. offsets[b + 1] - 1 (the last bag runs to NNZ; an empty bag gives zeros).
// TPB threads share a bag, and a block of THREADS threads holds THREADS / TPB bags. Lane l of a bag owns
// the column pieces l, l + TPB, ... (VEC floats each, VEC-wide loads when D is a multiple of VEC) and, for
// each, walks the bag UNROLL positions at a time: UNROLL indices and weights, then UNROLL row pieces loaded
// before any is used, into UNROLL independent partial sums.
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
  static __device__ __forceinline__ void fma(T& acc, float s, T v) { acc += s * v; }
  static __device__ __forceinline__ void add(T& acc, T v) { acc += v; }
};
template <> struct Vec<2> {
  typedef float2 T;
  static __device__ __forceinline__ T zero() { return make_float2(0.f, 0.f); }
  static __device__ __forceinline__ void fma(T& acc, float s, T v) { acc.x += s * v.x; acc.y += s * v.y; }
  static __device__ __forceinline__ void add(T& acc, T v) { acc.x += v.x; acc.y += v.y; }
};
template <> struct Vec<4> {
  typedef float4 T;
  static __device__ __forceinline__ T zero() { return make_float4(0.f, 0.f, 0.f, 0.f); }
  static __device__ __forceinline__ void fma(T& acc, float s, T v) {
    acc.x += s * v.x; acc.y += s * v.y; acc.z += s * v.z; acc.w += s * v.w;
  }
  static __device__ __forceinline__ void add(T& acc, T v) { acc.x += v.x; acc.y += v.y; acc.z += v.z; acc.w += v.w; }
};

// This lane's columns of bag b, positions [start, end).
template <int V>
__device__ __forceinline__ void bag(const float* __restrict__ W, const long long* __restrict__ idx,
                                    const float* __restrict__ psw, float* __restrict__ out, long long D, long long b,
                                    long long start, long long end, int lane) {
  typedef typename Vec<V>::T T;
  const long long DV = D / V;
  const T* Wv = reinterpret_cast<const T*>(W);
  for (long long c = lane; c < DV; c += TPB) {
    T acc[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) acc[u] = Vec<V>::zero();
    long long j = start;
    for (; j + UNROLL <= end; j += UNROLL) {
      long long r[UNROLL];
      float s[UNROLL];
      T v[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) r[u] = idx[j + u], s[u] = psw[j + u];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) v[u] = Wv[r[u] * DV + c];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) Vec<V>::fma(acc[u], s[u], v[u]);
    }
    for (; j < end; ++j) Vec<V>::fma(acc[0], psw[j], Wv[idx[j] * DV + c]);
#pragma unroll
    for (int u = 1; u < UNROLL; ++u) Vec<V>::add(acc[0], acc[u]);
    reinterpret_cast<T*>(out)[b * DV + c] = acc[0];
  }
}

extern "C" __global__ void __launch_bounds__(THREADS) embedding_bag_sum(const float* __restrict__ W,
                                                                        const long long* __restrict__ idx,
                                                                        const long long* __restrict__ offsets,
                                                                        const float* __restrict__ psw,
                                                                        float* __restrict__ out, long long V,
                                                                        long long D, long long B, long long NNZ) {
  (void)V;
  const int lane = threadIdx.x % TPB;
  const long long b = (long long)blockIdx.x * (THREADS / TPB) + threadIdx.x / TPB;
  if (b >= B) return;
  const long long start = offsets[b], end = b + 1 < B ? offsets[b + 1] : NNZ;
  if (VEC > 1 && D % VEC == 0) bag<VEC>(W, idx, psw, out, D, b, start, end, lane);
  else bag<1>(W, idx, psw, out, D, b, start, end, lane);
}
