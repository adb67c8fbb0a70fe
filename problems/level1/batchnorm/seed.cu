// Batch normalization for inference over an NCHW fp32 tensor:
// y = (x - mean[c]) / sqrt(|var[c]| + eps) * gamma[c] + beta[c].
// PLANE = 0: one thread per element over the flat tensor; each finds its channel with a 64-bit division
//            and a remainder, and pays for a square root and a division.
// PLANE = 1: blockIdx.y is one (n, c) plane: the block computes scale = gamma / sqrt(|var| + eps) and
//            shift = beta - mean * scale once, and its threads sweep the contiguous H x W plane with one
//            multiply-add per element, VEC floats per access (when H * W is a multiple of VEC), ITEMS
//            vectors per thread.
// The seed point is PLANE 0 with 256 threads.
#ifndef THREADS
#define THREADS 256
#endif
#ifndef PLANE
#define PLANE 0
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef ITEMS
#define ITEMS 1
#endif

template <int V> struct Vec;
template <> struct Vec<1> {
  typedef float T;
  static __device__ __forceinline__ float fma_(float v, float s, float t) { return v * s + t; }
};
template <> struct Vec<2> {
  typedef float2 T;
  static __device__ __forceinline__ float2 fma_(float2 v, float s, float t) { return make_float2(v.x * s + t, v.y * s + t); }
};
template <> struct Vec<4> {
  typedef float4 T;
  static __device__ __forceinline__ float4 fma_(float4 v, float s, float t) {
    return make_float4(v.x * s + t, v.y * s + t, v.z * s + t, v.w * s + t);
  }
};

template <int V>
__device__ __forceinline__ void plane_sweep(const float* __restrict__ in, float* __restrict__ out, long long count,
                                            float scale, float shift, long long chunk) {
  typedef typename Vec<V>::T T;
  const T* src = reinterpret_cast<const T*>(in);
  T* dst = reinterpret_cast<T*>(out);
  const long long nv = count / V;
  const long long base = chunk * THREADS * ITEMS;  // in vectors
  T v[ITEMS];
#pragma unroll
  for (int it = 0; it < ITEMS; ++it) {
    const long long i = base + (long long)it * THREADS + threadIdx.x;
    if (i < nv) v[it] = src[i];
  }
#pragma unroll
  for (int it = 0; it < ITEMS; ++it) {
    const long long i = base + (long long)it * THREADS + threadIdx.x;
    if (i < nv) dst[i] = Vec<V>::fma_(v[it], scale, shift);
  }
}

extern "C" __global__ void __launch_bounds__(THREADS) batchnorm(const float* __restrict__ x, const float* __restrict__ mean,
                                                                const float* __restrict__ var,
                                                                const float* __restrict__ gamma,
                                                                const float* __restrict__ beta, float* __restrict__ y,
                                                                long long N, long long C, long long H, long long W,
                                                                float eps) {
  const long long plane = H * W;
#if PLANE
  const long long p = blockIdx.y;  // (n, c) plane
  const long long c = p % C;
  const float scale = gamma[c] / sqrtf(fabsf(var[c]) + eps);
  const float shift = beta[c] - mean[c] * scale;
  const float* in = x + p * plane;
  float* out = y + p * plane;
  if (VEC > 1 && plane % VEC == 0) {
    plane_sweep<VEC>(in, out, plane, scale, shift, blockIdx.x);
  } else {  // scalar accesses: the block's share of the plane is VEC chunks of THREADS * ITEMS floats
#pragma unroll
    for (int s = 0; s < VEC; ++s) plane_sweep<1>(in, out, plane, scale, shift, (long long)blockIdx.x * VEC + s);
  }
#else
  const long long i = (long long)blockIdx.x * THREADS + threadIdx.x;
  if (i < N * C * plane) {
    const long long c = (i / plane) % C;
    y[i] = (x[i] - mean[c]) / sqrtf(fabsf(var[c]) + eps) * gamma[c] + beta[c];
  }
#endif
}
