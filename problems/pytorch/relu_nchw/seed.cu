// ReLU of an NCHW fp32 tensor: out = max(x, 0) (torch.relu; exact, a NaN stays NaN). One element per thread,
// THREADS threads per block, over the batch_size * channels * height * width elements.
// ORDER: how a thread's index t maps to an element. 0 numbers the elements channels-last (channel fastest,
//        then pixel, then image), as a kernel written for NHWC would: the threads of a warp touch 32
//        elements height * width floats apart, so no load or store is coalesced, and three 64-bit divisions
//        per element. 1 numbers them in memory order: each warp reads and writes 128 contiguous bytes.
// The seed point (ORDER 0, THREADS 32) also runs tiny blocks, which caps the threads resident per SM.
#ifndef THREADS
#define THREADS 32
#endif
#ifndef ORDER
#define ORDER 0
#endif

extern "C" __global__ void __launch_bounds__(THREADS) relu_nchw(const float* __restrict__ x, float* __restrict__ out,
                                                               long long batch_size, long long channels,
                                                               long long height, long long width) {
  const long long plane = height * width, n = batch_size * channels * plane;
  const long long t = (long long)blockIdx.x * THREADS + threadIdx.x;
  if (t >= n) return;
#if ORDER
  const long long i = t;
#else
  const long long c = t % channels, rest = t / channels;
  const long long p = rest % plane, b = rest / plane;
  const long long i = (b * channels + c) * plane + p;
#endif
  const float v = x[i];
  out[i] = v < 0.f ? 0.f : v;
}
