# The Python side of a PyTorch problem (src/pytorch/): KernelEvolve runs this script with the interpreter
# that imports torch. It is trusted code running a trusted module; candidates never run in this process.
#
#   describe --module FILE [--device D] [--sizes JSON] [--dtype bf16|f16] [--backward [--with-forward]]
#       prints the kernel signature derived from the module (docs/pytorch.md, "The signature"): on the
#       meta device where it can (else by a real call on D, saying why in "derivation"), each dimension named
#       after the global it follows or an expression over them, with the cost ("bytes", "flops" where
#       PyTorch counts them), the module's constants, and its workloads: one per entry of the problem's
#       get_workloads(), if it has one, each of which must give the same signature; else the one observed.
#       Or {"error": ...} naming what could not be mapped, and exits. --dtype, --backward and --with-forward
#       make another problem of the module (Variant): its floats cast, its backward.
#   serve --module FILE --device D (--arena-fd N | --arena-ipc HEX) --arena-bytes B [--model-seed S] [variant]
#       answers requests, one JSON line each on stdin, with one JSON line on stdout: "draw" writes the
#       problem's own inputs (get_inputs() under a seed) and the module's weights into the shared arena,
#       "run" runs the module on tensors viewing the arena and writes its outputs there (the reference,
#       or a baseline, eager or torch.compile, timed), "prepare" says whether a mode can run here. Only
#       the module named at start ever runs: a request carries offsets, dtypes, shapes, sizes, seeds and
#       a mode, never code or paths.
#   serve ... --control-fd N [--arena-alloc]
#       the same for the workers of one device at once (a bridge the host starts): each worker's socket
#       arrives over the control socket N; the arena has one holder at a time ("acquire", "yield"); on a
#       GPU the bridge allocates it and its greeting carries "arena_ipc"; it ends when stdin does.
import ast
import copy
import ctypes
import importlib.util
import inspect
import json
import math
import mmap
import os
import re
import sys
import time
import traceback

import torch

DTYPES = {
    torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.float64: "f64",
    torch.int64: "i64", torch.int32: "i32", torch.int8: "i8", torch.uint8: "u8", torch.bool: "u8",
}
TORCH_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "f64": torch.float64,
                "i64": torch.int64, "i32": torch.int32, "i8": torch.int8, "u8": torch.uint8}


class Unmappable(Exception):
    pass


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


# The run's precision policy (issue 50): "as-run" leaves PyTorch's TF32 switches as the user's environment and the
# module's file have them (PyTorch's defaults: cuDNN's convolutions on TF32, matrix products not); "strict" turns
# TF32 off everywhere, after the file is loaded, so that the reference, eager and torch.compile are fp32.
PRECISION = "strict"


def apply_precision():
    if PRECISION == "strict":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        if hasattr(torch, "set_float32_matmul_precision"):
            torch.set_float32_matmul_precision("highest")


def precision_state():
    """The switches the reference and the baselines run under, as the run stores and prints them."""
    matmul = torch.get_float32_matmul_precision() if hasattr(torch, "get_float32_matmul_precision") else "highest"
    return {"policy": PRECISION, "cudnn_tf32": bool(torch.backends.cudnn.allow_tf32),
            "matmul_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
            "float32_matmul_precision": matmul}


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


def output_names(count):
    return ["out"] if count == 1 else [f"out{i}" for i in range(count)]


def autograd_step(model, inputs, grad_indices, weight_keys):
    """The forward with its backward, as flops are counted: each differentiable output's gradient ones, the
    gradients of inputs[grad_indices] and of the parameters named weight_keys."""
    leaves = [x.detach().requires_grad_(True) if i in grad_indices else x for i, x in enumerate(inputs)]
    own = dict(model.named_parameters())
    with torch.enable_grad():
        outs = [o for o in as_outputs(model(*leaves)) if o.requires_grad]
        targets = [leaves[i] for i in grad_indices] + [own[k] for k in weight_keys]
        if outs and targets:
            torch.autograd.grad(outs, targets, [torch.ones_like(o) for o in outs], allow_unused=True)


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


# Deriving the signature. Factory functions (torch.randn in get_inputs(), a layer's weights) make their
# tensors on the device a derivation runs on: PyTorch's meta device where the module allows, so nothing is
# allocated and a 16 GB problem derives in a second. `with torch.device(...)` is PyTorch 2's; this mode
# (after PyTorch 2's torch/utils/_device.py) works on torch 1.13 too.
FACTORY_NAMES = ("empty", "empty_strided", "zeros", "ones", "full", "rand", "randn", "randint", "randperm", "arange",
                 "range", "linspace", "logspace", "eye", "tensor", "as_tensor", "asarray", "scalar_tensor", "normal",
                 "bartlett_window", "blackman_window", "hamming_window", "hann_window", "kaiser_window",
                 "tril_indices", "triu_indices")
FACTORIES = {f for f in (getattr(torch, n, None) for n in FACTORY_NAMES) if f is not None}


