"""A DLRM-style model around problems/pytorch/dlrm_interaction's module (bench/operator_ab.py, and the GPU
operator tests): a bottom MLP over dense features, 26 summed embedding bags, the dot interaction of the 27
feature vectors, and a top MLP over the dense vector and the 351 pair products. Batch 4096, dimension 128: the
interaction problem's first CUDA workload."""
import importlib.util
import os
import sys

import torch
import torch.nn as nn

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BATCH, DENSE, TABLES, ROWS, DIM, BAG = 4096, 13, 26, 100000, 128, 4


def interaction_module():
    path = os.path.join(ROOT, "problems", "pytorch", "dlrm_interaction", "model.py")
    spec = importlib.util.spec_from_file_location("dlrm_interaction", path)
    module = sys.modules.get("dlrm_interaction")
    if module is None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules["dlrm_interaction"] = module  # torch.compile looks a forward's globals up by module name
    return module.Model()


def mlp(sizes, last_relu):
    layers = []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        layers.append(nn.Linear(a, b))
        if last_relu or i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    def __init__(self):
        super().__init__()
        self.bottom = mlp([DENSE, 512, 256, DIM], last_relu=True)
        self.tables = nn.ModuleList([nn.EmbeddingBag(ROWS, DIM, mode="sum") for _ in range(TABLES)])
        self.interaction = interaction_module()
        pairs = (TABLES + 1) * TABLES // 2
        self.top = mlp([DIM + pairs, 1024, 1024, 512, 256, 1], last_relu=False)

    def forward(self, dense, indices, offsets):
        x = self.bottom(dense)
        features = torch.stack([x] + [t(indices[k], offsets[k]) for k, t in enumerate(self.tables)], dim=1)
        return self.top(torch.cat([x, self.interaction(features)], dim=1))


def inputs(device, seed=0):
    g = torch.Generator().manual_seed(seed)
    dense = torch.randn(BATCH, DENSE, generator=g)
    indices = torch.randint(0, ROWS, (TABLES, BATCH * BAG), generator=g)
    offsets = torch.arange(0, BATCH * BAG, BAG).expand(TABLES, BATCH).contiguous()
    return dense.to(device), indices.to(device), offsets.to(device)
