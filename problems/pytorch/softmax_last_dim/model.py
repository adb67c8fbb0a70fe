import torch
import torch.nn as nn


class Model(nn.Module):
    """Softmax over the last dimension of a (batch, sequence, classes) tensor."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)


batch_size = 16
seq_len = 32
num_classes = 1000


def get_inputs():
    return [torch.randn(batch_size, seq_len, num_classes) * 3.0]


def get_init_inputs():
    return []
