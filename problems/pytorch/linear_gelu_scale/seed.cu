// A linear layer, exact GELU and a scale: out[i, j] = gelu(sum over k of x[i, k] * fc_weight[j, k] + fc_bias[j])
// * scale, gelu(v) = 0.5 v (1 + erf(v / sqrt(2))); x of batch_size x in_features, fc_weight of out_features x
// in_features as nn.Linear stores it, row-major fp32.
// TPO threads share an output (consecutive lanes of a warp; TPO a power of two, at most 32): lane l adds
// the products k = l, l + TPO, ... and the TPO partial sums are combined with warp shuffles. A block holds
// THREADS / TPO outputs, numbered row-major over out.
// The seed point (TPO 1) is one thread per output: the threads of a warp (consecutive j) read 32 different
// weight rows at once, so no weight load is coalesced. TPO = 32 makes each warp read 128 contiguous bytes
// of one weight row and of x's row per step.
#ifndef THREADS
#define THREADS 64
#endif
#ifndef TPO
#define TPO 1
#endif

extern "C" __global__ void __launch_bounds__(THREADS) linear_gelu_scale(const float* __restrict__ x, float scale,
                                                                       const float* __restrict__ fc_weight,
                                                                       const float* __restrict__ fc_bias,
                                                                       float* __restrict__ out, long long batch_size,
                                                                       long long in_features, long long out_features) {
  const long long K = in_features, N = out_features;
  const int lane = threadIdx.x % TPO;
  const long long o = (long long)blockIdx.x * (THREADS / TPO) + threadIdx.x / TPO;
  const bool live = o < batch_size * N;  // threads past the end still take part in the shuffles
  float acc = 0.f;
  if (live) {
    const long long i = o / N, j = o - i * N;
    const float* xi = x + i * K;
    const float* w = fc_weight + j * K;
    for (long long k = lane; k < K; k += TPO) acc += xi[k] * w[k];
  }
#pragma unroll
  for (int offset = TPO / 2; offset > 0; offset /= 2) acc += __shfl_down_sync(0xffffffffu, acc, offset, TPO);
  if (live && lane == 0) {
    const float v = acc + fc_bias[o % N];
    out[o] = 0.5f * v * (1.f + erff(v * 0.70710678f)) * scale;
  }
}
