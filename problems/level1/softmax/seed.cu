// Row softmax over a row-major M x N fp32 matrix: y = exp(x - max) / sum(exp(x - max)), one block of
// THREADS threads per row. Rows are read VEC floats at a time when they are VEC-aligned. With CACHE > 0
// each thread keeps CACHE vectors of its row in registers: when THREADS * VEC * CACHE covers the row it is
// read from memory once; otherwise (and at CACHE 0) it is read three times (max, sum of exps, write).
// The seed point (THREADS 32, VEC 1, CACHE 0) is the plain three-pass version.
#ifndef THREADS
#define THREADS 32
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef CACHE
#define CACHE 0
#endif

#define KE_LOWEST (-3.402823466e+38f)

template <int V> struct Vec;
template <> struct Vec<1> {
  typedef float T;
  static __device__ float max(float v) { return v; }
  static __device__ float exp_sum(float& v, float m) { v = expf(v - m); return v; }
  static __device__ float scale(float v, float s) { return v * s; }
};
template <> struct Vec<2> {
  typedef float2 T;
  static __device__ float max(float2 v) { return fmaxf(v.x, v.y); }
  static __device__ float exp_sum(float2& v, float m) { v.x = expf(v.x - m); v.y = expf(v.y - m); return v.x + v.y; }
  static __device__ float2 scale(float2 v, float s) { return make_float2(v.x * s, v.y * s); }
};
template <> struct Vec<4> {
  typedef float4 T;
  static __device__ float max(float4 v) { return fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)); }
  static __device__ float exp_sum(float4& v, float m) {
    v.x = expf(v.x - m); v.y = expf(v.y - m); v.z = expf(v.z - m); v.w = expf(v.w - m);
    return (v.x + v.y) + (v.z + v.w);
  }
  static __device__ float4 scale(float4 v, float s) { return make_float4(v.x * s, v.y * s, v.z * s, v.w * s); }
};

__device__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
// Block-wide reductions; every thread gets the result. `scratch` holds one value per warp.
__device__ float block_max(float v, float* scratch) {
  v = warp_max(v);
  if (THREADS > 32) {
    __syncthreads();  // the previous reduction's readers are done with scratch
    if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
    __syncthreads();
    v = warp_max(threadIdx.x % 32 < THREADS / 32 ? scratch[threadIdx.x % 32] : KE_LOWEST);
  }
  return v;
}
__device__ float block_sum(float v, float* scratch) {
  v = warp_sum(v);
  if (THREADS > 32) {
    __syncthreads();
    if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
    __syncthreads();
    v = warp_sum(threadIdx.x % 32 < THREADS / 32 ? scratch[threadIdx.x % 32] : 0.f);
  }
  return v;
}

template <int V>
__device__ void softmax_row(const float* __restrict__ in, float* __restrict__ out, long long N, float* scratch) {
  typedef typename Vec<V>::T T;
  const T* src = reinterpret_cast<const T*>(in);
  T* dst = reinterpret_cast<T*>(out);
  const long long n = N / V;
  if (CACHE > 0 && n <= (long long)THREADS * CACHE) {
    T v[CACHE > 0 ? CACHE : 1];
    float m = KE_LOWEST;
#pragma unroll
    for (int c = 0; c < CACHE; ++c) {
      const long long j = threadIdx.x + (long long)c * THREADS;
      if (j < n) {
        v[c] = src[j];
        m = fmaxf(m, Vec<V>::max(v[c]));
      }
    }
    m = block_max(m, scratch);
    float s = 0.f;
#pragma unroll
    for (int c = 0; c < CACHE; ++c) {
      const long long j = threadIdx.x + (long long)c * THREADS;
      if (j < n) s += Vec<V>::exp_sum(v[c], m);
    }
    const float inv = 1.0f / block_sum(s, scratch);
#pragma unroll
    for (int c = 0; c < CACHE; ++c) {
      const long long j = threadIdx.x + (long long)c * THREADS;
      if (j < n) dst[j] = Vec<V>::scale(v[c], inv);
    }
  } else {
    float m = KE_LOWEST;
    for (long long j = threadIdx.x; j < n; j += THREADS) m = fmaxf(m, Vec<V>::max(src[j]));
    m = block_max(m, scratch);
    float s = 0.f;
    for (long long j = threadIdx.x; j < n; j += THREADS) {
      T v = src[j];
      s += Vec<V>::exp_sum(v, m);
    }
    const float inv = 1.0f / block_sum(s, scratch);
    for (long long j = threadIdx.x; j < n; j += THREADS) {
      T v = src[j];
      Vec<V>::exp_sum(v, m);
      dst[j] = Vec<V>::scale(v, inv);
    }
  }
}

extern "C" __global__ void __launch_bounds__(THREADS) softmax(const float* __restrict__ x, float* __restrict__ y,
                                                              long long M, long long N) {
  __shared__ float scratch[32];
  const long long row = blockIdx.x;
  if (row >= M) return;  // the whole block leaves together
  const float* in = x + row * N;
  float* out = y + row * N;
  if (VEC > 1 && N % VEC == 0) softmax_row<VEC>(in, out, N, scratch);
  else softmax_row<1>(in, out, N, scratch);
}
