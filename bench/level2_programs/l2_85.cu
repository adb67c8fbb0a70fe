// KernelBench level 2, problem 85 (Conv2d_GroupNorm_Scale_MaxPool_Clamp):
// out = clamp(maxpool4x4(GroupNorm16(conv2d(x, conv_weight) + conv_bias) * scale), 0, 1).
// conv 3x3 (stride 1, no padding); GroupNorm(16 groups, out_channels, eps 1e-5, affine group_norm_weight and
// group_norm_bias); scale [out_channels, 1, 1]; MaxPool2d(4) (stride 4, floor); clamp(0.0, 1.0).
// Plan: cuDNN's convolution with its bias into a temporary t[N, K, OH, OW], then ONE fused kernel, one block
// per (sample, group): it reads the group's channels (contiguous in NCHW) once for the sum and the sum of
// squares (in double: no cancellation in E[v^2] - mean^2), then, for each pooled output of those channels,
// normalizes the 16 values of its window as PyTorch's GroupNorm does (a = rstd * gamma, b = beta - a * mean,
// a * v + b), multiplies by scale, takes their max and clamps. The group count 16 and the pool's 4 are the
// module's constants (the import writes the output's shape with "/ 4").
/* kernelevolve-plan
{"temporaries": [{"name": "t", "dtype": "f32",
                  "shape": ["batch_size", "out_channels", "height - kernel_size + 1", "width - kernel_size + 1"]}],
 "steps": [
  {"library": "cudnn.conv2d",
   "args": ["x", "conv_weight", "t", "batch_size", "in_channels", "height", "width", "out_channels",
            "kernel_size", "kernel_size", "conv_bias"]},
  {"kernel": "groupnorm_scale_pool_clamp", "grid": ["batch_size * 16"], "block": [512],
   "args": ["t", "group_norm_weight", "group_norm_bias", "scale", "out", "out_channels",
            "height - kernel_size + 1", "width - kernel_size + 1"]}]}
*/
#ifndef INFINITY  // NVRTC defines no math.h macros
#define INFINITY __int_as_float(0x7f800000)
#endif
#define GROUPS 16
#define POOL 4
#define EPS 1e-5f

// The block's sums of a and b (blockDim.x a multiple of 32), returned to every thread.
__device__ void block_sum2(double& a, double& b) {
  __shared__ double sa[32], sb[32];
  for (int o = 16; o > 0; o >>= 1) {
    a += __shfl_down_sync(0xffffffffu, a, o);
    b += __shfl_down_sync(0xffffffffu, b, o);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  if (lane == 0) {
    sa[warp] = a;
    sb[warp] = b;
  }
  __syncthreads();
  if (warp == 0) {
    a = lane < warps ? sa[lane] : 0.0;
    b = lane < warps ? sb[lane] : 0.0;
    for (int o = 16; o > 0; o >>= 1) {
      a += __shfl_down_sync(0xffffffffu, a, o);
      b += __shfl_down_sync(0xffffffffu, b, o);
    }
    if (lane == 0) {
      sa[0] = a;
      sb[0] = b;
    }
  }
  __syncthreads();
  a = sa[0];
  b = sb[0];
}

extern "C" __global__ void groupnorm_scale_pool_clamp(float* t, const float* gamma, const float* beta,
                                                      const float* scale, float* out, long long channels,
                                                      long long oh, long long ow) {
  const long long n = blockIdx.x / GROUPS, g = blockIdx.x % GROUPS;
  const long long cpg = channels / GROUPS, plane = oh * ow, len = cpg * plane;
  const long long c0 = g * cpg;
  const float* base = t + (n * channels + c0) * plane;

  // The group's mean and variance (biased, as GroupNorm's), over cpg * oh * ow values.
  double s = 0.0, ss = 0.0;
  const bool vec = ((n * channels + c0) * plane) % 4 == 0 && len % 4 == 0;
  if (vec) {
    const float4* b4 = reinterpret_cast<const float4*>(base);
    for (long long i = threadIdx.x; i < len / 4; i += blockDim.x) {
      const float4 v = b4[i];
      s += (double)v.x + (double)v.y + (double)v.z + (double)v.w;
      ss += (double)v.x * v.x + (double)v.y * v.y + (double)v.z * v.z + (double)v.w * v.w;
    }
  } else {
    for (long long i = threadIdx.x; i < len; i += blockDim.x) {
      const double v = base[i];
      s += v;
      ss += v * v;
    }
  }
  block_sum2(s, ss);
  const double mean_d = s / (double)len;
  double var_d = ss / (double)len - mean_d * mean_d;
  if (var_d < 0.0) var_d = 0.0;
  const float mean = (float)mean_d;
  const float rstd = rsqrtf((float)var_d + EPS);

  // The pooled outputs of the group's channels: a 4x4 window each, floor mode.
  const long long ph = oh / POOL, pw = ow / POOL, per_channel = ph * pw;
  for (long long o = threadIdx.x; o < cpg * per_channel; o += blockDim.x) {
    const long long cl = o / per_channel, r = o % per_channel;
    const long long py = r / pw, px = r % pw;
    const long long c = c0 + cl;
    const float a = rstd * gamma[c];
    const float b = -a * mean + beta[c];
    const float sc = scale[c];
    const float* win = base + cl * plane + (py * POOL) * ow + px * POOL;
    float m = -INFINITY;
#pragma unroll
    for (int dy = 0; dy < POOL; ++dy) {
#pragma unroll
      for (int dx = 0; dx < POOL; ++dx) {
        const float y = a * win[dy * ow + dx] + b;  // GroupNorm
        m = fmaxf(m, y * sc);                       // x * self.scale, then the max of the window
      }
    }
    out[(n * channels + c) * per_channel + r] = fminf(fmaxf(m, 0.0f), 1.0f);  // torch.clamp(x, 0.0, 1.0)
  }
}
