import torch
import torch.nn as nn


class Model(nn.Module):
    """emb_bag_sum's nn.EmbeddingBag(mode="sum") with sparse=True, as a recommendation model trains its tables:
    autograd gives the table's gradient as a sparse tensor, the rows the indices name and their gradients."""

    def __init__(self, num_embeddings, embedding_dim):
        super().__init__()
        self.bag = nn.EmbeddingBag(num_embeddings, embedding_dim, mode="sum", sparse=True)

    def forward(self, indices, offsets):
        return self.bag(indices, offsets)


num_embeddings = 10000
embedding_dim = 64
batch_size = 512
bag_size = 20
num_indices = batch_size * bag_size


def get_inputs():
    indices = torch.randint(0, num_embeddings, (num_indices,))
    # Bags of random length (bag_size on average, some empty): sorted cut points, the first at 0.
    offsets = torch.sort(torch.randint(0, num_indices + 1, (batch_size,))).values
    offsets[0] = 0
    return [indices, offsets]


def get_init_inputs():
    return [num_embeddings, embedding_dim]
