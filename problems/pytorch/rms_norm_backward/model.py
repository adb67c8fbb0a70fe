import torch
import torch.nn as nn


class Model(nn.Module):
    """RMSNorm over the last dimension of a (batch, sequence, hidden) tensor, with its weight:
    out = x / sqrt(mean(x^2) + eps) * weight. Its spec asks for the backward ("backward": true)."""

    def __init__(self, hidden):
        super().__init__()
        # Random, not ones: a kernel that ignores the weight fails.
        self.weight = nn.Parameter(torch.rand(hidden) + 0.5)
        self.eps = 1e-6

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


batch_size = 8
seq_len = 64
hidden = 512


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden)]


def get_init_inputs():
    return [hidden]
