import torch
import torch.nn as nn


class Model(nn.Module):
    """A linear layer followed by ReLU: out = relu(x W^T + b)."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.fc(x))


batch_size = 128
in_features = 512
out_features = 384


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
