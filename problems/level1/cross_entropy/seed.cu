// Per-sample cross-entropy, one block of THREADS threads per row of C logits:
// loss[i] = log(sum_j exp(x[i,j] - max)) + max - x[i,t], t = target[i] modulo C into [0, C).
// Two passes over the row (max, sum of exponentials), VEC floats per load when rows are VEC-aligned.
// The seed point (THREADS 32, VEC 1) is one warp per row.
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
__device__ float row_lse(const float* __restrict__ in, long long N, float* scratch) {
  typedef typename Vec<V>::T T;
  const T* src = reinterpret_cast<const T*>(in);
  const long long n = N / V;
  float m = KE_LOWEST;
  for (long long j = threadIdx.x; j < n; j += THREADS) {
    const T v = src[j];
#pragma unroll
    for (int e = 0; e < V; ++e) m = fmaxf(m, Vec<V>::get(v, e));
  }
  m = block_max(m, scratch);
  float s = 0.f;
  for (long long j = threadIdx.x; j < n; j += THREADS) {
    const T v = src[j];
#pragma unroll
    for (int e = 0; e < V; ++e) s += expf(Vec<V>::get(v, e) - m);
  }
  return m + logf(block_sum(s, scratch));
}

extern "C" __global__ void __launch_bounds__(THREADS) cross_entropy(const float* __restrict__ logits,
                                                                    const long long* __restrict__ target,
                                                                    float* __restrict__ loss, long long M, long long C) {
  __shared__ float scratch[32];
  const long long r = blockIdx.x;
  if (r >= M) return;  // the whole block leaves together
  const float* in = logits + r * C;
  const float lse = (VEC > 1 && C % VEC == 0) ? row_lse<VEC>(in, C, scratch) : row_lse<1>(in, C, scratch);
  if (threadIdx.x == 0) {
    const long long t = ((target[r] % C) + C) % C;
    loss[r] = lse - in[t];
  }
}
