import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A linear layer, exact (erf) GELU, then a scale given with the input: out = gelu(x W^T + b) * scale."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x, scale):
        return F.gelu(self.fc(x)) * scale


batch_size = 96
in_features = 320
out_features = 448
scaling_factor = 0.75


def get_inputs():
    return [torch.randn(batch_size, in_features), scaling_factor]


def get_init_inputs():
    return [in_features, out_features]
