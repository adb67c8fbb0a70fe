"""The problem's file: loading it (its int globals overridden in the source, as a derivation perturbs them),
building its model and drawing its inputs on a device, and its get_workloads()."""

import ast
import copy
import importlib.util
import os
import sys

import torch

from .errors import Unmappable
from .precision import apply_precision


def load_module(path, overrides=None):
    """The problem's module. `overrides` gives some of its top-level int globals other values, in the source
    itself (`height = width = 128` with height overridden becomes `height = 129; width = 128`), so that
    globals computed from them follow (`bias_shape = (out_channels, 1, 1)`): what deriving the signature
    perturbs."""
    directory = os.path.dirname(os.path.abspath(path))
    if directory not in sys.path:
        sys.path.insert(0, directory)
    spec = importlib.util.spec_from_file_location("kernelevolve_problem", path)
    if spec is None or spec.loader is None:
        raise Unmappable(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    if overrides:
        with open(path) as f:
            tree = override_globals(ast.parse(f.read(), path), overrides)
        exec(compile(tree, path, "exec"), module.__dict__)
        for name, value in overrides.items():  # one assigned some other way (in a branch, by a function)
            if type(getattr(module, name, None)) is int:
                setattr(module, name, value)
    else:
        spec.loader.exec_module(module)
    apply_precision()  # after the file's own code, which may have set the switches itself
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, name):
            raise Unmappable(f"{path} defines no {name}: a problem in KernelBench's format has class Model(nn.Module), "
                             "get_inputs() and get_init_inputs()")
    return module


def override_globals(tree, overrides):
    body = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            if len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Tuple) and isinstance(stmt.value, ast.Tuple) \
                    and len(stmt.targets[0].elts) == len(stmt.value.elts):
                pairs = list(zip(stmt.targets[0].elts, stmt.value.elts))  # a, b = 1, 2
            else:
                pairs = [(t, stmt.value) for t in stmt.targets]  # a = b = 1
            if any(isinstance(t, ast.Name) and t.id in overrides for t, _ in pairs):
                for t, v in pairs:
                    if isinstance(t, ast.Name) and t.id in overrides:
                        v = ast.Constant(overrides[t.id])
                    body.append(ast.copy_location(ast.Assign(targets=[t], value=copy.deepcopy(v)), stmt))
                continue
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id in overrides:
            stmt.value = ast.Constant(overrides[stmt.target.id])
        body.append(stmt)
    tree.body = body
    return ast.fix_missing_locations(tree)


def int_globals(module):
    """The module's top-level ints, in definition order: the names its sizes go by."""
    return [(k, v) for k, v in vars(module).items() if type(v) is int and not k.startswith("_")]


def module_at(path, sizes):
    """The module at a workload's sizes: its globals set in the source, as deriving the signature perturbs
    them, so that a global computed from them (`hidden = features * 2`) follows unless the workload sets it
    too."""
    return load_module(path, {k: int(v) for k, v in (sizes or {}).items()})


def on_device(device):
    """Makes tensor factories (torch.randn in get_inputs, a layer's weights) allocate on `device` where this
    PyTorch can (2.0 and later): drawing a GPU problem's inputs on the host and copying them over cost some
    60 ms a trial for 32 MB (the CPU's random number generator, then the bus)."""
    import contextlib
    if torch.device(device).type == "cpu" or not hasattr(torch.device, "__enter__"):
        return contextlib.nullcontext()
    return torch.device(device)


def build_model(module, device, seed):
    torch.manual_seed(seed)
    with on_device(device):
        init = module.get_init_inputs()
        model = module.Model(*init)
    return model.to(device).eval()


def draw_inputs(module, device, seed):
    torch.manual_seed(seed)
    with on_device(device):
        inputs = list(module.get_inputs())
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]


def requested_workloads(module, defaults):
    """get_workloads(), checked: a non-empty list of dicts binding the module's int globals to ints; [{}]
    (the module's own values) when the problem has no get_workloads()."""
    if not callable(getattr(module, "get_workloads", None)):
        return [{}]
    listed = module.get_workloads()
    if not isinstance(listed, (list, tuple)) or not listed:
        raise Unmappable(f"get_workloads() returns {listed!r}: it must return a non-empty list of dicts, each "
                         "binding the module's int globals (its sizes) to values")
    known = ", ".join(defaults) or "none"
    workloads = []
    for i, w in enumerate(listed):
        if not isinstance(w, dict):
            raise Unmappable(f"get_workloads()[{i}] is a {type(w).__name__}, not a dict of the module's int globals")
        for k, v in w.items():
            if k not in defaults:
                raise Unmappable(f"get_workloads()[{i}] {workload_text(w)} names '{k}', which is not one of the "
                                 f"module's int globals (known: {known})")
            if type(v) is not int:
                raise Unmappable(f"get_workloads()[{i}] {workload_text(w)} sets '{k}' to {v!r}, not an int")
        workloads.append(dict(w))
    return workloads


def workload_text(w):
    return "{" + ", ".join(f"{k}: {v}" for k, v in w.items()) + "}"
