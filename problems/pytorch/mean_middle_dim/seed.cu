// Mean over the middle dimension: out[b, j] = (1 / dim1) * sum over r of x[b, r, j], x of batch_size x dim1 x
// dim2 row-major fp32 (torch.mean(x, dim=1)).
// A block is (THREADS / RY) x RY threads: threadIdx.x picks a column j (consecutive threads, consecutive
// columns: coalesced loads), threadIdx.y one of RY slices of the rows (r = threadIdx.y, + RY, ...); the
// RY partial sums of a column are added in shared memory. blockIdx.y is the image.
// The seed point (THREADS 32, RY 1) gives each output one thread walking all dim1 rows in one dependent
// chain of loads and adds, and only batch_size * dim2 threads in all (16384 at the large shape: a few
// warps per SM). RY threads per column multiply the parallelism and split the chain.
#ifndef THREADS
#define THREADS 32
#endif
#ifndef RY
#define RY 1
#endif

extern "C" __global__ void __launch_bounds__(THREADS) mean_middle_dim(const float* __restrict__ x, float* __restrict__ out,
                                                                     long long batch_size, long long dim1,
                                                                     long long dim2) {
  constexpr int TXN = THREADS / RY;
  __shared__ float part[RY][TXN];
  const long long b = blockIdx.y;
  const long long j = (long long)blockIdx.x * TXN + threadIdx.x;
  float s = 0.f;
  if (j < dim2 && b < batch_size) {
    const float* xb = x + b * dim1 * dim2 + j;
    for (long long r = threadIdx.y; r < dim1; r += RY) s += xb[r * dim2];
  }
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && j < dim2 && b < batch_size) {
    float t = 0.f;
    for (int y = 0; y < RY; ++y) t += part[y][threadIdx.x];
    out[b * dim2 + j] = t / (float)dim1;
  }
}
