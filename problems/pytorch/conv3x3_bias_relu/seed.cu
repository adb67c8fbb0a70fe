// A 3x3 convolution (stride 1, padding 1) with its bias, a second per-channel bias, then ReLU, NCHW fp32:
// out[n, co, h, w] = relu(conv_bias[co] + bias[co] + sum over ci, kh, kw of
//                         conv_weight[co, ci, kh, kw] * x[n, ci, h + kh - 1, w + kw - 1]) (zero outside x).
// Direct convolution: each thread computes one output pixel (blockIdx.x, threadIdx.x over height * width)
// for COT output channels (blockIdx.y), of one image (blockIdx.z), reading x and the weights from global
// memory (the weights are the same across the block: broadcasts).
// The seed point (COT 1, THREADS 32) reloads every input value for each of the out_channels filters, and
// runs tiny blocks; COT channels per thread reuse each loaded input value COT times.
#ifndef THREADS
#define THREADS 32
#endif
#ifndef COT
#define COT 1
#endif

extern "C" __global__ void __launch_bounds__(THREADS) conv3x3_bias_relu(const float* __restrict__ x,
                                                                       const float* __restrict__ bias,
                                                                       const float* __restrict__ conv_weight,
                                                                       const float* __restrict__ conv_bias,
                                                                       float* __restrict__ out, long long batch_size,
                                                                       long long in_channels, long long height,
                                                                       long long width, long long out_channels) {
  const long long plane = height * width;
  const long long p = (long long)blockIdx.x * THREADS + threadIdx.x;
  const long long co0 = (long long)blockIdx.y * COT;
  const long long n = blockIdx.z;
  if (p >= plane || n >= batch_size) return;
  const long long oh = p / width, ow = p - oh * width;
  float acc[COT];
#pragma unroll
  for (int c = 0; c < COT; ++c) acc[c] = 0.f;
  const float* xn = x + n * in_channels * plane;
  for (long long ci = 0; ci < in_channels; ++ci)
    for (int kh = 0; kh < 3; ++kh) {
      const long long ih = oh + kh - 1;
      if (ih < 0 || ih >= height) continue;
      for (int kw = 0; kw < 3; ++kw) {
        const long long iw = ow + kw - 1;
        if (iw < 0 || iw >= width) continue;
        const float xv = xn[(ci * height + ih) * width + iw];
#pragma unroll
        for (int c = 0; c < COT; ++c)
          if (co0 + c < out_channels) acc[c] += conv_weight[(((co0 + c) * in_channels + ci) * 3 + kh) * 3 + kw] * xv;
      }
    }
#pragma unroll
  for (int c = 0; c < COT; ++c)
    if (co0 + c < out_channels) {
      const long long co = co0 + c;
      out[(n * out_channels + co) * plane + p] = fmaxf(acc[c] + conv_bias[co] + bias[co], 0.f);
    }
}
