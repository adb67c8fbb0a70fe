// The residual add and layer normalization of a pre-norm transformer block, one block of THREADS threads
// per row of row-major M x N fp32 matrices: h = x + r (written: the new residual stream), then
// y = (h - mean) / sqrt(var + eps) * gamma + beta with the biased variance around the mean.
// Passes: h is written and summed, then read back for the variance and the normalization; VEC floats per
// access when rows are VEC-aligned. The seed point (THREADS 32, VEC 1) is one warp per row.
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
__device__ void row(const float* __restrict__ x, const float* __restrict__ r, const float* __restrict__ gamma,
                    const float* __restrict__ beta, float* __restrict__ h, float* __restrict__ y, long long N, float eps,
                    float* scratch) {
  typedef typename Vec<V>::T T;
  const T* xs = reinterpret_cast<const T*>(x);
  const T* rs = reinterpret_cast<const T*>(r);
  const T* gs = reinterpret_cast<const T*>(gamma);
  const T* bs = reinterpret_cast<const T*>(beta);
  T* hs = reinterpret_cast<T*>(h);
  T* ys = reinterpret_cast<T*>(y);
  const long long n = N / V;
  float s = 0.f;
  for (long long j = threadIdx.x; j < n; j += THREADS) {
    T a = xs[j];
    const T b = rs[j];
#pragma unroll
    for (int e = 0; e < V; ++e) {
      Vec<V>::set(a, e, Vec<V>::get(a, e) + Vec<V>::get(b, e));
      s += Vec<V>::get(a, e);
    }
    hs[j] = a;
  }
  const float mean = block_sum(s, scratch) / (float)N;  // its barriers also make h visible to the block
  float q = 0.f;
  for (long long j = threadIdx.x; j < n; j += THREADS) {
    const T a = hs[j];
#pragma unroll
    for (int e = 0; e < V; ++e) q += (Vec<V>::get(a, e) - mean) * (Vec<V>::get(a, e) - mean);
  }
  const float rstd = rsqrtf(block_sum(q, scratch) / (float)N + eps);
  for (long long j = threadIdx.x; j < n; j += THREADS) {
    T a = hs[j];
    const T g = gs[j], b = bs[j];
#pragma unroll
    for (int e = 0; e < V; ++e)
      Vec<V>::set(a, e, (Vec<V>::get(a, e) - mean) * rstd * Vec<V>::get(g, e) + Vec<V>::get(b, e));
    ys[j] = a;
  }
}

extern "C" __global__ void __launch_bounds__(THREADS) residual_layernorm(const float* __restrict__ x, const float* __restrict__ r,
                                                                         const float* __restrict__ gamma,
                                                                         const float* __restrict__ beta,
                                                                         float* __restrict__ h, float* __restrict__ y,
                                                                         long long M, long long N, float eps) {
  __shared__ float scratch[32];
  const long long i = blockIdx.x;
  if (i >= M) return;  // the whole block leaves together
  if (VEC > 1 && N % VEC == 0) row<VEC>(x + i * N, r + i * N, gamma, beta, h + i * N, y + i * N, N, eps, scratch);
  else row<1>(x + i * N, r + i * N, gamma, beta, h + i * N, y + i * N, N, eps, scratch);
}
