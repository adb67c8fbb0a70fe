import torch
import torch.nn as nn


class Model(nn.Module):
    """ReLU of an NCHW activation tensor: out = max(x, 0), element-wise."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


batch_size = 8
channels = 24
height = 40
width = 56


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return []
