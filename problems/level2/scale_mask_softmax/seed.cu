// Causal attention probabilities, one block of THREADS threads per row of each T x T score matrix (B of
// them, row-major fp32): y = softmax(x * scale + mask), the mask -inf for column j > row i, so those
// outputs are exactly 0. The seed reads all T columns in each of its three passes (max, sum, write),
// masking as it goes; SKIP = 1 reads only the i + 1 live columns and writes zeros past them. VEC floats
// per access when T is a multiple of VEC. The seed point (THREADS 32, VEC 1, SKIP 0) is one warp per row.
#ifndef THREADS
#define THREADS 32
#endif
#ifndef VEC
#define VEC 1
#endif

#define KE_LOWEST (-3.402823466e+38f)

template <int V> struct Vec;
template <> struct Vec<1> {
  typedef float T;
  static __device__ __forceinline__ float get(const float& v, int) { return v; }
  static __device__ __forceinline__ void set(float& v, int, float x) { v = x; }
};
template <> struct Vec<2> {
  typedef float2 T;
  static __device__ __forceinline__ float get(const float2& v, int e) { return e == 0 ? v.x : v.y; }
  static __device__ __forceinline__ void set(float2& v, int e, float x) { if (e == 0) v.x = x; else v.y = x; }
};
template <> struct Vec<4> {
  typedef float4 T;
  static __device__ __forceinline__ float get(const float4& v, int e) { return e == 0 ? v.x : e == 1 ? v.y : e == 2 ? v.z : v.w; }
  static __device__ __forceinline__ void set(float4& v, int e, float x) {
    if (e == 0) v.x = x; else if (e == 1) v.y = x; else if (e == 2) v.z = x; else v.w = x;
  }
};

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// Block-wide reductions; every thread gets the result. `scratch` holds one value per warp.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  v = warp_sum(v);
  if (THREADS > 32) {
    __syncthreads();  // the previous reduction's readers are done with scratch
    if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
    __syncthreads();
    v = warp_sum(threadIdx.x % 32 < THREADS / 32 ? scratch[threadIdx.x % 32] : 0.f);
  }
  return v;
}
__device__ __forceinline__ float block_max(float v, float* scratch) {
  v = warp_max(v);
  if (THREADS > 32) {
    __syncthreads();
    if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
    __syncthreads();
    v = warp_max(threadIdx.x % 32 < THREADS / 32 ? scratch[threadIdx.x % 32] : KE_LOWEST);
  }
  return v;
}

#ifndef SKIP
#define SKIP 0
#endif

template <int V>
__device__ void row(const float* __restrict__ in, float* __restrict__ out, long long T, long long i, float scale,
                    float* scratch) {
  typedef typename Vec<V>::T Tv;
  const Tv* src = reinterpret_cast<const Tv*>(in);
  Tv* dst = reinterpret_cast<Tv*>(out);
  const long long n = T / V;                                  // vectors in the row
  const long long live = SKIP ? (i + 1 + V - 1) / V : n;      // vectors that hold a live column
  float m = KE_LOWEST;
  for (long long j = threadIdx.x; j < live; j += THREADS) {
    const Tv v = src[j];
#pragma unroll
    for (int e = 0; e < V; ++e)
      if (j * V + e <= i) m = fmaxf(m, Vec<V>::get(v, e) * scale);
  }
  m = block_max(m, scratch);
  float s = 0.f;
  for (long long j = threadIdx.x; j < live; j += THREADS) {
    const Tv v = src[j];
#pragma unroll
    for (int e = 0; e < V; ++e)
      if (j * V + e <= i) s += expf(Vec<V>::get(v, e) * scale - m);
  }
  const float inv = 1.f / block_sum(s, scratch);
  for (long long j = threadIdx.x; j < n; j += THREADS) {
    Tv v;
    if (j < live) v = src[j];
#pragma unroll
    for (int e = 0; e < V; ++e)
      Vec<V>::set(v, e, j * V + e <= i ? expf(Vec<V>::get(v, e) * scale - m) * inv : 0.f);
    dst[j] = v;
  }
}

extern "C" __global__ void __launch_bounds__(THREADS) scale_mask_softmax(const float* __restrict__ x, float* __restrict__ y,
                                                                         long long B, long long T, float scale) {
  __shared__ float scratch[32];
  const long long r = blockIdx.x;  // row of the B * T rows
  if (r >= B * T) return;          // the whole block leaves together
  const long long i = r % T;       // its position in its matrix: columns 0..i are live
  if (VEC > 1 && T % VEC == 0) row<VEC>(x + r * T, y + r * T, T, i, scale, scratch);
  else row<1>(x + r * T, y + r * T, T, i, scale, scratch);
}
