# A DLRM-shaped recommendation model of our own (issue 30), in KernelBench's format, for `kernelevolve optimize`:
# dense features through a bottom MLP, sparse features through sum-pooled embedding bags (problems/pytorch/emb_bag_sum),
# DLRM's dot interaction over every pair of the resulting vectors (problems/pytorch/dlrm_interaction), and a top MLP
# over the bottom MLP's output and the pairs' dot products, ending in a click probability.
#
# The sizes below fill a GPU (about 0.7 GB of tables). KE_DLRM_SIZE=cpu selects a small one for the CPU's tests
# (tests/python/test_optimize.py) and a quick look on a 2-core machine; the file is otherwise the same.
import os

import torch
import torch.nn as nn

if os.environ.get("KE_DLRM_SIZE", "gpu") == "cpu":
    batch_size = 32
    num_dense = 13
    embedding_dim = 16
    bottom_hidden = 32
    top_hidden = 32
    big_rows = 2000  # rows of each of the first num_big tables
    small_rows = 300  # rows of each of the others
    bag_size = 4  # indices per bag, on average
else:
    batch_size = 4096
    num_dense = 13
    embedding_dim = 64
    bottom_hidden = 512
    top_hidden = 512
    big_rows = 1000000
    small_rows = 100000
    bag_size = 20
num_tables = 8
num_big = 2
num_indices = batch_size * bag_size  # per table
num_pairs = (num_tables + 1) * num_tables // 2


def mlp(sizes, last_sigmoid=False):
    layers = []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        layers.append(nn.Linear(a, b))
        last = i == len(sizes) - 2
        layers.append(nn.Sigmoid() if last and last_sigmoid else nn.ReLU())
    return nn.Sequential(*layers)


class Model(nn.Module):
    """Bottom MLP (num_dense -> bottom_hidden -> bottom_hidden/2 -> embedding_dim, ReLU), num_tables EmbeddingBags
    (mode="sum"; the first num_big with big_rows rows, the rest small_rows), the dot products of every pair of the
    num_tables + 1 vectors of a sample (the strictly lower triangle of X X^T, row-major, as DLRM), concatenated after
    the bottom MLP's output, then the top MLP (-> top_hidden -> top_hidden/2 -> 1, ReLU, then a sigmoid)."""

    def __init__(self, num_dense, embedding_dim, big_rows, small_rows, num_tables, num_big, bottom_hidden, top_hidden):
        super().__init__()
        self.bottom = mlp([num_dense, bottom_hidden, bottom_hidden // 2, embedding_dim])
        self.bags = nn.ModuleList([
            nn.EmbeddingBag(big_rows if t < num_big else small_rows, embedding_dim, mode="sum")
            for t in range(num_tables)
        ])
        fields = num_tables + 1
        rows, cols = torch.tril_indices(fields, fields, offset=-1)
        self.register_buffer("pair_rows", rows, persistent=False)
        self.register_buffer("pair_cols", cols, persistent=False)
        self.top = mlp([embedding_dim + fields * (fields - 1) // 2, top_hidden, top_hidden // 2, 1], last_sigmoid=True)

    def forward(self, dense, indices, offsets):
        # indices: num_tables x num_indices row numbers; offsets: num_tables x batch, each row the start of each bag
        x = self.bottom(dense)
        pooled = [bag(indices[t], offsets[t]) for t, bag in enumerate(self.bags)]
        features = torch.stack([x] + pooled, dim=1)  # batch x fields x embedding_dim
        gram = torch.bmm(features, features.transpose(1, 2))
        pairs = gram[:, self.pair_rows, self.pair_cols]
        return self.top(torch.cat([x, pairs], dim=1))


def get_inputs():
    dense = torch.rand(batch_size, num_dense)
    # Each table's row numbers drawn over its own rows, uniformly.
    rows = torch.tensor([big_rows if t < num_big else small_rows for t in range(num_tables)]).unsqueeze(1)
    indices = (torch.rand(num_tables, num_indices, dtype=torch.float64) * rows).long()
    # Bags of random length (bag_size on average, some empty): sorted cut points, the first at 0.
    offsets = torch.sort(torch.randint(0, num_indices + 1, (num_tables, batch_size)), dim=1).values
    offsets[:, 0] = 0
    return [dense, indices, offsets]


def get_init_inputs():
    return [num_dense, embedding_dim, big_rows, small_rows, num_tables, num_big, bottom_hidden, top_hidden]
