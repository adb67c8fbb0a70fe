"""The module's call: its forward's parameter names, the kernel parameters a state-dict key and an output become,
its outputs as a list of tensors, and the functional call on given weights."""

import inspect

import torch

from .errors import Unmappable


def forward_names(model, count):
    names = []
    try:
        for p in inspect.signature(model.forward).parameters.values():
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                names.append(p.name)
            elif p.kind == p.VAR_POSITIONAL:
                names.extend(f"{p.name}{i}" for i in range(count - len(names)))
    except (TypeError, ValueError):
        pass
    names = names[:count]
    names += [f"in{i}" for i in range(len(names), count)]
    return [identifier(n) for n in names]


def identifier(name):
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return out if out and not out[0].isdigit() else "p_" + out


def weight_name(key):
    """The kernel parameter a state-dict entry becomes: fc.weight -> fc_weight."""
    return identifier(key.replace(".", "_"))


def as_outputs(result):
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, (tuple, list)) and result and all(isinstance(r, torch.Tensor) for r in result):
        return list(result)
    raise Unmappable(f"forward returns {type(result).__name__}"
                     + (" holding non-tensors" if isinstance(result, (tuple, list)) else "")
                     + ": a kernel's outputs must be a tensor or a tuple of tensors")


def storage_ptr(t):
    try:
        return t.untyped_storage().data_ptr()
    except AttributeError:
        return t.storage().data_ptr()


def call(model, params, args):
    try:
        from torch.func import functional_call
    except ImportError:
        from torch.nn.utils.stateless import functional_call
    return functional_call(model, params, tuple(args))


def output_names(count):
    return ["out"] if count == 1 else [f"out{i}" for i in range(count)]


def wide(t):
    """A float tensor as a float64 copy (the exact reference's); anything else as it is."""
    return t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t


def as_module(view, zero_d):
    """An arena view as the module has the tensor: a 0-d tensor's [1] view as 0-d, so that it broadcasts as
    the module's own does."""
    return view.view(()) if zero_d and view.numel() == 1 else view
