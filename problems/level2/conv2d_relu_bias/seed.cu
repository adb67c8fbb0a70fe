// Conv2d + ReLU + BiasAdd: y[n,co,oh,ow] = relu(sum over ci, kh, kw of x[n,ci,oh+kh,ow+kw] w[co,ci,kh,kw])
// + bias[co]; 3 x 3 kernel, stride 1, no padding, NCHW fp32; OH = H - 2, OW = W - 2. The epilogue is applied
// to the finished outputs in registers.
// A block is TX x TY threads over (ow, oh); blockIdx.z picks the sample and a group of COT output
// channels. Each thread accumulates COT channels x OWT outputs along ow (TX apart, so a warp's loads stay
// consecutive) in registers: every input value it loads feeds COT multiply-adds, every weight (the same
// for the whole block, so it is a broadcast) feeds OWT.
// The seed point (TX 32, TY 4, COT 1, OWT 1) is the direct convolution, one output per thread.
#ifndef TX
#define TX 32
#endif
#ifndef TY
#define TY 4
#endif
#ifndef COT
#define COT 1
#endif
#ifndef OWT
#define OWT 1
#endif

extern "C" __global__ void __launch_bounds__(TX * TY) conv2d_relu_bias(const float* __restrict__ x, const float* __restrict__ w,
                                                            const float* __restrict__ bias, float* __restrict__ y, long long N, long long CI,
                                                            long long CO, long long H, long long W, long long OH,
                                                            long long OW) {
  const long long groups = (CO + COT - 1) / COT;
  const long long n = blockIdx.z / groups;
  const long long co0 = (blockIdx.z % groups) * COT;
  const long long oh = (long long)blockIdx.y * TY + threadIdx.y;
  const long long ow0 = (long long)blockIdx.x * TX * OWT + threadIdx.x;
  if (oh >= OH) return;
  float acc[COT][OWT];
#pragma unroll
  for (int c = 0; c < COT; ++c)
#pragma unroll
    for (int k = 0; k < OWT; ++k) acc[c][k] = 0.f;
  for (long long ci = 0; ci < CI; ++ci) {
    const float* plane = x + ((n * CI + ci) * H + oh) * W;
#pragma unroll
    for (int kh = 0; kh < 3; ++kh)
#pragma unroll
      for (int kw = 0; kw < 3; ++kw) {
        float v[OWT];
#pragma unroll
        for (int k = 0; k < OWT; ++k) {
          const long long ow = ow0 + (long long)k * TX;
          v[k] = ow < OW ? plane[kh * W + ow + kw] : 0.f;
        }
#pragma unroll
        for (int c = 0; c < COT; ++c) {
          const float wv = co0 + c < CO ? w[(((co0 + c) * CI + ci) * 3 + kh) * 3 + kw] : 0.f;
#pragma unroll
          for (int k = 0; k < OWT; ++k) acc[c][k] += wv * v[k];
        }
      }
  }
#pragma unroll
  for (int c = 0; c < COT; ++c) {
    if (co0 + c >= CO) break;
#pragma unroll
    for (int k = 0; k < OWT; ++k) {
      const long long ow = ow0 + (long long)k * TX;
      if (ow < OW) y[((n * CO + co0 + c) * OH + oh) * OW + ow] = fmaxf(acc[c][k], 0.f) + bias[co0 + c];
    }
  }
}
