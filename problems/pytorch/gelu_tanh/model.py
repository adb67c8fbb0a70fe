import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.gelu(x, approximate="tanh")


batch_size = 128
features = 4096


def get_inputs():
    return [torch.randn(batch_size, features) * 2.0]


def get_init_inputs():
    return []
