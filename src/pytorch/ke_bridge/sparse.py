"""Sparse gradients (nn.Embedding and nn.EmbeddingBag with sparse=True) as the fixed-size parts a kernel writes."""

import torch

from .errors import Unmappable


# The parts a sparse gradient is written as (docs/pytorch-training.md, "A sparse gradient"): autograd's sparse
# gradient coalesced (each row once, in ascending order, its contributions summed), padded to a capacity fixed
# by the shapes, the number of index positions that reach the table, so that every element has one right value:
# grad_<w>_indices the rows (then -1), grad_<w>_values their gradients (then zeros), grad_<w>_nnz how many.
SPARSE_PARTS = ("indices", "values", "nnz")


def sparse_weights(model):
    """The state-dict keys whose gradient autograd gives sparse, with their modules: the tables of nn.Embedding
    and nn.EmbeddingBag with sparse=True."""
    return {(f"{prefix}." if prefix else "") + "weight": m for prefix, m in model.named_modules()
            if isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag)) and m.sparse}


def sparse_parts(grad, name, views):
    """A sparse weight's gradient (dense zeros where autograd gave none) as the parts of SPARSE_PARTS that
    `views` names, each at its view's shape."""
    grad = (grad if grad.is_sparse else grad.to_sparse(1)).coalesce()
    rows, values = grad.indices()[0], grad.values()
    nnz = rows.numel()
    parts = {}
    for part in SPARSE_PARTS:
        view = views.get(f"grad_{name}_{part}")
        if view is None:
            continue
        shape = tuple(view[2])
        if part == "nnz":
            parts[part] = torch.full(shape, nnz, dtype=torch.int64, device=rows.device)
            continue
        if not shape or shape[0] < nnz:
            raise Unmappable(f"output 'grad_{name}_{part}' has room for {shape[0] if shape else 0} rows, the gradient "
                             f"names {nnz}")
        padded = torch.full(shape, -1, dtype=rows.dtype, device=rows.device) if part == "indices" else \
            torch.zeros(shape, dtype=values.dtype, device=values.device)
        padded[:nnz] = rows if part == "indices" else values.reshape((nnz,) + shape[1:])
        parts[part] = padded
    return parts
