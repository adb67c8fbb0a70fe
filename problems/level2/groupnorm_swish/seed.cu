// Group normalization followed by Swish over an NCHW fp32 tensor, one block of THREADS threads per (sample,
// group): the group's C / G channels x H x W elements are one contiguous block; v = (x - mean) / sqrt(var +
// eps) * gamma[c] + beta[c] with the biased variance, then y = v / (1 + exp(-v)). Three passes over the
// group (mean, variance, write), VEC floats per access when H * W is a multiple of VEC. The seed point is
// one warp per group (THREADS 32, VEC 1).
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
__device__ void group(const float* __restrict__ in, const float* __restrict__ gamma, const float* __restrict__ beta,
                      float* __restrict__ out, long long cpg, long long plane, long long c0, float eps, float* scratch) {
  typedef typename Vec<V>::T T;
  const T* src = reinterpret_cast<const T*>(in);
  T* dst = reinterpret_cast<T*>(out);
  const long long count = cpg * plane, n = count / V, pv = plane / V;
  float s = 0.f;
  for (long long j = threadIdx.x; j < n; j += THREADS) {
    const T v = src[j];
#pragma unroll
    for (int e = 0; e < V; ++e) s += Vec<V>::get(v, e);
  }
  const float mean = block_sum(s, scratch) / (float)count;
  float q = 0.f;
  for (long long j = threadIdx.x; j < n; j += THREADS) {
    const T v = src[j];
#pragma unroll
    for (int e = 0; e < V; ++e) q += (Vec<V>::get(v, e) - mean) * (Vec<V>::get(v, e) - mean);
  }
  const float rstd = rsqrtf(block_sum(q, scratch) / (float)count + eps);
  for (long long j = threadIdx.x; j < n; j += THREADS) {
    const long long c = c0 + j / pv;  // a vector never straddles two channels (plane % V == 0)
    const float scale = rstd * gamma[c], shift = beta[c] - mean * scale;
    T v = src[j];
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const float t = Vec<V>::get(v, e) * scale + shift;
      Vec<V>::set(v, e, t / (1.f + expf(-t)));
    }
    dst[j] = v;
  }
}

extern "C" __global__ void __launch_bounds__(THREADS) groupnorm_swish(const float* __restrict__ x,
                                                                      const float* __restrict__ gamma,
                                                                      const float* __restrict__ beta,
                                                                      float* __restrict__ y, long long N, long long C,
                                                                      long long H, long long W, long long G, float eps) {
  __shared__ float scratch[32];
  const long long g = blockIdx.x % G, n = blockIdx.x / G;
  if (n >= N) return;  // the whole block leaves together
  const long long cpg = C / G, plane = H * W;
  const long long offset = (n * C + g * cpg) * plane;
  if (VEC > 1 && plane % VEC == 0) group<VEC>(x + offset, gamma, beta, y + offset, cpg, plane, g * cpg, eps, scratch);
  else group<1>(x + offset, gamma, beta, y + offset, cpg, plane, g * cpg, eps, scratch);
}
