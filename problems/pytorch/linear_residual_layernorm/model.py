import torch
import torch.nn as nn


class Model(nn.Module):
    """A linear layer, a residual added, then LayerNorm: out = layer_norm(x W^T + b + residual)."""

    def __init__(self, in_features, hidden):
        super().__init__()
        self.fc = nn.Linear(in_features, hidden)
        self.norm = nn.LayerNorm(hidden)
        # LayerNorm starts as weight 1, bias 0; random values make a kernel that ignores them fail.
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x, residual):
        return self.norm(self.fc(x) + residual)


batch_size = 128
in_features = 256
hidden = 384


def get_inputs():
    return [torch.randn(batch_size, in_features), torch.randn(batch_size, hidden)]


def get_init_inputs():
    return [in_features, hidden]
