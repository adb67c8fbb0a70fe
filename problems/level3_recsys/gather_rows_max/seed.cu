// Gather then max: out[b, d] = max over l < L of W[idx[b, l], d], L >= 1 int32 indices per sample (exact).
// One warp per sample (a grid-stride loop over samples, THREADS / 32 per block). Lane t owns the columns
// t, t + 32, ... counted in VEC-wide pieces (VEC-wide loads when D is a multiple of VEC). The sample's rows
// are walked 32 indices at a time: with SHFL = 1 each lane loads one index and warp shuffles hand them out;
// with SHFL = 0 every lane loads each index itself, just before the row it names. UNROLL rows are loaded
// before any is folded, into UNROLL independent maxima.
// The seed point (VEC 1, UNROLL 1, SHFL 0) has two dependent loads per row and one gather in flight per lane.
#ifndef THREADS
#define THREADS 128
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef UNROLL
#define UNROLL 1
#endif
#ifndef SHFL
#define SHFL 0
#endif

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

// One sample, by one whole warp (the loops' trip counts are the same for every lane).
template <int V>
__device__ __forceinline__ void sample(const float* __restrict__ W, const int* __restrict__ idx, float* __restrict__ out,
                                       long long D, long long L, long long b, int lane) {
  typedef typename Vec<V>::T T;
  const long long DV = D / V;
  const T* Wv = reinterpret_cast<const T*>(W);
  const int* ix = idx + b * L;
  for (long long c0 = 0; c0 < DV; c0 += 32) {
    const long long c = c0 + lane;
    const bool live = c < DV;
    T m[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) m[u] = Vec<V>::lowest();
    for (long long l0 = 0; l0 < L; l0 += 32) {
      const int n = L - l0 < 32 ? (int)(L - l0) : 32;
#if SHFL
      const int mine = lane < n ? ix[l0 + lane] : 0;
#endif
      int t = 0;
      for (; t + UNROLL <= n; t += UNROLL) {
        long long r[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)
#if SHFL
          r[u] = __shfl_sync(0xffffffffu, mine, t + u);
#else
          r[u] = ix[l0 + t + u];
#endif
        if (live) {
          T v[UNROLL];
#pragma unroll
          for (int u = 0; u < UNROLL; ++u) v[u] = Wv[r[u] * DV + c];
#pragma unroll
          for (int u = 0; u < UNROLL; ++u) Vec<V>::fold(m[u], v[u]);
        }
      }
      for (; t < n; ++t) {
#if SHFL
        const long long r = __shfl_sync(0xffffffffu, mine, t);
#else
        const long long r = ix[l0 + t];
#endif
        if (live) Vec<V>::fold(m[0], Wv[r * DV + c]);
      }
    }
#pragma unroll
    for (int u = 1; u < UNROLL; ++u) Vec<V>::fold(m[0], m[u]);
    if (live) reinterpret_cast<T*>(out)[b * DV + c] = m[0];
  }
}

extern "C" __global__ void __launch_bounds__(THREADS) gather_rows_max(const float* __restrict__ W, const int* __restrict__ idx,
                                                                      float* __restrict__ out, long long V, long long D,
                                                                      long long B, long long L) {
  (void)V;
  const int lane = threadIdx.x % 32;
  const bool vec = VEC > 1 && D % VEC == 0;
  for (long long b = (long long)blockIdx.x * (THREADS / 32) + threadIdx.x / 32; b < B; b += (long long)gridDim.x * (THREADS / 32)) {
    if (vec) sample<VEC>(W, idx, out, D, L, b, lane);
    else sample<1>(W, idx, out, D, L, b, lane);
  }
}
