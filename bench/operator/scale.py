import torch
import torch.nn as nn


class Model(nn.Module):
    """An element-wise problem for the operator's overhead (bench/operator_overhead.sh): y = 2 x."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * 2.0


num_elements = 1024  # 4 KB of fp32; the second workload is 64 MB


def get_inputs():
    return [torch.randn(num_elements)]


def get_init_inputs():
    return []


def get_workloads():
    return [{"num_elements": 1024}, {"num_elements": 16777216}]
