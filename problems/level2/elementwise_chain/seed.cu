// y = gelu(x * scale + bias[column]) over a row-major M x N fp32 matrix, gelu(v) = 0.5 v (1 + erf(v / sqrt 2)).
// A block is TX x (THREADS / TX) threads: threadIdx.x runs along the columns (VEC consecutive floats each,
// when rows are VEC-aligned), threadIdx.y along the rows, each thread handling ROWS rows spaced a block
// height apart, all loads issued before any result is computed.
// The seed point (TX 1, VEC 1, ROWS 1) gives each block a single column: a warp's 32 threads read 32 rows.
#ifndef THREADS
#define THREADS 256
#endif
#ifndef TX
#define TX 1
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef ROWS
#define ROWS 1
#endif
#define TY (THREADS / TX)

__device__ __forceinline__ float gelu(float v) { return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)); }

extern "C" __global__ void __launch_bounds__(THREADS) scale_bias_gelu(const float* __restrict__ x,
                                                                      const float* __restrict__ bias,
                                                                      float* __restrict__ y, long long M, long long N,
                                                                      float scale) {
  const long long col = ((long long)blockIdx.x * TX + threadIdx.x) * VEC;
  const long long row0 = (long long)blockIdx.y * TY * ROWS + threadIdx.y;
  if (col >= N) return;
  if (VEC == 4 && N % 4 == 0) {
    const float4 b = *reinterpret_cast<const float4*>(bias + col);
    float4 v[ROWS];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      const long long row = row0 + (long long)r * TY;
      if (row < M) v[r] = *reinterpret_cast<const float4*>(x + row * N + col);
    }
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      const long long row = row0 + (long long)r * TY;
      if (row < M) {
        const float4 o = make_float4(gelu(v[r].x * scale + b.x), gelu(v[r].y * scale + b.y),
                                     gelu(v[r].z * scale + b.z), gelu(v[r].w * scale + b.w));
        *reinterpret_cast<float4*>(y + row * N + col) = o;
      }
    }
  } else if (VEC == 2 && N % 2 == 0) {
    const float2 b = *reinterpret_cast<const float2*>(bias + col);
    float2 v[ROWS];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      const long long row = row0 + (long long)r * TY;
      if (row < M) v[r] = *reinterpret_cast<const float2*>(x + row * N + col);
    }
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      const long long row = row0 + (long long)r * TY;
      if (row < M)
        *reinterpret_cast<float2*>(y + row * N + col) =
            make_float2(gelu(v[r].x * scale + b.x), gelu(v[r].y * scale + b.y));
    }
  } else {
    // Scalar: rows not VEC-aligned (or VEC 1); the last vector of a row may be partial.
    float v[ROWS][VEC];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      const long long row = row0 + (long long)r * TY;
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        if (row < M && col + e < N) v[r][e] = x[row * N + col + e];
    }
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      const long long row = row0 + (long long)r * TY;
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        if (row < M && col + e < N) y[row * N + col + e] = gelu(v[r][e] * scale + bias[col + e]);
    }
  }
}
