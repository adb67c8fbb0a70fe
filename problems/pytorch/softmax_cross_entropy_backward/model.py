import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A classifier's loss: softmax cross-entropy of logits (batch_size x num_classes) against class indices,
    averaged over the batch (nn.CrossEntropyLoss's default). Its spec asks for the backward: the logits'
    gradient, given the loss's."""

    def __init__(self):
        super().__init__()

    def forward(self, logits, targets):
        return F.cross_entropy(logits, targets)


batch_size = 256
num_classes = 1000


def get_inputs():
    # Class indices in [0, num_classes), drawn afresh for every trial: an index is never out of range.
    return [torch.randn(batch_size, num_classes) * 2.0, torch.randint(0, num_classes, (batch_size,))]


def get_init_inputs():
    return []