def meta_kernels():
    """Meta kernels that torch 1.13 lacks, for the operators KernelBench uses: max_pool3d (PyTorch 2 has it).
    Registered once, only where missing, so a module that uses it derives on meta too."""
    global META_LIBRARY
    if META_LIBRARY is not None:
        return
    META_LIBRARY = False
    try:
        torch.nn.functional.max_pool3d(torch.empty(1, 1, 1, 1, 1, device="meta"), 1)
        return
    except Exception:
        pass

    def triple(v):
        if isinstance(v, (list, tuple)):
            return tuple(v) * 3 if len(v) == 1 else tuple(v) if len(v) == 3 else None
        return (v, v, v)

    def max_pool3d_with_indices(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
        k, p, d = triple(kernel_size), triple(padding), triple(dilation)
        s = triple(stride) or k
        out = []
        for i in range(3):
            n = x.shape[-3 + i]
            span = n + 2 * p[i] - d[i] * (k[i] - 1) - 1
            o = (-(-span // s[i]) if ceil_mode else span // s[i]) + 1
            if ceil_mode and (o - 1) * s[i] >= n + p[i]:
                o -= 1
            out.append(o)
        shape = tuple(x.shape[:-3]) + tuple(out)
        return x.new_empty(shape), x.new_empty(shape, dtype=torch.int64)

    try:
        META_LIBRARY = torch.library.Library("aten", "IMPL", "Meta")
        META_LIBRARY.impl("max_pool3d_with_indices", max_pool3d_with_indices)
    except Exception:
        META_LIBRARY = False


META_LIBRARY = None


class OnDevice(torch.overrides.TorchFunctionMode):
    """Factories without a device make their tensors on `device`; while `shapes` is a list, the shape of
    every tensor a call returns is recorded (a forward's intermediates, from which a dimension that follows a
    computation of the sizes is found step by step)."""

    def __init__(self, device):
        super().__init__()
        self.device = torch.device(device)
        self.shapes = None
        self.small_real = False  # small tensors on the CPU instead of meta: see Sample

    SMALL = 1 << 16

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        try:
            factory = func in FACTORIES
        except TypeError:
            factory = False
        if factory and kwargs.get("device") is None and not any(isinstance(a, torch.Tensor) for a in args):
            kwargs = dict(kwargs, device=self.device)
        result = func(*args, **kwargs)
        if factory and self.small_real and isinstance(result, torch.Tensor) and result.is_meta and \
                result.numel() <= self.SMALL:
            result = func(*args, **dict(kwargs, device="cpu"))
        if self.shapes is not None and len(self.shapes) < 4096:
            for t in (result if isinstance(result, (tuple, list)) else (result,)):
                if isinstance(t, torch.Tensor):
                    self.shapes.append(tuple(t.shape))
        return result


# What torch.profiler's flop count (with_flops, before PyTorch 2.1) covers, as FlopCounterMode counts them:
# the matrix products and 2-d convolutions; and the heavy operators it gives no count for, whose presence
# makes its total an undercount, so none is given.
PROFILED_FLOPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::conv2d"}
UNPROFILED_HEAVY = ("aten::conv1d", "aten::conv3d", "aten::conv_transpose", "aten::einsum", "aten::lstm", "aten::gru",
                    "aten::rnn_", "aten::_scaled_dot_product", "aten::scaled_dot_product", "aten::bilinear",
                    "aten::_convolution_mode", "aten::tensordot")


def profiled_flops(model, run):
    """torch.profiler's count of what run() computes, where this PyTorch has no FlopCounterMode (1.13, CI's):
    products and 2-d convolutions only (on meta tensors too; a backward's products as well), else None. A
    module with a layer it gives no count for is not profiled at all: the count would be refused anyway, and
    profiling a recurrent layer's steps took a GRU's derivation from 1 s to 96 s."""
    nn = torch.nn
    if any(isinstance(m, (nn.RNNBase, nn.Conv1d, nn.Conv3d, nn.modules.conv._ConvTransposeNd, nn.MultiheadAttention,
                          nn.Bilinear)) for m in model.modules()):
        return None
    try:
        from torch.profiler import profile
        with profile(with_flops=True) as prof:
            run()
        events = prof.key_averages()
    except Exception:
        return None
    if any(e.key.startswith(UNPROFILED_HEAVY) for e in events):
        return None
    return int(sum(e.flops for e in events if e.key in PROFILED_FLOPS and e.flops))


def counted_flops(model, run):
    """PyTorch's count of the FLOPs run() computes where it has a counter (torch.utils.flop_counter, PyTorch
    2.1 and later; it works on meta tensors), else torch.profiler's (profiled_flops), else None."""
    try:
        from torch.utils.flop_counter import FlopCounterMode
    except ImportError:
        return profiled_flops(model, run)
    try:
        counter = FlopCounterMode(display=False)
        with counter:
            run()
        return int(counter.get_total_flops())
    except Exception:
        return None


def total_flops(model, inputs, step=None):
    """The FLOPs of what the problem computes: the forward; or, with `step` (the inputs' and weights'
    gradients asked: (grad_indices, weight_keys)), the forward and its backward less the forward alone
    unless `step` asks for the forward too."""
    def forward():
        with torch.no_grad():
            model(*inputs)
    forward_flops = counted_flops(model, forward)
    if step is None or forward_flops is None:
        return forward_flops
    grad_indices, weight_keys, with_forward = step
    both = counted_flops(model, lambda: autograd_step(model, inputs, grad_indices, weight_keys))
    if both is None:
        return None
    return both if with_forward else max(both - forward_flops, 0)


def first_line(e):
    """An exception's first sentence."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    text = text.split(". ")[0]
    return f"{type(e).__name__}: {text}"[:300] if text else type(e).__name__


class Sample:
    """One call of the module at some values of its globals (set in the source: module_at): the kernel's
    parameters with numeric shapes, the globals' values, and the forward's intermediate shapes."""

    def __init__(self, path, device, meta, sizes=None, check_data_dependence=False, flops=False, variant=None):
        variant = variant or Variant()
        self.variant = variant
        mode = OnDevice("meta" if meta else device)
        with mode:
            module = module_at(path, sizes)
            self.module = module
            torch.manual_seed(0)
            self.init = list(module.get_init_inputs())
            try:
                model = module.Model(*self.init)
            except Exception:
                if not meta:
                    raise
                # A constructor that reads values (Swin's [x.item() for x in torch.linspace(...)]): again,
                # with its small tensors real, and then every weight on meta.
                mode.small_real = True
                torch.manual_seed(0)
                model = module.Model(*self.init)
                mode.small_real = False
                model = model.to("meta")
            if not meta:
                model = model.to(device)
            model = variant.model(model).eval()
            torch.manual_seed(1)
            inputs = [x.to(device) if isinstance(x, torch.Tensor) and not meta else x for x in module.get_inputs()]
        self.sizes = dict(int_globals(module))
        self.names = forward_names(model, len(inputs))
        # A backward's leaves: the inputs it gives the gradients of require them, after the cast.
        self.grad_inputs = gradient_inputs(self.names, inputs) if variant.backward else []
        inputs = [variant.tensor(x) for x in inputs]
        if variant.backward:
            inputs = [x.detach().requires_grad_(True) if n in self.grad_inputs else x
                      for n, x in zip(self.names, inputs)]
        self.state = model.state_dict()
        self.grad_weights = gradient_weights(model, self.state) if variant.backward else []
        tensors = [(f"input '{n}'", x) for n, x in zip(self.names, inputs) if isinstance(x, torch.Tensor)] + \
                  [(f"weight '{k}'", t) for k, t in self.state.items()]
        versions = [t._version for _, t in tensors]
        # A sparse gradient's capacity: the index positions its table is called with, summed over its calls.
        self.sparse_capacity = {}
        hooks = []
        if variant.backward:
            for key, m in sparse_weights(model).items():
                def count(_, args, key=key):
                    if not args or not isinstance(args[0], torch.Tensor):
                        raise Unmappable(f"the sparse table '{key}' is called without its indices as the first "
                                         "positional argument")
                    self.sparse_capacity[key] = self.sparse_capacity.get(key, 0) + args[0].numel()
                hooks.append(m.register_forward_pre_hook(count))
        mode.shapes = []
        try:
            with mode, (torch.enable_grad() if variant.backward else torch.no_grad()):
                result = model(*inputs)
        finally:
            for h in hooks:
                h.remove()
        self.intermediates, mode.shapes = mode.shapes, None
        self.outputs = as_outputs(result)
        # A kernel reads its inputs and weights and writes its outputs: a module that changes an input or a
        # weight as it runs has no such form (an output that is a view of an input is fine: it is copied).
        for (what, t), version in zip(tensors, versions):
            if t._version != version:
                raise Unmappable(f"forward writes into its {what} in place: a kernel's inputs and weights are "
                                 "read-only, and its outputs are buffers of their own")
        for i, o in enumerate(self.outputs):
            if o.dtype not in DTYPES:
                raise Unmappable(f"output {i} has dtype {o.dtype}, which no kernel parameter type holds")
        step = None
        if variant.backward:
            step = ([self.names.index(n) for n in self.grad_inputs], self.grad_weights, variant.with_forward)
        self.flops = total_flops(model, inputs, step) if flops else None
        self.inputs = inputs
        self.params = self.make_params()
        if meta:
            # A draw that gives other shapes is a signature that follows the data. Shapes computed from the
            # data raise on meta tensors, so that the derivation falls back to a real call, which checks them.
            with OnDevice("meta"):
                torch.manual_seed(2)
                again = list(module.get_inputs())
            self.check_same_inputs(again)
        elif check_data_dependence:
            with OnDevice(device):
                torch.manual_seed(2)
                again = [variant.tensor(x.to(device) if isinstance(x, torch.Tensor) else x)
                         for x in module.get_inputs()]
            self.check_same_inputs(again)
            with torch.no_grad():
                outputs2 = as_outputs(model(*again))
            for i, (a, b) in enumerate(zip(self.outputs, outputs2)):
                if tuple(a.shape) != tuple(b.shape):
                    raise Unmappable(f"output {i} has a data-dependent shape ({list(a.shape)} for one draw of the "
                                     f"inputs, {list(b.shape)} for another)")

    def check_same_inputs(self, again):
        for i, (a, b) in enumerate(zip(self.inputs, again)):
            if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and tuple(a.shape) != tuple(b.shape):
                raise Unmappable(f"input '{self.names[i]}' has shape {list(a.shape)} in one draw of get_inputs() and "
                                 f"{list(b.shape)} in another")

    def make_params(self):
        """The kernel's parameters for this call, in order (inputs, weights, outputs), shapes as numbers. A 0-d
        tensor (a loss, a scalar weight, BatchNorm's num_batches_tracked) is a one-element buffer, [1]."""
        def shape(t):
            return list(t.shape) if t.dim() > 0 else [1]
        params = []
        for name, x in zip(self.names, self.inputs):
            if isinstance(x, torch.Tensor):
                if x.dtype not in DTYPES:
                    raise Unmappable(f"input '{name}' has dtype {x.dtype}, which no kernel parameter type holds")
                params.append({"name": name, "dtype": DTYPES[x.dtype], "role": "in", "shape": shape(x)})
            elif type(x) is int or type(x) is bool:
                params.append({"name": name, "dtype": "i64", "role": "scalar", "value": int(x)})
            elif type(x) is float:
                params.append({"name": name, "dtype": "f32", "role": "scalar", "value": x})
            else:
                raise Unmappable(f"input '{name}' is a {type(x).__name__}: only tensors, ints and floats map to a "
                                 "kernel's parameters")
        for key, t in self.state.items():
            if t.dtype not in DTYPES:
                raise Unmappable(f"weight '{key}' has dtype {t.dtype}, which no kernel parameter type holds")
            params.append({"name": weight_name(key), "dtype": DTYPES[t.dtype], "role": "in", "shape": shape(t),
                           "state": key})
        outputs = [{"name": name, "dtype": DTYPES[o.dtype], "role": "out", "shape": shape(o)}
                   for name, o in zip(output_names(len(self.outputs)), self.outputs)]
        if not self.variant.backward:
            return params + outputs
        # The backward: each differentiable output's gradient in, then (with the forward's outputs first) the
        # gradient of each input and weight that takes one, out, each shaped and typed as what it is of.
        upstream = [dict(p, name=f"grad_{p['name']}", role="in") for p, o in zip(outputs, self.outputs)
                    if o.requires_grad and o.is_floating_point()]
        if not upstream:
            raise Unmappable("no output of the forward depends on an input or a weight that takes a gradient: the "
                             "module has no backward to compute")
        of = {p["name"]: p for p in params if "shape" in p}
        weights = {p["state"]: p for p in params if "state" in p}
        grads = [dict(of[n], name=f"grad_{n}", role="out") for n in self.grad_inputs]
        for k in self.grad_weights:
            w = weights[k]
            if k not in self.sparse_capacity:
                grads.append({key: v for key, v in dict(w, name=f"grad_{w['name']}", role="out").items()
                              if key != "state"})
                continue
            rows = self.sparse_capacity[k]
            grads += [{"name": f"grad_{w['name']}_indices", "dtype": "i64", "role": "out", "shape": [rows]},
                      {"name": f"grad_{w['name']}_values", "dtype": w["dtype"], "role": "out",
                       "shape": [rows] + w["shape"][1:]},
                      {"name": f"grad_{w['name']}_nnz", "dtype": "i64", "role": "out", "shape": [1]}]
        if not grads:
            raise Unmappable("the module has no float input and no parameter to give a gradient of: no backward")
        params = params + upstream + (outputs if self.variant.with_forward else []) + grads
        seen = set()
        for p in params:
            if p["name"] in seen:
                raise Unmappable(f"two of the backward's parameters are named '{p['name']}' (a gradient is named "
                                 "grad_ and what it is of): rename the module's input or weight")
            seen.add(p["name"])
        return params

    def dims(self):
        """Every dimension of the parameters, in order: ((param index, dim index), value)."""
        return [((i, d), v) for i, p in enumerate(self.params) for d, v in enumerate(p.get("shape", []))]


def signature_change(base, other):
    """What differs between two calls' parameters beyond their sizes (names, dtypes, roles, ranks, scalar
    values), in words; None when nothing does."""
    if [p["name"] for p in base] != [p["name"] for p in other]:
        return (f"its parameters are ({', '.join(p['name'] for p in other)}), not "
                f"({', '.join(p['name'] for p in base)})")
    for a, b in zip(base, other):
        for field in ("role", "dtype"):
            if a[field] != b[field]:
                return f"'{a['name']}' has {field} {b[field]}, not {a[field]}"
        if "shape" in a and len(a["shape"]) != len(b["shape"]):
            return f"'{a['name']}' has {len(b['shape'])} dimensions, not {len(a['shape'])}"
        if a["role"] == "scalar" and a["value"] != b["value"]:
            return f"the scalar '{a['name']}' is {b['value']}, not {a['value']} (a scalar has one value for every workload)"
    return None


# Integer expressions as the spec reads them (include/kernelevolve/expr.hpp): + - * and / truncating toward
# zero like C. An expression here is (text, values over the samples, top operator or None for an atom).
def c_div(a, b):
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def operand(e, op, right):
    """e's text as an operand of op, parenthesized so that the spec's parser reads it back the same:
    a - (b + c), a * (b / c) and a / (b * c) keep theirs, as / truncates."""
    text, _, top = e
    if top is None:
        return text
    if op in "*/" and top in "+-":
        return f"({text})"
    if right and (op == "-" and top in "+-" or op == "*" and top == "/" or op == "/"):
        return f"({text})"
    return text


def combine(op, a, b):
    va, vb = a[1], b[1]
    if op == "+":
        values = tuple(x + y for x, y in zip(va, vb))
    elif op == "-":
        values = tuple(x - y for x, y in zip(va, vb))
    elif op == "*":
        values = tuple(x * y for x, y in zip(va, vb))
    else:
        if any(y == 0 for y in vb):
            return None
        values = tuple(c_div(x, y) for x, y in zip(va, vb))
    return (f"{operand(a, op, False)} {op} {operand(b, op, True)}", values, op)


def plus(text, top, b):
    if b == 0:
        return text
    return f"{text} + {b}" if b > 0 else f"{text} - {-b}"


def affine(e, target):
    """target as c * e + b, or (e + a) / s + b: how a convolution's or a pool's output follows its input."""
    text, values, top = e
    t0, e0 = target[0], values[0]
    for i in range(1, len(values)):
        if values[i] != e0:
            de, dt = values[i] - e0, target[i] - t0
            if dt != 0 and dt % de == 0 and dt // de > 0:  # -(k - h) comes as h - k, with its operands swapped
                c = dt // de
                b = t0 - c * e0
                if all(c * x + b == t for x, t in zip(values, target)):
                    if c == 1:
                        return plus(text, top, b)
                    if c == -1:
                        return plus(f"-{operand(e, '*', True)}", "*", b)
                    return plus(f"{c} * {operand(e, '*', True)}", "*", b)
            break
    for s in range(2, 9):
        for a in range(0, s):
            b = t0 - c_div(e0 + a, s)
            if all(x + a >= 0 and c_div(x + a, s) + b == t for x, t in zip(values, target)):
                inner = (plus(text, top, a), None, "+" if a else top)
                return plus(f"{operand(inner, '/', False)} / {s}", "/", b)
    return None


def linear(target, leaves):
    """target as (c1 * g1 + c2 * g2 + ... + a) / s + b over the sizes g: a convolution's output in its input,
    kernel, stride, padding and dilation, whatever they are. The slopes by least squares, rounded, then checked
    exactly at every sample."""
    n, k = len(target), len(leaves)
    if k == 0 or n < k + 2:
        return None
    rows = [[float(leaf[1][i]) for leaf in leaves] + [1.0] for i in range(n)]
    try:
        solution = torch.linalg.lstsq(torch.tensor(rows, dtype=torch.float64),
                                      torch.tensor([[float(t)] for t in target], dtype=torch.float64)).solution
    except Exception:
        return None
    slopes = [float(x) for x in solution[:k, 0]]
    for s in range(1, 17):
        coeffs = [round(x * s) for x in slopes]
        if not any(coeffs) or any(abs(x * s - c) > 0.3 for x, c in zip(slopes, coeffs)):
            continue
        values = [sum(c * leaf[1][i] for c, leaf in zip(coeffs, leaves)) for i in range(n)]
        for a in range(s):
            b = target[0] - c_div(values[0] + a, s)
            if not all(v + a >= 0 and c_div(v + a, s) + b == t for v, t in zip(values, target)):
                continue
            terms = sorted(((c, leaf[0]) for c, leaf in zip(coeffs, leaves) if c), key=lambda t: t[0] < 0)
            text = ""
            for c, name in terms:
                word = name if abs(c) == 1 else f"{abs(c)} * {name}"
                text = (f"-{word}" if c < 0 else word) if not text else f"{text} {'-' if c < 0 else '+'} {word}"
            if s == 1:
                return plus(text, "+", a + b)
            return plus(f"({plus(text, '+', a)}) / {s}" if len(terms) > 1 or a else f"{text} / {s}", "/", b)
        if s == 1 and all(abs(x - round(x)) < 1e-6 for x in slopes):
            return None  # integral slopes that do not fit: no division will
    return None


def solve(target, leaves, max_size):
    """An integer expression over `leaves` whose values are `target` at every sample: a bottom-up enumeration
    of expressions up to `max_size` nodes, one kept per distinct list of values (observational equivalence),
    each also tried under an affine step. None where there is none that small."""
    target = tuple(target)
    seen = set()
    levels = {1: []}
    for leaf in leaves:
        if leaf[1] == target:
            return leaf[0]
        if leaf[1] not in seen:
            seen.add(leaf[1])
            levels[1].append(leaf)
            found = affine(leaf, target)
            if found:
                return found
    for size in range(3, max_size + 1, 2):
        levels[size] = []
        for left_size in range(1, size - 1, 2):
            right_size = size - 1 - left_size
            for a in levels[left_size]:
                for b in levels[right_size]:
                    for op in "+-*/":
                        if op in "+*" and left_size > right_size:
                            continue  # a + b is b + a
                        e = combine(op, a, b)
                        if e is None or e[1] in seen or any(abs(v) > 1 << 62 for v in e[1]):
                            continue
                        if e[1] == target:
                            return e[0]
                        seen.add(e[1])
                        levels[size].append(e)
                        found = affine(e, target)
                        if found:
                            return found
                        if len(seen) > 50000:
                            return None
    return None


def evaluate(text, sizes):
    """An expression of ours at some sizes (C's truncating division)."""
    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant):
            return int(node.value)
        if isinstance(node, ast.Name):
            return sizes[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Add):
                return a + b
            if isinstance(node.op, ast.Sub):
                return a - b
            if isinstance(node.op, ast.Mult):
                return a * b
            if isinstance(node.op, ast.Div):
                return c_div(a, b)
        raise ValueError(f"not an expression of ours: {text}")
    return ev(ast.parse(str(text), mode="eval"))


def perturbed_values(value, meta):
    # On meta, sizes cost nothing; on a real call they stay near the module's own (its memory is the limit).
    candidates = [value + 1, value + 3, 2 * value, value + 2, value + 5] if meta else \
        [value - 1, value + 1, value - 2, value + 2, value - 3]
    return [c for c in dict.fromkeys(candidates) if c >= 1 and c != value]


class Namer:
    """Finds what each dimension follows. Samples: the base call, each int global changed in turn (a global
    whose change fails, or changes the signature beyond its sizes, is no size; one that changes no dimension
    neither), and a few with every size changed at once, so that products and sums are told apart. A global
    that some dimension equals in all its samples is a size; every dimension is then the size it equals, an
    expression over the sizes it follows (found bottom-up, using the forward's intermediate shapes as steps),
    or, following nothing, a number."""

    def __init__(self, derive, base, globals_order, log):
        self.derive, self.base, self.log = derive, base, log
        base_dims = base.dims()
        self.sizes = []          # the globals that are sizes, in definition order
        self.singles = {}        # global -> its perturbed samples
        self.not_sizes = {}      # global -> why not
        # Real calls run at the module's own size, and a module whose forward is thousands of small ops (a
        # recurrent network, step by step) is slow even on meta: past a minute, the globals left are not
        # examined (their dimensions stay numbers) rather than an import that takes an hour. (On the lent
        # H100, torch 2.11, the eight LSTM and GRU models of KernelBench's level 3 took over 240 s each.)
        deadline = time.monotonic() + 60
        for g in globals_order:
            value = base.sizes.get(g)
            if value is None or value <= 0:
                continue
            if deadline is not None and time.monotonic() > deadline:
                self.not_sizes[g] = "not examined: the derivation took its minute"
                continue
            # Three values each on meta (cheap), two for real: enough points that an expression which
            # matches them all is the rule and not a coincidence.
            got, tries, wanted = [], 0, 3 if derive.meta else 2
            for v in perturbed_values(value, derive.meta):
                if len(got) == wanted or tries == wanted + 2:
                    break
                tries += 1
                try:
                    s = derive({g: v})
                except Exception as e:
                    self.not_sizes.setdefault(g, f"{g} = {v} fails ({first_line(e)})")
                    continue
                change = signature_change(base.params, s.params)
                if change:
                    got = []
                    self.not_sizes[g] = f"{g} = {v} changes the signature: {change}"
                    break
                if [d for _, d in s.dims()] == [d for _, d in base_dims]:
                    self.not_sizes[g] = f"no dimension follows {g}"
                    got = []
                    break
                got.append(s)
            if not got:
                continue
            samples = [base] + got
            if any(all(s.dims()[k][1] == s.sizes[g] for s in samples) for k in range(len(base_dims))):
                self.sizes.append(g)
                self.singles[g] = got
                self.not_sizes.pop(g, None)
            else:
                self.not_sizes[g] = f"no dimension equals {g}"
        # Every size changed at once, with the values each took alone (mixed), then with their changes
        # doubled and tripled (a size that must stay even stays even): products are told from sums.
        self.joints = []
        if len(self.sizes) >= 1:
            for j in range(4 if derive.meta else 2):
                if time.monotonic() > deadline:
                    break
                over = {}
                for i, g in enumerate(self.sizes):
                    choices = [s.sizes[g] for s in self.singles[g]]
                    pick = choices[(i + j) % len(choices)]
                    over[g] = pick if j < 2 else base.sizes[g] + j * (pick - base.sizes[g])
                try:
                    s = derive(over)
                except Exception:
                    continue
                if not signature_change(base.params, s.params):
                    self.joints.append(s)
        self.samples = [base] + [s for g in self.sizes for s in self.singles[g]] + self.joints
        self.vectors = {g: tuple(s.sizes[g] for s in self.samples) for g in self.sizes}
        self.library = None

    def deps(self, values):
        """The sizes whose own samples change `values` (a tuple over the samples)."""
        out, index = [], 1
        for g in self.sizes:
            n = len(self.singles[g])
            if any(values[index + k] != values[0] for k in range(n)):
                out.append(g)
            index += n
        return out

    def name(self, values, use_library=True):
        """A dimension's values over the samples as a size's name, an expression, or a number (an int)."""
        values = tuple(values)
        if len(set(values)) == 1:
            return values[0]
        for g in self.sizes:
            if self.vectors[g] == values:
                return g
        deps = self.deps(values)
        leaves = [(g, self.vectors[g], None) for g in deps]
        found = linear(values, leaves)
        if found is None:
            found = solve(values, leaves, 7 if len(leaves) <= 3 else 5)
        if found is None and use_library:
            steps = [e for e in self.steps() if set(e[3]) <= set(deps)][-6:]
            found = solve(values, leaves + [(t, v, p) for t, v, p, _ in steps], 5)
        return strip_parentheses(found) if found is not None else values[0]

    def steps(self):
        """The forward's intermediate dimensions as expressions over the sizes, in the order the forward made
        them: each found from the sizes and the steps before it (a pool of a convolution of the input)."""
        if self.library is not None:
            return self.library
        self.library = []
        if any(len(s.intermediates) != len(self.base.intermediates) for s in self.samples):
            return self.library
        known = {v: g for g, v in self.vectors.items()}
        for k, shape in enumerate(self.base.intermediates):
            if len(self.library) >= 64:
                break
            if any(len(s.intermediates[k]) != len(shape) for s in self.samples):
                return self.library
            for d in range(len(shape)):
                values = tuple(s.intermediates[k][d] for s in self.samples)
                if len(set(values)) == 1 or values in known:
                    continue
                deps = self.deps(values)
                leaves = [(g, self.vectors[g], None) for g in deps] + \
                         [(t, v, p) for t, v, p, dp in self.library if set(dp) <= set(deps)][-6:]
                text = solve(values, leaves, 5 if len(leaves) <= 6 else 3)
                known[values] = text
                if text is not None:
                    self.library.append((text if text.isidentifier() else f"({text})", values, None, deps))
        return self.library


def strip_parentheses(text):
    while text.startswith("(") and text.endswith(")"):
        depth = 0
        for i, c in enumerate(text):
            depth += c == "("
            depth -= c == ")"
            if depth == 0 and i < len(text) - 1:
                return text
        text = text[1:-1]
    return text


def constants_of(base, sizes, samples):
    """The module's constants that are neither tensors nor sizes, for the notes: its top-level values (ints
    that no dimension follows, floats, tuples, strings) and get_init_inputs()'s values that are not ints. A
    global computed from the sizes (bias_shape = (out_channels, 1, 1)) follows them: no constant."""
    out = []
    for k, v in vars(base.module).items():
        if k.startswith("_") or k in sizes:
            continue
        if any(repr(vars(s.module).get(k)) != repr(v) for s in samples if any(s.sizes.get(g) != base.sizes.get(g)
                                                                              for g in sizes)):
            continue
        if isinstance(v, (bool, int, float, str)) or (isinstance(v, (tuple, list)) and len(v) <= 16 and
                                                      all(isinstance(x, (bool, int, float, str)) for x in v)):
            out.append({"name": k, "value": repr(v)})
    try:
        names = [p for p in inspect.signature(base.module.Model.__init__).parameters if p != "self"]
    except (TypeError, ValueError):
        names = []
    for i, v in enumerate(base.init):
        if isinstance(v, torch.Tensor) or type(v) is int:
            continue
        if any(i < len(s.init) and repr(s.init[i]) != repr(v) for s in samples):
            continue  # it follows the sizes
        name = names[i] if i < len(names) else f"get_init_inputs()[{i}]"
        if not any(c["name"] == name and c["value"] == repr(v) for c in out):
            out.append({"name": f"Model({name})", "value": repr(v)})
    return out


def product_text(factors):
    parts = [str(f) if isinstance(f, int) or str(f).isidentifier() else f"({f})" for f in factors]
    return " * ".join(parts) if parts else "1"


def bytes_expression(params):
    """The bytes the kernel reads and writes, an expression in the sizes: every buffer's elements times its
    dtype's size, literal terms summed."""
    constant, terms = 0, {}
    for p in params:
        if "shape" not in p:
            continue
        width = torch.empty(0, dtype=TORCH_DTYPES[p["dtype"]]).element_size()
        literal, symbolic = width, []
        for d in p["shape"]:
            if isinstance(d, int):
                literal *= d
            else:
                symbolic.append(d)
        if not symbolic:
            constant += literal
        else:
            key = product_text(symbolic)
            terms[key] = terms.get(key, 0) + literal
    out = [f"{w} * {t}" if w != 1 else t for t, w in terms.items()]
    if constant or not out:
        out.append(str(constant))
    return " + ".join(out)


def describe(path, device, sizes, variant=None):
    try:
        with OnDevice("meta"):  # a module that makes tensors as it loads makes them on meta here too
            module = module_at(path, sizes)
    except Unmappable:
        raise
    except Exception:
        module = module_at(path, sizes)
    defaults = dict(int_globals(module))
    workloads = requested_workloads(module, defaults)
    base_sizes = {**(sizes or {}), **workloads[0]}

    def label(i):
        return f"get_workloads()[{i}] {workload_text(workloads[i])}"

    class Derive:
        def __init__(self, meta):
            self.meta = meta

        def __call__(self, overrides, check=False, flops=False):
            return Sample(path, device, self.meta, sizes={**base_sizes, **overrides}, check_data_dependence=check,
                          flops=True, variant=variant)

    meta_kernels()
    derive = Derive(meta=True)
    derivation = "meta"
    try:
        base = derive({}, flops=True)
    except (Unmappable, AttributeError, NameError, ImportError, SyntaxError):
        raise  # the module's own mistake, or a function this PyTorch lacks: a real call fails the same
    except Exception as e:
        # The meta device cannot run every module (an .item(), a shape from the data, an op without a meta
        # kernel): the module's own size, for real, on the requested device.
        derivation = f"real: {first_line(e)}"
        derive = Derive(meta=False)
        try:
            base = derive({}, check=True, flops=True)
        except Unmappable as u:
            raise Unmappable(f"{label(0)}: {u}" if len(workloads) > 1 else str(u)) from None
    namer = Namer(derive, base, list(defaults), log=None)
    params = [dict(p, shape=list(p["shape"])) if "shape" in p else dict(p) for p in base.params]
    for (i, d), _ in base.dims():
        params[i]["shape"][d] = namer.name(tuple(s.params[i]["shape"][d] for s in namer.samples))
    # The size params in the order the dimensions first name them (the kernel's signature, as before).
    used = []
    for p in params:
        for d in p.get("shape", []):
            if isinstance(d, str):
                for g in ast_names(d):
                    if g in namer.sizes and g not in used:
                        used.append(g)
    for g in used:
        params.append({"name": g, "dtype": "i64", "role": "size"})

    # Every workload of get_workloads() (its globals set as the reference will set them) must give the same
    # signature, and each of its shapes must be what the signature's expressions give at its sizes.
    bound = []
    for i, w in enumerate(workloads):
        if i == 0:
            call = base
        else:
            try:
                call = Sample(path, device, derive.meta, sizes={**(sizes or {}), **w}, variant=variant)
            except Unmappable as e:
                raise Unmappable(f"{label(i)}: {e}") from None
            change = signature_change(base.params, call.params)
            if change:
                raise Unmappable(f"{label(i)} changes the kernel's signature derived from {label(0)}: {change}")
        values = {g: call.sizes[g] for g in used}
        for (pi, d), actual in call.dims():
            dim = params[pi]["shape"][d]
            expected = dim if isinstance(dim, int) else evaluate(dim, values)
            if expected != actual:
                raise Unmappable(f"{label(i)}: dimension {d} of '{params[pi]['name']}' is {actual} there, but the "
                                 f"signature's {dim} gives {expected}: a size that changes must be a global of its "
                                 "own, or follow the globals as the derived expression does")
        for k, v in w.items():
            if k not in used and v != defaults[k]:
                raise Unmappable(f"{label(i)} sets '{k}', but no dimension of the kernel's signature follows it: a "
                                 f"workload binds sizes only, and the reference would run with {k} = {defaults[k]}")
        bound.append(values)

    cost = {"bytes": bytes_expression(params)}
    if base.flops is not None:
        flops = [s.flops for s in namer.samples]
        if all(f is not None for f in flops):
            named = namer.name(flops, use_library=False)
            if not isinstance(named, str) and len(set(flops)) > 1:
                named = flops_per_element(flops, params, namer) or named
            if isinstance(named, str) or len(set(flops)) == 1:
                cost["flops"] = str(named)
            elif len(workloads) == 1:
                cost["flops"] = str(base.flops)  # the base workload's count: the only one it is used at
    return {"params": params, "workload": bound[0], "workloads": bound, "forward": base.names,
            "dtypes": sorted({p["dtype"] for p in params if p["role"] != "size"}),
            "derivation": derivation, "cost": cost, "constants": constants_of(base, used, namer.samples),
            "not_sizes": namer.not_sizes, "torch": torch.__version__, "precision": precision_state()}


def flops_per_element(flops, params, namer):
    """The FLOPs as a buffer's elements times an expression: a convolution's are its output's elements times
    2 * in_channels * kernel_size * kernel_size, a matrix product's its output's times 2 * K."""
    for i, p in enumerate(params):
        if p["role"] not in ("out", "in") or "shape" not in p or all(isinstance(d, int) for d in p["shape"]):
            continue
        elements = [math.prod(s.params[i]["shape"]) for s in namer.samples]
        if any(e == 0 or f % e for f, e in zip(flops, elements)):
            continue
        per = tuple(f // e for f, e in zip(flops, elements))
        named = namer.name(per, use_library=False)
        if isinstance(named, str) or len(set(per)) == 1:
            return product_text([named] + list(p["shape"])) if named != 1 else product_text(list(p["shape"]))
    return None


def ast_names(text):
    """The names an expression reads, in the order it reads them."""
    names = []
    for n in ast.walk(ast.parse(str(text), mode="eval")):
        if isinstance(n, ast.Name) and n.id not in names:
            names.append(n.id)
    return sorted(names, key=lambda name: re.search(r"\b" + re.escape(name) + r"\b", text).start())


class Arena:
    """The memory KernelEvolve shares with this process: a memfd on the CPU; on a GPU, device memory the
    worker allocated and exported with cuIpcGetMemHandle, opened here, so no trial's tensors cross the bus.
    A bridge that the workers of a GPU share allocates it itself (--arena-alloc), and they open it: it
    outlives any one of them."""

    def __init__(self, args):
        self.device = torch.device(args.device)
        self.views = {}
        self.ipc_handle = ""  # what the workers open the arena by, where this process allocated it
        size = args.arena_bytes
        if self.device.type == "cpu":
            self.map = mmap.mmap(args.arena_fd, size)
            self.base = torch.frombuffer(self.map, dtype=torch.uint8) if size > 0 else torch.empty(0, dtype=torch.uint8)
        elif self.device.type == "cuda" and args.arena_alloc:
            self.base, self.ipc_handle = allocate_ipc(self.device, size)
        elif self.device.type == "cuda":
            self.base = open_ipc(self.device, args.arena_ipc, size)
        else:
            raise Unmappable(f"no arena on a {self.device.type} device")

    def release(self, offset):
        """Gives the memfd's pages from `offset` on back to the system (the worker, confined, cannot): what
        only a baseline's second block used. Later reads see zeros; the mapping stays."""
        if self.device.type != "cpu" or not hasattr(self.map, "madvise") or not hasattr(mmap, "MADV_REMOVE"):
            return
        start = -(-int(offset) // mmap.PAGESIZE) * mmap.PAGESIZE
        if start < len(self.map):
            self.map.madvise(mmap.MADV_REMOVE, start, len(self.map) - start)

    def view(self, spec):
        # The same few views come back in every request: made once (a reference trial's host cost is
        # mostly this process's own overhead).
        key = (spec[0], spec[1], tuple(spec[2]))
        view = self.views.get(key)
        if view is None:
            offset, dtype, shape = key
            dt = TORCH_DTYPES[dtype]
            count = math.prod(shape) if shape else 1
            nbytes = count * torch.empty(0, dtype=dt).element_size()
            view = self.base[offset:offset + nbytes].view(dt).view(shape)
            if len(self.views) > 4096:
                self.views.clear()
            self.views[key] = view
        return view


class IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


def cuda_driver(device):
    """libcuda, with `device`'s primary context (the one PyTorch uses) created and current."""
    torch.cuda.set_device(device)
    torch.empty(1, device=device)
    return ctypes.CDLL("libcuda.so.1")


def as_tensor(device, pointer, size):
    """`size` bytes of device memory at `pointer` as a uint8 tensor, without a copy (__cuda_array_interface__)."""
    class Shared:
        __cuda_array_interface__ = {"shape": (size,), "typestr": "|u1", "data": (pointer, False),
                                    "version": 2, "strides": None}

    holder = Shared()
    tensor = torch.as_tensor(holder, device=device)
    tensor._kernelevolve_holder = holder
    return tensor


def open_ipc(device, handle_hex, size):
    """The worker's allocation, as a uint8 tensor on `device`: cuIpcOpenMemHandle in the primary context."""
    lib = cuda_driver(device)
    opener = getattr(lib, "cuIpcOpenMemHandle_v2", None) or lib.cuIpcOpenMemHandle
    opener.argtypes = [ctypes.POINTER(ctypes.c_uint64), IpcHandle, ctypes.c_uint]
    handle = IpcHandle.from_buffer_copy(bytes.fromhex(handle_hex))
    pointer = ctypes.c_uint64(0)
    status = opener(ctypes.byref(pointer), handle, 1)  # CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
    if status != 0:
        raise Unmappable(f"cuIpcOpenMemHandle failed with CUresult {status}")
    return as_tensor(device, pointer.value, size)


def allocate_ipc(device, size):
    """`size` bytes of `device` for the workers to open: cuMemAlloc, not PyTorch's caching allocator (whose
    blocks may share an allocation with other tensors, and which empty_cache() would give back), exported
    with cuIpcGetMemHandle. Returns the tensor and the handle in hex. Freed when this process ends."""
    lib = cuda_driver(device)
    alloc = getattr(lib, "cuMemAlloc_v2", None) or lib.cuMemAlloc
    alloc.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
    pointer = ctypes.c_uint64(0)
    status = alloc(ctypes.byref(pointer), max(int(size), 1))
    if status != 0:
        raise Unmappable(f"cuMemAlloc of the arena ({size} bytes) failed with CUresult {status}")
    lib.cuIpcGetMemHandle.argtypes = [ctypes.POINTER(IpcHandle), ctypes.c_uint64]
    handle = IpcHandle()
    status = lib.cuIpcGetMemHandle(ctypes.byref(handle), pointer)
    if status != 0:
        raise Unmappable(f"cuIpcGetMemHandle failed with CUresult {status}")
    return as_tensor(device, pointer.value, size), bytes(handle).hex()


class Timer:
    """Times one call as KernelEvolve's devices time a kernel's launches (issue 50, timing parity). On a GPU: L2
    flushed by reading a buffer twice its size (as the CUDA device does), then the GPU held on a spin until the whole
    call is queued, then events bracketing its work: the device's time with the host ahead of it, as a candidate's
    launches from C++ are timed, not a Python call's dispatch gaps. The host's own cost of the call (its Python,
    dispatch and launches, measured while the GPU is held) is kept apart as `host_us`, which a region's figure adds
    where the model pays it. On the CPU, the steady clock around the call, caches left warm: the call is its own
    host."""

    def __init__(self, device):
        self.device = device
        self.flush_buffer = None
        self.host_us = 0.0  # the last call's
        self.cycles_per_us = None
        if device.type == "cuda":
            l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 64 << 20)
            self.flush_buffer = torch.ones(max(2 * l2, 1 << 20) // 4, dtype=torch.float32, device=device)
            self.start = torch.cuda.Event(enable_timing=True)
            self.stop = torch.cuda.Event(enable_timing=True)

    def spin_cycles_per_us(self):
        """The spin kernel's cycles per microsecond on this GPU, measured once."""
        if self.cycles_per_us is None:
            self.start.record()
            torch.cuda._sleep(1_000_000)
            self.stop.record()
            self.stop.synchronize()
            self.cycles_per_us = 1_000_000 / max(self.start.elapsed_time(self.stop) * 1000.0, 1.0)
        return self.cycles_per_us

    def time(self, fn, flush):
        import time
        if self.device.type != "cuda":
            t0 = time.perf_counter_ns()
            out = fn()
            self.host_us = (time.perf_counter_ns() - t0) / 1000.0
            return out, self.host_us
        # Held for twice the last call's host time (at least 50 us): should this call's queueing outlast the hold, the
        # GPU waited on the host inside the events, and the call is timed again with a hold long enough.
        for _ in range(3):
            hold_us = max(50.0, 2.0 * self.host_us)
            if flush:
                self.flush_buffer.sum()
            if hasattr(torch.cuda, "_sleep"):
                torch.cuda._sleep(int(hold_us * self.spin_cycles_per_us()))
            self.start.record()
            t0 = time.perf_counter_ns()
            out = fn()
            self.host_us = (time.perf_counter_ns() - t0) / 1000.0
            self.stop.record()
            self.stop.synchronize()
            if self.host_us <= hold_us or not hasattr(torch.cuda, "_sleep"):
                break
        return out, self.start.elapsed_time(self.stop) * 1000.0


def wide(t):
    """A float tensor as a float64 copy (the exact reference's); anything else as it is."""
    return t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t


def as_module(view, zero_d):
    """An arena view as the module has the tensor: a 0-d tensor's [1] view as 0-d, so that it broadcasts as
    the module's own does."""
    return view.view(()) if zero_d and view.numel() == 1 else view


class Server:
    def __init__(self, args, arena):
        self.path = args.module
        self.module = load_module(args.module)
        self.device = arena.device
        self.arena = arena
        self.model_seed = args.model_seed
        self.variant = Variant(args.dtype, args.backward, args.with_forward)
        self.timer = Timer(self.device)
        self.sizes = None
        self.model = None
        self.compiled = None
        self.sparse_outputs = {}  # grad_<w>_<part> of a sparse table's gradient: the weight's name

    def workload(self, sizes):
        if sizes != self.sizes or self.model is None:
            # The last workload's module goes before the next is built: two sets of weights never coexist.
            self.model, self.weights, self.compiled = None, [], None
            self.release_cached()
            self.module = module_at(self.path, sizes)
            self.model = self.variant.model(build_model(self.module, self.device, self.model_seed))
            inputs = draw_inputs(self.module, self.device, 0)
            self.names = forward_names(self.model, len(inputs))
            # A 0-d tensor is a one-element buffer, [1], in the arena; the module gets it as 0-d, as its own.
            self.zero_d = {n for n, x in zip(self.names, inputs) if isinstance(x, torch.Tensor) and x.dim() == 0}
            # The weights by parameter name, once per workload: every run and draw looks them up. The
            # state dict's tensors are the module's own, so a copy into them is a copy into the module.
            self.weights = [(key, weight_name(key), t) for key, t in self.model.state_dict().items()]
            sparse = sparse_weights(self.model)
            self.sparse_outputs = {f"grad_{name}_{part}": name for key, name, _ in self.weights if key in sparse
                                   for part in SPARSE_PARTS}
            self.compiled = None
            self.sizes = sizes
            inputs = None  # a full draw, made only to name the inputs: let go before the next one
            self.release_cached()
        return self.model

    # Temporaries cached by PyTorch past this many bytes go back to the device after a draw or a run: kept,
    # get_inputs()' tensors and the module's outputs (and its intermediates) would stay reserved beside the
    # arena, where the bridge needs one of them at a time and other processes on the GPU need the rest.
    # Below it the cache stays, for a small problem's speed.
    RELEASE_BYTES = 256 << 20

    def release_cached(self):
        if self.device.type == "cuda" and \
                torch.cuda.memory_reserved(self.device) - torch.cuda.memory_allocated(self.device) >= self.RELEASE_BYTES:
            torch.cuda.empty_cache()

    def sync(self):
        # The worker reads the arena as soon as it has the reply: PyTorch's work on it must be done.
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def forward_args(self, request):
        views = request["views"]
        scalars = request.get("scalars", {})
        args = []
        for name in self.names:
            if name in views:
                args.append(as_module(self.arena.view(views[name]), name in self.zero_d))
            elif name in scalars:
                args.append(scalars[name])
            else:
                raise Unmappable(f"the request names no input '{name}'")
        return args

    def params(self, request):
        views = request["views"]
        return {key: as_module(self.arena.view(views[name]), t.dim() == 0) for key, name, t in self.weights if name in views}

    def draw(self, request):
        """get_inputs() and the module's weights into the arena. The reply gives each float tensor's scale as a
        range, [mean - std, mean + std]: the evaluator draws its later trials at the problem's own scale, not
        at unit scale (a network of unit-scale weights gives outputs of thousands, where fp32's rounding alone
        passes 1e-4). A randn input's range is [-1, 1], the unit scale it had before."""
        self.workload(request.get("sizes"))
        inputs = draw_inputs(self.module, self.device, request["seed"])
        views = request["views"]
        ranges = {}

        def put(name, t, what, source):
            v = as_module(self.arena.view(views[name]), t.dim() == 0)
            if tuple(v.shape) != tuple(t.shape):
                raise Unmappable(f"{what}: the spec's shape {list(v.shape)} for this workload, {source} {list(t.shape)}")
            with torch.no_grad():  # an input get_inputs() marks requires_grad: its values, not its graph
                v.copy_(t)
            if t.is_floating_point() and t.numel() > 1:
                # Its mean and spread, not its extremes: a randn input's extremes lie at 4 or 5 sigma.
                std, mean = (float(v) for v in torch.std_mean(t.float()))
                if math.isfinite(mean) and math.isfinite(std):
                    ranges[name] = [mean - std, mean + std]

        for name, x in zip(self.names, inputs):
            if name in views and isinstance(x, torch.Tensor):
                put(name, x, f"input '{name}'", "the problem's get_inputs()")
        for _, name, t in self.weights:
            if name in views:
                put(name, t, f"weight '{name}'", "the module's")
        if self.variant.backward:
            # The gradients of the outputs, a backward's other inputs: unit normal, as a loss's would be, under
            # the draw's seed (get_inputs() drew from it just now). A grad_<name> of an input or a weight is an
            # output, and is left alone.
            known = set(self.names) | {name for _, name, _ in self.weights}
            for name, view in sorted(views.items()):
                if name.startswith("grad_") and name[5:] not in known and name not in self.sparse_outputs:
                    put(name, torch.randn(view[2], device=self.device), f"gradient '{name}'", "drawn")
        self.sync()
        inputs = x = None  # get_inputs()' tensors, copied into the arena: not kept
        self.release_cached()
        return {"ok": True, "ranges": ranges}

    def prepare(self, request):
        mode = request.get("mode", "reference")
        if mode == "compile" and not hasattr(torch, "compile"):
            return {"ok": False, "error": f"torch {torch.__version__} has no torch.compile (PyTorch 2.0 added it)"}
        if mode == "compile" and self.device.type == "cpu":
            # On the CPU Inductor writes C++ and builds it with the system's compiler (seconds per module): it needs
            # its Inductor (torch 2.x; 1.13 stops above) and a C++ compiler, which its first call finds or fails on.
            try:
                importlib.import_module("torch._inductor.config")
            except ImportError as e:
                return {"ok": False, "error": f"torch {torch.__version__} has no Inductor for the CPU: {e}"}
        if mode not in ("reference", "reference64", "eager", "compile"):
            return {"ok": False, "error": f"unknown mode {mode!r}"}
        return {"ok": True}

    def run(self, request):
        """The module on the arena's tensors, its outputs written back there. Mode "reference" calls it with
        the arena's weights (the evaluator may have drawn them); "eager" and "compile" are the baselines,
        timed as a user runs the module: its own parameters (loaded from the arena first, untimed), and for
        "compile" the module under torch.compile."""
        model = self.workload(request.get("sizes"))
        args = self.forward_args(request)
        mode = request.get("mode", "reference")
        if self.variant.backward:
            return self.run_backward(model, args, request, mode)
        time_us = None
        with torch.no_grad():
            if mode == "reference":
                params = self.params(request)
                outputs = as_outputs(call(model, params, args) if params else model(*args))
            elif mode == "reference64":
                # The same call in float64 on the same tensors: the exact answer that a float32 reference
                # only approximates. A copy of the module, dropped after: float64 weights held only now.
                params = {k: wide(v) for k, v in self.params(request).items()}
                args64 = [wide(a) for a in args]
                model64 = self.model64(model, params)
                outputs = as_outputs(call(model64, params, args64) if params else model64(*args64))
                model64 = params = args64 = None
            else:
                fn = self.baseline(model, request, mode)
                result, time_us = self.timer.time(lambda: fn(*args), request.get("flush", False))
                outputs = as_outputs(result)
        names = request["outputs"]
        if len(names) != len(outputs):
            raise Unmappable(f"the module returned {len(outputs)} outputs, the spec names {len(names)}")
        return self.reply(dict(zip(names, outputs)), names, request, time_us)

    def model64(self, model, params):
        """The module to call on float64 copies of `params`: itself when every weight is given (the usual
        case), else a float64 copy of it, so that none of its own tensors stays float32."""
        whole = set(params) >= {key for key, _, _ in self.weights}
        return model if whole else copy.deepcopy(model).double()

    def baseline(self, model, request, mode):
        """The module as a user runs it, for "eager" and "compile": its own parameters, loaded from the arena."""
        with torch.no_grad():
            for _, name, weight in self.weights:
                if name in request["views"]:
                    weight.copy_(as_module(self.arena.view(request["views"][name]), weight.dim() == 0))
        if mode != "compile":
            return model
        if self.compiled is None:
            self.compiled = torch.compile(model)
        return self.compiled

    def reply(self, results, names, request, time_us):
        """Writes results[name] into each output's view (cast to its dtype) and answers."""
        for name in names:
            o = results[name]
            v = as_module(self.arena.view(request["views"][name]), o.dim() == 0)
            if tuple(v.shape) != tuple(o.shape):
                raise Unmappable(f"output '{name}': the spec's shape {list(v.shape)}, the module's {list(o.shape)}")
            v.copy_(o)
        self.sync()
        results = o = None  # the module's outputs, copied into the arena: not kept
        self.release_cached()
        reply = {"ok": True}
        if time_us is not None and request.get("timed", False):
            reply["time_us"] = time_us
            reply["host_us"] = self.timer.host_us
        return reply

    def run_backward(self, model, args, request, mode):
        """A backward problem's call (Variant). The reference ("reference", and "reference64" alike) is
        autograd in float64 on float64 copies of the arena's inputs, weights and output gradients, each result
        rounded once into its output: the exact gradients that any order of summation only approximates, so
        a kernel whose sums run in another order (atomics) is judged by its distance from them, within the
        tolerance. "eager" and "compile" run the module as a user trains it, in the problem's dtype: the
        forward untimed, then its backward timed (with the forward too for a forward-and-backward problem).
        Each output is found by its name: grad_<input>, grad_<weight>, or a forward output (out, out0, ...)."""
        views, names = request["views"], request["outputs"]
        index = {n: i for i, n in enumerate(self.names)}
        keys = {name: key for key, name, _ in self.weights}
        grad_inputs = [n[5:] for n in names if n.startswith("grad_") and n[5:] in index]
        grad_weights = [n[5:] for n in names if n.startswith("grad_") and n[5:] in keys]
        sparse = list(dict.fromkeys(self.sparse_outputs[n] for n in names if n in self.sparse_outputs))
        grad_weights += [n for n in sparse if n not in grad_weights]
        for n in names:
            if not (n.startswith("grad_") and (n[5:] in index or n[5:] in keys)) and not re.fullmatch(r"out\d*", n) \
                    and n not in self.sparse_outputs:
                raise Unmappable(f"output '{n}' of a backward problem is neither the gradient of an input or a weight "
                                 "(grad_<name>) nor an output of the forward (out, out0, ...)")
        wide_mode = mode in ("reference", "reference64")
        cast = wide if wide_mode else (lambda t: t.detach() if isinstance(t, torch.Tensor) else t)
        args = [cast(a) for a in args]
        for n in grad_inputs:
            args[index[n]] = args[index[n]].detach().requires_grad_(True)
        if wide_mode:
            params = {k: wide(v) for k, v in self.params(request).items()}
            for n in grad_weights:
                params[keys[n]] = params[keys[n]].detach().requires_grad_(True)
            model64 = self.model64(model, params)
            fn = (lambda *a: call(model64, params, a)) if params else model64
            weight_of = params.__getitem__
        else:
            fn = self.baseline(model, request, mode)
            own = dict(model.named_parameters())
            missing = [keys[n] for n in grad_weights if keys[n] not in own]
            if missing:
                raise Unmappable(f"the module has no parameter {missing[0]!r} to give the gradient of")
            weight_of = own.__getitem__
        targets = [args[index[n]] for n in grad_inputs] + [weight_of(keys[n]) for n in grad_weights]

        def forward():
            return as_outputs(fn(*args))

        def backward(outs):
            pairs = []
            for name, o in zip(output_names(len(outs)), outs):
                if f"grad_{name}" in views and o.requires_grad:
                    pairs.append((o, cast(self.arena.view(views[f"grad_{name}"])).reshape(o.shape)))
            got = torch.autograd.grad([o for o, _ in pairs], targets, [g for _, g in pairs], allow_unused=True)
            # A sparse gradient coalesced here, timed: eager's work is the kernel's, rows deduplicated and summed.
            return [torch.zeros_like(t) if g is None else g.coalesce() if g.is_sparse else g
                    for g, t in zip(got, targets)]

        time_us = None
        timed = not wide_mode
        with torch.enable_grad():
            if timed and self.variant.with_forward:
                def step():
                    o = forward()
                    return o, backward(o)
                (outs, grads), time_us = self.timer.time(step, request.get("flush", False))
            elif timed:
                outs = forward()
                grads, time_us = self.timer.time(lambda: backward(outs), request.get("flush", False))
            else:
                outs = forward()
                grads = backward(outs)
        results = {name: o.detach() for name, o in zip(output_names(len(outs)), outs)}
        for n, g in zip(grad_inputs + grad_weights, grads):
            if n in sparse:
                results.update({f"grad_{n}_{part}": t for part, t in sparse_parts(g, n, views).items()})
            else:
                results[f"grad_{n}"] = g
        missing = [n for n in names if n not in results]
        if missing:
            raise Unmappable(f"the spec names output '{missing[0]}', the module returned {len(outs)} outputs")
        outs = grads = targets = args = fn = None
        return self.reply(results, names, request, time_us)


class Client:
    """One line-protocol peer of serve: the worker that started this bridge (stdin and stdout), or, in a
    bridge the workers of a GPU share, one worker's socket. Lines are cut from what arrives, so that one
    slow or dead peer never blocks the others' requests."""

    def __init__(self, read_fd, write_fd):
        self.read_fd, self.write_fd = read_fd, write_fd
        self.pending = b""

    def read_lines(self):
        """The complete lines that arrived; None at end of input (the peer is gone)."""
        try:
            data = os.read(self.read_fd, 1 << 16)
        except OSError:
            data = b""
        if not data:
            return None
        self.pending += data
        *lines, self.pending = self.pending.split(b"\n")
        return lines

    def send(self, reply):
        """False when the peer is gone (a worker killed while it waited)."""
        view = memoryview((json.dumps(reply) + "\n").encode())
        try:
            while view:
                view = view[os.write(self.write_fd, view):]
        except OSError:
            return False
        return True

    def close(self):
        for fd in {self.read_fd, self.write_fd}:
            if fd > 2:
                os.close(fd)


def dtype_hint(e, server):
    """Why a cast module fails where PyTorch has no kernel for its dtype, as torch 1.13 has none in fp16 for
    most operators on the CPU."""
    if server.variant.dtype is not None and "not implemented for" in str(e):
        return (f" (this PyTorch {torch.__version__} has no {server.variant.dtype} kernel for it on "
                f"{server.device.type}: --dtype {'fp16' if server.variant.dtype == torch.float16 else 'bf16'} "
                "needs a device where it has one)")
    return ""


def serve(args):
    """Answers the worker that started it on stdin and stdout; or, with --control-fd, the workers of one
    GPU (or CPU) at once, each on a socket the host sends over that control socket with SCM_RIGHTS, until
    the host closes stdin. A shared bridge's arena holds one evaluation's blocks at a time, so it has one
    holder: "acquire" waits until the arena is free, "yield" frees it, and so does the holder's end (a
    worker killed mid-evaluation); "draw", "run" and "release" are the holder's alone."""
    import select
    import socket
    from collections import deque

    arena = Arena(args)
    server = Server(args, arena)
    greeting = {"ok": True, "torch": torch.__version__}
    if arena.ipc_handle:
        greeting["arena_ipc"] = arena.ipc_handle
    print(json.dumps(greeting), flush=True)
    shared = args.control_fd >= 0
    control = socket.socket(fileno=args.control_fd) if shared else None
    clients = {} if shared else {0: Client(0, 1)}
    holder, waiting = None, deque()

    def grant_next():
        nonlocal holder
        holder = None
        while waiting and holder is None:
            client = waiting.popleft()
            if client.read_fd in clients and client.send({"ok": True}):
                holder = client

    def drop(client):
        clients.pop(client.read_fd, None)
        if client in waiting:
            waiting.remove(client)
        if holder is client:
            grant_next()
        client.close()

    def answer(client, request):
        """The reply to `request`, or None where the reply waits (an acquire while another holds the arena)."""
        nonlocal holder
        op = request.get("op")
        if op == "acquire":
            if holder is None or holder is client:
                holder = client
                return {"ok": True}
            waiting.append(client)
            return None
        if op == "yield":
            if holder is client:
                grant_next()
            return {"ok": True}
        if shared and op in ("draw", "run", "release") and holder is not client:
            return {"ok": False, "error": f"'{op}' from a worker that does not hold the arena (acquire first)"}
        if op == "draw":
            return server.draw(request)
        if op == "run":
            return server.run(request)
        if op == "prepare":
            return server.prepare(request)
        if op == "release":
            arena.release(request.get("from", 0))
            return {"ok": True}
        return {"ok": False, "error": f"unknown request {op!r}"}

    running = True
    while running and (shared or clients):
        watched = list(clients) + ([control.fileno(), 0] if shared else [])
        ready, _, _ = select.select(watched, [], [])
        for fd in ready:
            if shared and fd == 0:  # the host: its end of input ends the bridge
                if not os.read(0, 4096):
                    running = False
                continue
            if shared and fd == control.fileno():
                try:
                    _, fds, _, _ = socket.recv_fds(control, 16, 8)
                except OSError:
                    fds = []
                for new in fds:
                    clients[new] = Client(new, new)
                continue
            client = clients.get(fd)
            if client is None:
                continue
            lines = client.read_lines()
            if lines is None:
                drop(client)
                continue
            for line in lines:
                if not line.strip():
                    continue
                try:
                    request = json.loads(line)
                    if request.get("op") == "quit":
                        running = False
                        break
                    reply = answer(client, request)
                except Exception as e:  # the reference's own failure, told to KernelEvolve, which blames the reference
                    reply = {"ok": False, "error": f"{type(e).__name__}: {e}{dtype_hint(e, server)}",
                             "trace": traceback.format_exc()[-2000:]}
                if reply is not None and not client.send(reply):
                    drop(client)
                    break
    # Out at once, without Python's and PyTorch's teardown: while this process lives, the arena it opened
    # (the worker's GPU memory, 2 P) stays allocated after the worker has gone, and a confined worker cannot
    # wait for it. On the lent H100 a run that started right after an 8 GB one saw 16.8 GB still in use.
    sys.stdout.flush()
    os._exit(0)


def main():
    import argparse
    parser = argparse.ArgumentParser(prog="kernelevolve-pytorch-bridge")
    parser.add_argument("mode", choices=["describe", "serve"])
    parser.add_argument("--module", default="")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--sizes", default="")
    parser.add_argument("--arena-fd", type=int, default=-1)
    parser.add_argument("--arena-bytes", type=int, default=0)
    parser.add_argument("--arena-ipc", default="")
    parser.add_argument("--arena-alloc", action="store_true")
    parser.add_argument("--control-fd", type=int, default=-1)
    parser.add_argument("--model-seed", type=int, default=0)
    parser.add_argument("--dtype", choices=["", "bf16", "f16"], default="")
    parser.add_argument("--backward", action="store_true")
    parser.add_argument("--with-forward", action="store_true")
    parser.add_argument("--precision", choices=["as-run", "strict"], default="strict")
    args = parser.parse_args()
    torch.set_num_threads(max(1, int(os.environ.get("KE_TORCH_THREADS", "1"))))
    global PRECISION
    PRECISION = args.precision
    apply_precision()
    if args.mode == "describe":
        try:
            variant = Variant(args.dtype, args.backward, args.with_forward)
            print(json.dumps(describe(args.module, args.device, json.loads(args.sizes) if args.sizes else None,
                                      variant)))
        except Unmappable as e:
            print(json.dumps({"error": str(e)}))
        except Exception as e:
            print(json.dumps({"error": f"the module failed: {type(e).__name__}: {e}",
                              "trace": traceback.format_exc()[-2000:]}))
        return
    serve(args)


if __name__ == "__main__":
    main()
