// Gather then max: out[b, d] = max over l < L of W[idx[b, l], d], L >= 1 int32 indices per sample (exact).
// TPS threads share a sample, and a block of THREADS threads holds THREADS / TPS samples. Lane t of a sample
// owns the column pieces t, t + TPS, ... (VEC floats each, VEC-wide loads when D is a multiple of VEC) and,
// for each, walks the sample's L rows UNROLL at a time: UNROLL indices, then UNROLL row pieces loaded before
// any is folded, into UNROLL independent maxima. STAGE = 1 first copies the block's indices (contiguous in
// idx) to shared memory with coalesced loads; STAGE = 0 reads each index from global memory, per lane.
// The seed point (TPS 1, VEC 1, UNROLL 1, STAGE 0) is one thread per sample: the threads of a warp read 32
// different rows at once (no load is coalesced), each index load sits before the row load it feeds, and
// there are only B threads in all.
#ifndef THREADS
#define THREADS 128
#endif
#ifndef TPS
#define TPS 1
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef UNROLL
#define UNROLL 1
#endif
#ifndef STAGE
#define STAGE 0
#endif

#define SPB (THREADS / TPS)  // samples per block

__device__ __forceinline__ float max2(float a, float b) { return b > a ? b : a; }

template <int V> struct Vec;
template <> struct Vec<1> {
  typedef float T;
  static __device__ __forceinline__ T lowest() { return -__int_as_float(0x7f800000); }
  static __device__ __forceinline__ void fold(T& m, T v) { m = max2(m, v); }
};
template <> struct Vec<2> {
  typedef float2 T;
  static __device__ __forceinline__ T lowest() { const float x = -__int_as_float(0x7f800000); return make_float2(x, x); }
  static __device__ __forceinline__ void fold(T& m, T v) { m.x = max2(m.x, v.x); m.y = max2(m.y, v.y); }
};
template <> struct Vec<4> {
  typedef float4 T;
  static __device__ __forceinline__ T lowest() { const float x = -__int_as_float(0x7f800000); return make_float4(x, x, x, x); }
  static __device__ __forceinline__ void fold(T& m, T v) {
    m.x = max2(m.x, v.x); m.y = max2(m.y, v.y); m.z = max2(m.z, v.z); m.w = max2(m.w, v.w);
  }
};

// This lane's columns of sample b, whose L indices are ix[0 .. L-1].
template <int V>
__device__ __forceinline__ void sample(const float* __restrict__ W, const int* ix, float* __restrict__ out, long long D,
                                       long long L, long long b, int lane) {
  typedef typename Vec<V>::T T;
  const long long DV = D / V;
  const T* Wv = reinterpret_cast<const T*>(W);
  for (long long c = lane; c < DV; c += TPS) {
    T m[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) m[u] = Vec<V>::lowest();
    long long l = 0;
    for (; l + UNROLL <= L; l += UNROLL) {
      long long r[UNROLL];
      T v[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) r[u] = ix[l + u];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) v[u] = Wv[r[u] * DV + c];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) Vec<V>::fold(m[u], v[u]);
    }
    for (; l < L; ++l) Vec<V>::fold(m[0], Wv[(long long)ix[l] * DV + c]);
#pragma unroll
    for (int u = 1; u < UNROLL; ++u) Vec<V>::fold(m[0], m[u]);
    reinterpret_cast<T*>(out)[b * DV + c] = m[0];
  }
}

extern "C" __global__ void __launch_bounds__(THREADS) gather_rows_max(const float* __restrict__ W, const int* __restrict__ idx,
                                                                      float* __restrict__ out, long long V, long long D,
                                                                      long long B, long long L) {
  (void)V;
  const long long b0 = (long long)blockIdx.x * SPB;
  const int local = threadIdx.x / TPS, lane = threadIdx.x % TPS;
  const long long b = b0 + local;
#if STAGE
  extern __shared__ int staged[];  // the block's SPB * L indices
  const long long count = ((B - b0 < SPB) ? B - b0 : SPB) * L;
  for (long long e = threadIdx.x; e < count; e += THREADS) staged[e] = idx[b0 * L + e];
  __syncthreads();
  const int* ix = staged + (long long)local * L;
#else
  const int* ix = idx + b * L;
#endif
  if (b >= B) return;
  if (VEC > 1 && D % VEC == 0) sample<VEC>(W, ix, out, D, L, b, lane);
  else sample<1>(W, ix, out, D, L, b, lane);
}
