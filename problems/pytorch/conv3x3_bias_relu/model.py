import torch
import torch.nn as nn


class Model(nn.Module):
    """A 3x3 convolution (stride 1, padding 1, with its own bias), a per-channel bias added, then ReLU."""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1) * 0.1)

    def forward(self, x):
        return torch.relu(self.conv(x) + self.bias)


batch_size = 8
in_channels = 16
out_channels = 32
height = 24
width = 40


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
