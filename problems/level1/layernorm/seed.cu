// Layer normalization of each row of a row-major M x N fp32 matrix, one block of THREADS threads per row:
// y = (x - mean) * rsqrt(var + eps) * gamma + beta. Rows are read VEC floats at a time when VEC-aligned.
// With CACHE > 0 each thread keeps CACHE vectors of its row in registers: when THREADS * VEC * CACHE covers
// the row it is read from memory once; otherwise (and at CACHE 0) three times (mean, variance, write).
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

template <int V> struct Vec;
template <> struct Vec<1> {
  typedef float T;
  static __device__ float sum(float v) { return v; }
  static __device__ float sq_dev(float v, float m) { return (v - m) * (v - m); }
  static __device__ float norm(float v, float m, float r, float g, float b) { return (v - m) * r * g + b; }
  static __device__ float apply(float v, float m, float r, float g, float b) { return norm(v, m, r, g, b); }
};
template <> struct Vec<2> {
  typedef float2 T;
  static __device__ float sum(float2 v) { return v.x + v.y; }
  static __device__ float sq_dev(float2 v, float m) { return (v.x - m) * (v.x - m) + (v.y - m) * (v.y - m); }
  static __device__ float2 apply(float2 v, float m, float r, float2 g, float2 b) {
    return make_float2((v.x - m) * r * g.x + b.x, (v.y - m) * r * g.y + b.y);
  }
};
template <> struct Vec<4> {
  typedef float4 T;
  static __device__ float sum(float4 v) { return (v.x + v.y) + (v.z + v.w); }
  static __device__ float sq_dev(float4 v, float m) {
    return ((v.x - m) * (v.x - m) + (v.y - m) * (v.y - m)) + ((v.z - m) * (v.z - m) + (v.w - m) * (v.w - m));
  }
  static __device__ float4 apply(float4 v, float m, float r, float4 g, float4 b) {
    return make_float4((v.x - m) * r * g.x + b.x, (v.y - m) * r * g.y + b.y, (v.z - m) * r * g.z + b.z,
                       (v.w - m) * r * g.w + b.w);
  }
};

__device__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
// Block-wide sum; every thread gets the result. `scratch` holds one value per warp.
__device__ float block_sum(float v, float* scratch) {
  v = warp_sum(v);
  if (THREADS > 32) {
    __syncthreads();  // the previous reduction's readers are done with scratch
    if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
    __syncthreads();
    v = warp_sum(threadIdx.x % 32 < THREADS / 32 ? scratch[threadIdx.x % 32] : 0.f);
  }
  return v;
}

template <int V>
__device__ void layernorm_row(const float* __restrict__ in, const float* __restrict__ gamma,
                              const float* __restrict__ beta, float* __restrict__ out, long long N, float eps,
                              float* scratch) {
  typedef typename Vec<V>::T T;
  const T* src = reinterpret_cast<const T*>(in);
  const T* g = reinterpret_cast<const T*>(gamma);
  const T* b = reinterpret_cast<const T*>(beta);
  T* dst = reinterpret_cast<T*>(out);
  const long long n = N / V;
  const float inv_n = 1.0f / (float)N;
  if (CACHE > 0 && n <= (long long)THREADS * CACHE) {
    T v[CACHE > 0 ? CACHE : 1];
    float s = 0.f;
#pragma unroll
    for (int c = 0; c < CACHE; ++c) {
      const long long j = threadIdx.x + (long long)c * THREADS;
      if (j < n) {
        v[c] = src[j];
        s += Vec<V>::sum(v[c]);
      }
    }
    const float mean = block_sum(s, scratch) * inv_n;
    float q = 0.f;
#pragma unroll
    for (int c = 0; c < CACHE; ++c) {
      const long long j = threadIdx.x + (long long)c * THREADS;
      if (j < n) q += Vec<V>::sq_dev(v[c], mean);
    }
    const float rstd = rsqrtf(block_sum(q, scratch) * inv_n + eps);
#pragma unroll
    for (int c = 0; c < CACHE; ++c) {
      const long long j = threadIdx.x + (long long)c * THREADS;
      if (j < n) dst[j] = Vec<V>::apply(v[c], mean, rstd, g[j], b[j]);
    }
  } else {
    float s = 0.f;
    for (long long j = threadIdx.x; j < n; j += THREADS) s += Vec<V>::sum(src[j]);
    const float mean = block_sum(s, scratch) * inv_n;
    float q = 0.f;
    for (long long j = threadIdx.x; j < n; j += THREADS) q += Vec<V>::sq_dev(src[j], mean);
    const float rstd = rsqrtf(block_sum(q, scratch) * inv_n + eps);
    for (long long j = threadIdx.x; j < n; j += THREADS) dst[j] = Vec<V>::apply(src[j], mean, rstd, g[j], b[j]);
  }
}

extern "C" __global__ void __launch_bounds__(THREADS) layernorm(const float* __restrict__ x,
                                                                const float* __restrict__ gamma,
                                                                const float* __restrict__ beta, float* __restrict__ y,
                                                                long long M, long long N, float eps) {
  __shared__ float scratch[32];
  const long long row = blockIdx.x;
  if (row >= M) return;  // the whole block leaves together
  if (VEC > 1 && N % VEC == 0) layernorm_row<VEC>(x + row * N, gamma, beta, y + row * N, N, eps, scratch);
  else layernorm_row<1>(x + row * N, gamma, beta, y + row * N, N, eps, scratch);
}
