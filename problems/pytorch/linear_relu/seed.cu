// A linear layer and ReLU: out[i, j] = relu(sum over k of x[i, k] * fc_weight[j, k] + fc_bias[j]), x of
// batch_size x in_features, fc_weight of out_features x in_features as nn.Linear stores it, row-major fp32.
// Each thread computes IB outputs of one column j, for rows i0 .. i0 + IB - 1: a block is THREADS
// consecutive columns (blockIdx.x) of IB rows (blockIdx.y), each dot product straight from global memory.
// Both operands run along k, so the threads of a warp (consecutive j) read 32 different weight rows at once:
// no load of the weight is coalesced, and it is read again for every IB rows of x. IB rows per thread
// reuse each loaded weight value IB times (IB accumulators in registers).
#ifndef THREADS
#define THREADS 64
#endif
#ifndef IB
#define IB 1
#endif

extern "C" __global__ void __launch_bounds__(THREADS) linear_relu(const float* __restrict__ x,
                                                                 const float* __restrict__ fc_weight,
                                                                 const float* __restrict__ fc_bias,
                                                                 float* __restrict__ out, long long batch_size,
                                                                 long long in_features, long long out_features) {
  const long long K = in_features, N = out_features;
  const long long j = (long long)blockIdx.x * THREADS + threadIdx.x;
  const long long i0 = (long long)blockIdx.y * IB;
  if (j >= N) return;
  const float* w = fc_weight + j * K;
  float acc[IB];
#pragma unroll
  for (int r = 0; r < IB; ++r) acc[r] = 0.f;
  for (long long k = 0; k < K; ++k) {
    const float wv = w[k];
#pragma unroll
    for (int r = 0; r < IB; ++r)
      if (i0 + r < batch_size) acc[r] += x[(i0 + r) * K + k] * wv;
  }
  const float bj = fc_bias[j];
#pragma unroll
  for (int r = 0; r < IB; ++r)
    if (i0 + r < batch_size) out[(i0 + r) * N + j] = fmaxf(acc[r] + bj, 0.f);
}
