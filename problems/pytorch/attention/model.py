import math

import torch
import torch.nn as nn


class Model(nn.Module):
    """Causal scaled dot-product attention, as a decoder's self-attention runs it after the projections:
    out = softmax(q k^T / sqrt(head_dim), keys after the query masked) v, for each batch and head. q, k, v and out
    are (batch_size, heads, seq_len, head_dim). Written out (torch 1.13 has no F.scaled_dot_product_attention);
    the same arithmetic as its math path."""

    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        seq = q.size(-2)
        scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(q.size(-1)))
        future = torch.ones(seq, seq, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
        return torch.matmul(torch.softmax(scores, dim=-1), v)


batch_size = 2
heads = 4
seq_len = 128
head_dim = 64


def get_inputs():
    return [torch.randn(batch_size, heads, seq_len, head_dim) for _ in range(3)]


def get_init_inputs():
    return []
