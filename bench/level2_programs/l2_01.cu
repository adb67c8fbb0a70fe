// KernelBench level 2, problem 1 (Conv2D_ReLU_BiasAdd): out = relu(conv2d(x, conv_weight) + conv_bias) + bias,
// bias of shape [out_channels, 1, 1]; the convolution 3x3, stride 1, no padding (nn.Conv2d's defaults).
// Plan: cuDNN's convolution with its bias straight into the output, then ONE kernel that applies the ReLU and
// adds the channel's bias in place: a 2-D grid, y over the batch_size * out_channels planes (so the channel
// is blockIdx.y % out_channels, with no division per element), x over each plane's elements, 4 per thread.
/* kernelevolve-plan
{"steps": [
  {"library": "cudnn.conv2d",
   "args": ["x", "conv_weight", "out", "batch_size", "in_channels", "height", "width", "out_channels",
            "kernel_size", "kernel_size", "conv_bias"]},
  {"kernel": "relu_bias", "block": [256],
   "grid": ["cdiv((height - kernel_size + 1) * (width - kernel_size + 1), 1024)", "batch_size * out_channels"],
   "args": ["out", "bias", "(height - kernel_size + 1) * (width - kernel_size + 1)", "out_channels"]}]}
*/
extern "C" __global__ void relu_bias(float* out, const float* bias, long long plane, long long channels) {
  const float b = bias[blockIdx.y % channels];
  float* p = out + (long long)blockIdx.y * plane;
  const long long base = (long long)blockIdx.x * 1024 + threadIdx.x;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const long long i = base + k * 256;  // blockDim.x is 256: coalesced, 4 loads in flight per thread
    if (i < plane) p[i] = fmaxf(p[i], 0.0f) + b;  // torch.relu, then x + self.bias
  }
}
