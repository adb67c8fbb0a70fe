import torch
import torch.nn as nn


class Model(nn.Module):
    """nn.LayerNorm over the last dimension of a (batch, sequence, hidden) tensor, with its weight and bias."""

    def __init__(self, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        # LayerNorm starts as weight 1, bias 0; random values make a kernel that ignores them fail.
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return self.norm(x)


batch_size = 8
seq_len = 128
hidden = 768


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden) * 2.0 + 0.5]


def get_init_inputs():
    return [hidden]
