import torch
import torch.nn as nn


class Model(nn.Module):
    """Mean over the middle dimension of a (batch, dim1, dim2) tensor: out has shape (batch, dim2)."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.mean(x, dim=self.dim)


batch_size = 16
dim1 = 192
dim2 = 256
dim = 1


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2) + 0.25]


def get_init_inputs():
    return [dim]
