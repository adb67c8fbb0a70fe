// Matrix-vector product y = A x, A row-major M x K fp32. TPR threads share a row (THREADS / TPR rows per
// block): lane l of a row reads VEC floats at k = (l + TPR * t) * VEC, with U independent partial sums, and
// the lanes' sums are combined with warp shuffles (and shared memory when TPR > 32). Loads are VEC wide
// when K is a multiple of VEC.
// The seed point (TPR 1, VEC 1, U 1) is one thread per row: adjacent threads read addresses K floats
// apart, so no load is coalesced, and each thread's sum is one dependent chain.
#ifndef THREADS
#define THREADS 128
#endif
#ifndef TPR
#define TPR 1
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef U
#define U 1
#endif

template <int V> struct Vec;
template <> struct Vec<1> {
  typedef float T;
  static __device__ __forceinline__ float dot(float a, float b) { return a * b; }
};
template <> struct Vec<2> {
  typedef float2 T;
  static __device__ __forceinline__ float dot(float2 a, float2 b) { return a.x * b.x + a.y * b.y; }
};
template <> struct Vec<4> {
  typedef float4 T;
  static __device__ __forceinline__ float dot(float4 a, float4 b) { return (a.x * b.x + a.y * b.y) + (a.z * b.z + a.w * b.w); }
};

template <int V>
__device__ __forceinline__ float row_part(const float* __restrict__ row, const float* __restrict__ x, long long K, int lane) {
  typedef typename Vec<V>::T T;
  const T* a = reinterpret_cast<const T*>(row);
  const T* b = reinterpret_cast<const T*>(x);
  const long long n = K / V;
  float acc[U];
#pragma unroll
  for (int u = 0; u < U; ++u) acc[u] = 0.f;
  long long j = lane;
  for (; j + (long long)(U - 1) * TPR < n; j += (long long)U * TPR) {
#pragma unroll
    for (int u = 0; u < U; ++u) acc[u] += Vec<V>::dot(a[j + (long long)u * TPR], __ldg(&b[j + (long long)u * TPR]));
  }
  for (; j < n; j += TPR) acc[0] += Vec<V>::dot(a[j], __ldg(&b[j]));
  float s = 0.f;
#pragma unroll
  for (int u = 0; u < U; ++u) s += acc[u];
  return s;
}

extern "C" __global__ void __launch_bounds__(THREADS) matvec(const float* __restrict__ A, const float* __restrict__ x,
                                                             float* __restrict__ y, long long M, long long K) {
  const int lane = threadIdx.x % TPR;
  const int local_row = threadIdx.x / TPR;
  const long long row = (long long)blockIdx.x * (THREADS / TPR) + local_row;
  float s = 0.f;
  if (row < M) s = (VEC > 1 && K % VEC == 0) ? row_part<VEC>(A + row * K, x, K, lane) : row_part<1>(A + row * K, x, K, lane);
  constexpr int width = TPR < 32 ? TPR : 32;
#pragma unroll
  for (int offset = width / 2; offset > 0; offset /= 2) s += __shfl_down_sync(0xffffffffu, s, offset, width);
  if (TPR > 32) {
    __shared__ float partial[THREADS / 32];
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = s;
    __syncthreads();
    if (lane == 0) {
      s = 0.f;
      for (int w = 0; w < TPR / 32; ++w) s += partial[local_row * (TPR / 32) + w];
    }
  }
  if (lane == 0 && row < M) y[row] = s;
}
