"""The problem a module makes (Variant: its dtype, its backward) and what a backward gives the gradients of."""

import torch

from .dtypes import TORCH_DTYPES


class Variant:
    """The problem a module makes (docs/pytorch-precision.md, "Precision: bf16 and fp16 problems", and
    docs/pytorch-training.md, "Training: backward problems"). With `dtype` (bf16 or f16) its float inputs and
    weights are cast to it, as KernelBench's precision option casts them (the module `.to(dtype)`, each
    floating-point input `.to(dtype)`; integer inputs untouched), so the reference runs in that dtype.
    With `backward` the problem is the module's backward: given the gradient of each differentiable output
    (`grad_<output>`, an input), the gradients of its float inputs (those get_inputs() marks requires_grad,
    else all of them) and of its weights (its parameters), each `grad_<name>`, an output; with `with_forward`
    the forward's outputs too, first, one problem as a training step runs them. The reference of a backward
    is autograd in float64 (Server.run_backward)."""

    def __init__(self, dtype="", backward=False, with_forward=False):
        self.dtype = TORCH_DTYPES[dtype] if dtype else None
        self.backward = backward
        self.with_forward = with_forward

    def model(self, model):
        return model.to(self.dtype) if self.dtype is not None else model

    def tensor(self, x):
        if self.dtype is not None and isinstance(x, torch.Tensor) and x.is_floating_point():
            return x.to(self.dtype)
        return x


def gradient_inputs(names, inputs):
    """The inputs a backward gives the gradients of: the float tensors that get_inputs() marks requires_grad,
    or every float tensor where it marks none."""
    floats = [(n, x) for n, x in zip(names, inputs) if isinstance(x, torch.Tensor) and x.is_floating_point()]
    marked = [n for n, x in floats if x.requires_grad]
    return marked or [n for n, _ in floats]


def gradient_weights(model, state):
    """The state-dict keys a backward gives the gradients of: the module's float parameters that require
    them (buffers, such as a norm's running statistics, take none)."""
    return [k for k, p in model.named_parameters() if k in state and p.requires_grad and p.is_floating_point()]
