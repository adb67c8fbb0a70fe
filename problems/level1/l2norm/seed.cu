// L2 normalization of each row of a row-major M x N fp32 matrix, one block of THREADS threads per row:
// y = x / max(||x||_2, 1e-12). Two passes over the row (sum of squares, write), VEC floats per load
// when rows are VEC-aligned. The seed point (THREADS 32, VEC 1) is one warp per row.
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

template <int V>
__device__ void row(const float* __restrict__ in, float* __restrict__ out, long long N, float* scratch) {
  typedef typename Vec<V>::T T;
  const T* src = reinterpret_cast<const T*>(in);
  T* dst = reinterpret_cast<T*>(out);
  const long long n = N / V;
  float s = 0.f;
  for (long long j = threadIdx.x; j < n; j += THREADS) {
    const T v = src[j];
#pragma unroll
    for (int e = 0; e < V; ++e) s += Vec<V>::get(v, e) * Vec<V>::get(v, e);
  }
  const float inv = 1.f / fmaxf(sqrtf(block_sum(s, scratch)), 1e-12f);
  for (long long j = threadIdx.x; j < n; j += THREADS) {
    T v = src[j];
#pragma unroll
    for (int e = 0; e < V; ++e) Vec<V>::set(v, e, Vec<V>::get(v, e) * inv);
    dst[j] = v;
  }
}

extern "C" __global__ void __launch_bounds__(THREADS) l2norm(const float* __restrict__ x, float* __restrict__ y,
                                                             long long M, long long N) {
  __shared__ float scratch[32];
  const long long r = blockIdx.x;
  if (r >= M) return;  // the whole block leaves together
  if (VEC > 1 && N % VEC == 0) row<VEC>(x + r * N, y + r * N, N, scratch);
  else row<1>(x + r * N, y + r * N, N, scratch);
}
