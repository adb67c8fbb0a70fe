# The model optimizer's capture (`kernelevolve optimize`, issue 30): the model file loaded and sized up, then
# its forward captured as one graph with shapes, dtypes and lifted weights: torch.export where this PyTorch
# has it, else torch.fx's symbolic trace (what torch 1.13 has). Each node's value is recorded (shape, dtype,
# and the scale a region's get_inputs() draws at), the graph's own output checked against the model's, and
# values that are not tensors (x.size(0)) folded into constants, so that every edge between regions is a
# tensor. Read with cut.py, profile.py and driver.py, the other modules of the ke_optimize package.
import contextlib
import importlib.util
import os
import re
import sys
import time
import warnings

import torch
import torch.fx


class Refusal(Exception):
    """A model this optimizer cannot take, with why (exit 2); `kind` says which (bad_model, untraceable,
    too_big, out_dir, device)."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind


DTYPES = {
    torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.float64: "f64",
    torch.int64: "i64", torch.int32: "i32", torch.int8: "i8", torch.uint8: "u8", torch.bool: "bool",
}
MODEL_SEED, INPUTS_SEED = 0, 1  # the model is built, and its inputs drawn, under these seeds (the manifest says so)
MAX_NODES = 20000  # a graph larger than this is refused: its regions' timing alone would take hours


def dtype_name(dtype):
    return DTYPES.get(dtype, str(dtype).replace("torch.", ""))


class Tail:
    """A text stream written through to `stream`, its last `keep` characters kept: what a model file printed."""

    def __init__(self, stream, keep=4000):
        self.stream, self.keep, self.text = stream, keep, ""

    def write(self, text):
        self.text = (self.text + text)[-self.keep:]
        return self.stream.write(text)

    def flush(self):
        self.stream.flush()

    def __getattr__(self, name):
        return getattr(self.stream, name)

    def last_lines(self, n=3):
        """'; the last it printed: A / B / C', or nothing where it printed nothing."""
        lines = [line.strip() for line in self.text.splitlines() if line.strip()]
        return f"; the last it printed: {' / '.join(lines[-n:])[-600:]}" if lines else ""


def exit_call(e):
    """A SystemExit as the call that raised it, with the process's exit status: sys.exit(3), sys.exit() (status 0),
    sys.exit('usage: ...') (status 1)."""
    if e.code is None:
        return "sys.exit(), status 0"
    if isinstance(e.code, int):
        return f"sys.exit({e.code}), status {e.code}"
    return f"sys.exit({str(e.code)[:200]!r}), status 1"


def load_model_file(path):
    if not os.path.isfile(path):
        raise Refusal("bad_model", f"{path}: no such file")
    directory = os.path.dirname(os.path.abspath(path))
    if directory not in sys.path:
        sys.path.insert(0, directory)
    spec = importlib.util.spec_from_file_location("kernelevolve_optimized_model", path)
    if spec is None or spec.loader is None:
        raise Refusal("bad_model", f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    # The file's import-time code runs here, in the optimizer's own Python, unconfined (docs/optimize.md says so): what
    # it prints goes to stderr, its last lines kept to say why where it ends the process.
    printed = Tail(sys.stderr)
    out, err = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = printed
    try:
        spec.loader.exec_module(module)
    except SystemExit as e:
        raise Refusal("bad_model", f"{path} exited at import ({exit_call(e)}) before the optimizer could use it: a model "
                                   "file is imported, its code run, in the optimizer's own Python; it defines Model, "
                                   "get_inputs() and get_init_inputs() and runs a script's own work only under "
                                   "`if __name__ == \"__main__\":`" + printed.last_lines())
    except Exception as e:
        raise Refusal("bad_model", f"{path} does not import: {type(e).__name__}: {e}")
    finally:
        sys.stdout, sys.stderr = out, err
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, name):
            raise Refusal("bad_model", f"{path} defines no {name}: a model in KernelBench's format has "
                                       "class Model(nn.Module), get_inputs() and get_init_inputs()")
    return module


FACTORY_NAMES = ("empty", "zeros", "ones", "full", "rand", "randn", "randint", "randperm", "arange", "linspace",
                 "logspace", "eye", "tensor", "as_tensor", "normal", "empty_strided")


class OnMeta(torch.overrides.TorchFunctionMode):
    """Tensor factories without a device make meta tensors: the model's size is known without allocating it."""

    factories = {f for f in (getattr(torch, n, None) for n in FACTORY_NAMES) if f is not None}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        try:
            factory = func in self.factories
        except TypeError:
            factory = False
        if factory and kwargs.get("device") is None:
            kwargs = dict(kwargs, device="meta")
        return func(*args, **kwargs)


def tensors_in(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from tensors_in(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from tensors_in(v)


def gib(n):
    return f"{n / 2**30:.1f} GiB"


def available_bytes(device):
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return free
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return None


def check_size(module, device):
    """Refuses a model whose weights and inputs would take more than half the device's free memory, sized on
    PyTorch's meta device before anything is allocated. A model that cannot be built on meta (a constructor
    that reads values) is not sized: the returned note says so."""
    try:
        with OnMeta():
            torch.manual_seed(MODEL_SEED)
            model = module.Model(*module.get_init_inputs())
            inputs = list(module.get_inputs())
    except Exception as e:
        return f"not sized before building it (on PyTorch's meta device: {type(e).__name__}: {first_line(e)})"
    weights = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    data = sum(t.numel() * t.element_size() for t in tensors_in(inputs))
    free = available_bytes(device)
    if free is not None and 2 * (weights + data) > free:
        raise Refusal("too_big", f"the model is too big for {device}: its weights take {gib(weights)} and its inputs "
                                 f"{gib(data)}, and {gib(free)} is free there (it needs twice its size: the model "
                                 "and one region's copy)")
    return None


def first_line(e):
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def build(module, device):
    """The model on `device` in eval mode, and its inputs, under the manifest's seeds."""
    try:
        torch.manual_seed(MODEL_SEED)
        model = module.Model(*module.get_init_inputs())
        if not isinstance(model, torch.nn.Module):
            raise Refusal("bad_model", f"Model(*get_init_inputs()) is a {type(model).__name__}, not an nn.Module")
        model = model.to(device).eval()
        torch.manual_seed(INPUTS_SEED)
        inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
    except Refusal:
        raise
    except Exception as e:
        raise Refusal("bad_model", f"building the model and its inputs failed: {type(e).__name__}: {first_line(e)}")
    for i, x in enumerate(inputs):
        if not isinstance(x, torch.Tensor):
            raise Refusal("bad_model", f"get_inputs()[{i}] is a {type(x).__name__}: the optimizer takes tensor "
                                       "inputs only (a constant belongs in get_init_inputs())")
    try:
        with torch.no_grad():
            first = list(tensors_in(model(*inputs)))
            again = list(tensors_in(model(*inputs)))
    except Exception as e:
        half = "not implemented for 'Half'" in str(e) or "not implemented for 'BFloat16'" in str(e)
        raise Refusal("bad_model", f"the model's forward fails on get_inputs(): {type(e).__name__}: {first_line(e)}" + (
            f" (this PyTorch, {torch.__version__}, has no kernel on {device} for an operator in that dtype: such a "
            "model needs a device that has them, as a GPU has fp16's)" if half else ""))
    if len(first) != len(again) or not all(close(a, b) for a, b in zip(first, again)):
        raise Refusal("bad_model", "the model's forward is not a function of its inputs: two calls on the same inputs "
                                   "give different outputs (state kept between calls, such as an attribute assigned "
                                   "in forward, or randomness), which no region or kernel can reproduce")
    return model, inputs


# Modules not traced through: a recurrent network's forward is a loop over steps in C++ (one call, its weights as a
# flat list). Each stays one node, a region of its own, written as its constructor.
OPAQUE_MODULES = (torch.nn.RNNBase,)


# What a proxy answers from the real tensor it stands for, not with a node: its metadata, fixed at the traced shapes as
# a region is. A branch on these (`if x.dim() == 3`, torch.nn's own input checks) is then plain Python; a branch on a
# tensor's values still fails the trace, as it must.
METADATA_ATTRIBUTES = {"shape", "ndim", "dtype", "device", "is_cuda", "layout", "is_sparse", "is_quantized", "is_meta",
                       "requires_grad", "is_nested"}
METADATA_METHODS = {"dim", "size", "numel", "ndimension", "nelement", "stride", "element_size", "is_contiguous",
                    "get_device", "is_floating_point", "is_complex"}
UNKNOWN = object()  # a node whose real value could not be computed beside the trace


def has_unknown(value):
    if value is UNKNOWN:
        return True
    if isinstance(value, (tuple, list)):
        return any(has_unknown(v) for v in value)
    if isinstance(value, dict):
        return any(has_unknown(v) for v in value.values())
    return False


class ShadowProxy(torch.fx.Proxy):
    def real(self):
        return self.tracer.values.get(self.node, UNKNOWN)

    def __getattr__(self, k):
        if k in METADATA_ATTRIBUTES or k in METADATA_METHODS:
            value = self.real()
            if isinstance(value, torch.Tensor):
                return getattr(value, k)
        return ShadowAttribute(self, k)

    def __len__(self):
        value = self.real()
        if value is UNKNOWN:
            return super().__len__()
        return len(value)

    def __iter__(self):
        # `a, b = self.lstm(x)`: as many items as the real value has. torch 1.13's own way reads the caller's
        # bytecode at f_lasti // 2, which Python 3.11's inline caches break (an IndexError).
        return (self[i] for i in range(len(self)))


class ShadowAttribute(torch.fx.proxy.Attribute, ShadowProxy):
    pass


class Tracer(torch.fx.Tracer):
    """A symbolic trace with the real values computed beside it, op by op, on the model's own inputs: a proxy
    answers its tensor's metadata (shape, dim(), device) with the real value (ShadowProxy). It traces through
    torch.nn's modules too (nn.Linear becomes F.linear on its weight and bias as get_attr nodes): a region is then
    written as functions of its weights, whatever modules held them. A torch.nn module whose forward the trace
    still cannot follow stays one node (lower_modules() writes the common ones as functions); a failure in the
    user's own code is the model's, and is raised."""

    def __init__(self, inputs):
        super().__init__()
        self.inputs = list(inputs)
        self.values = {}
        self.placeholders = 0
        self.evaluating = False  # computing a real value: modules and their weights are the real ones, not traced
        self.autocast = {}  # node -> (device type, dtype) of the torch.autocast its real value was computed under

    def is_leaf_module(self, m, qualname):
        return isinstance(m, OPAQUE_MODULES)

    def proxy(self, node):
        return ShadowProxy(node, self)

    def create_proxy(self, kind, target, args, kwargs, name=None, type_expr=None, proxy_factory_fn=None):
        proxy = super().create_proxy(kind, target, args, kwargs, name, type_expr, proxy_factory_fn)
        self.values[proxy.node] = self.evaluate(kind, target, args, kwargs)
        state = autocast_state()
        if state is not None and kind in ("call_function", "call_method", "call_module"):
            self.autocast[proxy.node] = state
        return proxy

    def evaluate(self, kind, target, args, kwargs):
        def real(a):
            return self.values.get(a.node, UNKNOWN) if isinstance(a, torch.fx.Proxy) else a
        args = torch.fx.node.map_aggregate(args, real)
        kwargs = torch.fx.node.map_aggregate(kwargs, real)
        if kind == "placeholder":
            i, self.placeholders = self.placeholders, self.placeholders + 1
            return self.inputs[i] if i < len(self.inputs) else (args[0] if args else UNKNOWN)
        if has_unknown(args) or has_unknown(kwargs):
            return UNKNOWN
        self.evaluating = True
        try:
            with torch.no_grad():
                if kind == "get_attr":
                    value = self.root
                    for part in target.split("."):
                        value = getattr(value, part)
                    return value
                if kind == "call_function":
                    return target(*args, **kwargs)
                if kind == "call_method":
                    return getattr(args[0], target)(*args[1:], **kwargs)
                if kind == "call_module":
                    return self.root.get_submodule(target)(*args, **kwargs)
        except Exception:
            return UNKNOWN
        finally:
            self.evaluating = False
        return UNKNOWN

    # While a trace runs, torch.fx has every module call and module attribute go through these two: while a real value
    # is computed, they are the module's own.
    def getattr(self, attr, attr_val, parameter_proxy_cache):
        if self.evaluating:
            return attr_val
        return super().getattr(attr, attr_val, parameter_proxy_cache)

    def call_module(self, m, forward, args, kwargs):
        if self.evaluating:
            return forward(*args, **kwargs)
        if isinstance(m, OPAQUE_MODULES) or not type(m).__module__.startswith("torch.nn."):
            return super().call_module(m, forward, args, kwargs)
        try:
            return super().call_module(m, forward, args, kwargs)
        except Exception:  # what it had traced is left without users: dead code, removed
            return self.create_proxy("call_module", self.path_of_module(m), args, kwargs)


AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def autocast_state():
    """(device type, dtype) of the torch.autocast in force here, or None."""
    if torch.is_autocast_cpu_enabled():
        return "cpu", torch.get_autocast_cpu_dtype()
    if torch.is_autocast_enabled():
        return "cuda", torch.get_autocast_gpu_dtype()
    return None


class Autocast(torch.nn.Module):
    """The model's forward under torch.autocast (optimize's --autocast): how torch.export sees the autocast a user
    wraps the model's call in (export ignores one around its own call). Its state dict is the model's under `model.`."""

    def __init__(self, model, device_type, dtype):
        super().__init__()
        self.model, self.device_type, self.dtype = model, device_type, dtype

    def forward(self, *args):
        with torch.autocast(self.device_type, dtype=self.dtype):
            return self.model(*args)


def cast_floats(value, dtype):
    """`value` with each floating-point tensor in it (float64 aside, which autocast leaves) cast to `dtype`."""
    return torch.fx.node.map_aggregate(value, lambda v: v.to(dtype) if isinstance(v, torch.Tensor) and
                                       v.is_floating_point() and v.dtype != torch.float64 else v)


def same_values(a, b):
    """Whether two nodes' values (tensors, or tuples of them) agree in dtype and, within rounding, in value."""
    a, b = list(tensors_in(a)), list(tensors_in(b))
    return len(a) == len(b) and all(x.shape == y.shape and x.dtype == y.dtype and (
        torch.allclose(x.float(), y.float(), rtol=1e-3, atol=1e-5, equal_nan=True) if x.is_floating_point()
        else torch.equal(x, y)) for x, y in zip(a, b))


def explicit_casts(gm, tracer):
    """torch.autocast written into the graph: a trace records F.linear, not the casts autocast made around it, and a
    region's file, its kernel and the optimized model must compute in the dtypes the model did. For each operator
    whose value was computed under autocast, the cast that reproduces it outside autocast is found by trying them
    (none: the operator ran on its inputs as they were; autocast's dtype: a matrix product's; float32: what autocast
    keeps in full precision), and its floating-point inputs are cast so in the graph (`x.to(torch.bfloat16)`). An
    operator no cast reproduces (a module kept whole, whose weights autocast casts inside it) is refused, by name.
    Returns the capture's note on it."""
    graph = gm.graph
    casts, counted = {}, {}

    def real(a):
        return tracer.values.get(a, UNKNOWN) if isinstance(a, torch.fx.Node) else a

    def run(node, args, kwargs):
        if node.op == "call_function":
            return node.target(*args, **kwargs)
        if node.op == "call_method":
            return getattr(args[0], node.target)(*args[1:], **kwargs)
        return tracer.root.get_submodule(node.target)(*args, **kwargs)

    for node, (device_type, dtype) in list(tracer.autocast.items()):
        expected = tracer.values.get(node, UNKNOWN)
        args, kwargs = torch.fx.node.map_aggregate(node.args, real), torch.fx.node.map_aggregate(node.kwargs, real)
        if has_unknown(args) or has_unknown(kwargs) or has_unknown(expected) or \
                not any(t.is_floating_point() for t in tensors_in(expected)):
            continue
        chosen = UNKNOWN
        with torch.no_grad(), torch.autocast(device_type, enabled=False):
            for candidate in (None, dtype, torch.float32):
                try:
                    got = run(node, *(cast_floats((args, kwargs), candidate) if candidate else (args, kwargs)))
                except Exception:
                    continue
                if same_values(got, expected):
                    chosen = candidate
                    break
        if chosen is UNKNOWN:
            raise Refusal("untraceable", (
                f"node {node.name} ({op_name(node)}) runs under torch.autocast({device_type!r}, dtype="
                f"{dtype_name(dtype)}), and no cast of its inputs (as they are, to {dtype_name(dtype)}, to f32) "
                "reproduces what it computes outside autocast" + (
                    ": a module kept whole, whose weights autocast casts inside it" if node.op == "call_module"
                    else "") + "; its region cannot be written in the dtypes the model computes in"))
        if chosen is None:
            continue
        for a in node.all_input_nodes:
            value = tracer.values.get(a, UNKNOWN)
            if not isinstance(value, torch.Tensor) or not value.is_floating_point() or value.dtype in (
                    chosen, torch.float64):
                continue
            if (a, chosen) not in casts:
                with graph.inserting_before(node):  # its first reader: the graph is walked in order
                    cast = graph.call_method("to", (a, chosen))
                tracer.values[cast] = value.to(chosen)
                casts[(a, chosen)] = cast
            node.replace_input_with(a, casts[(a, chosen)])
        counted[dtype_name(chosen)] = counted.get(dtype_name(chosen), 0) + 1
    graph.lint()
    gm.recompile()
    said = ", ".join(f"{n} in {d}" for d, n in sorted(counted.items())) or "none"
    return (f"torch.autocast written out: {len(tracer.autocast)} operator(s) ran under it; casts inserted for "
            f"{said} operator(s) ({len(casts)} cast(s)), so that each region computes in the dtypes autocast gave it")


def lower_modules(gm):
    """BatchNorm left as a module (its forward checks input.dim()) written as F.batch_norm on its weights, in eval
    mode as the model runs, so that it fuses with the convolution before it like any normalization."""
    graph = gm.graph
    for node in list(graph.nodes):
        if node.op != "call_module":
            continue
        m = gm.get_submodule(node.target)
        if not isinstance(m, torch.nn.modules.batchnorm._BatchNorm) or len(node.args) != 1 or node.kwargs:
            continue
        with graph.inserting_before(node):
            def attr(name):
                return graph.get_attr(f"{node.target}.{name}") if getattr(m, name, None) is not None else None
            stats = m.track_running_stats and m.running_mean is not None
            new = graph.call_function(torch.nn.functional.batch_norm, (
                node.args[0], attr("running_mean") if stats else None, attr("running_var") if stats else None), {
                "weight": attr("weight"), "bias": attr("bias"), "training": not stats, "momentum": 0.0,
                "eps": m.eps})
        node.replace_all_uses_with(new)
        graph.erase_node(node)
    # Not graph.eliminate_dead_code(): torch 1.13's counts `self.hidden.copy_(h0)`, whose result nothing uses, as dead,
    # and the graph would read the tensor as the trace left it. make_functional() decides about every write.
    for node in reversed(list(graph.nodes)):
        if not node.users and node.op not in ("placeholder", "output") and not node.is_impure() and \
                not writes_in_place(node):
            graph.erase_node(node)
    graph.lint()
    gm.recompile()


def write_kind(node):
    """How the node writes into its input in place, if it does: "inplace" (`relu(x, inplace=True)`), "method"
    (`x.add_(y)`), "overload" (aten's `add_.Tensor`) or "function" (`torch.relu_`); else None."""
    t = node.target
    if node.kwargs.get("inplace") is True:
        return "inplace"
    if node.op == "call_method" and t.endswith("_") and not t.startswith("_"):
        return "method"
    if node.op == "call_function" and isinstance(t, torch._ops.OpOverload) and \
            any(a.alias_info is not None and a.alias_info.is_write for a in t._schema.arguments):
        return "overload"
    if node.op == "call_function" and getattr(t, "__name__", "").endswith("_") and getattr(torch, t.__name__, None) is t:
        return "function"
    return None


def writes_in_place(node):
    return write_kind(node) is not None


class Capture:
    """A model's forward as one graph: `gm` (its root holds the weights under each get_attr target), the
    weights' names in the model (`fqn`, target -> state-dict key) and kinds (`kind`: parameter, buffer, or constant:
    a tensor the forward makes that the model does not hold),
    the graph's inputs and output structure, each node's recorded value (`meta`), and how it was captured."""

    def __init__(self, gm, fqn, kind, method, notes):
        self.gm, self.fqn, self.kind, self.method, self.notes = gm, fqn, kind, method, notes
        self.meta = {}
        self.output_names = []
        self.written = []  # the model's own tensors the trace saw written in place (torch.fx's trace runs the writes)


DATA_DEPENDENT = ("symbolically traced variables cannot be used as inputs to control flow",
                  "data-dependent", "data dependent", "GuardOnDataDependentSymNode",
                  "Dynamic control flow is not supported")  # torch.export's (Dynamo's) words for it


def untraceable(how, e):
    text = str(e)
    why = "its forward branches on a tensor's values (data-dependent control flow), which a graph cannot hold" \
        if any(s in text for s in DATA_DEPENDENT) else f"{type(e).__name__}: {first_line(e)}"
    assigns = "Mutating module attribute" in text  # torch.export's refusal of `self.hidden = ...` in forward
    if assigns:
        why = (f"its forward assigns an attribute of the model, state one call leaves for the next, which a graph "
               f"cannot hold ({first_line(e)})")
    refusal = Refusal("untraceable", f"the model cannot be captured as one graph by {how}: {why}")
    refusal.assigns_attribute = assigns
    return refusal


@contextlib.contextmanager
def attributes_kept(model):
    """Every module's attributes as they were before, after a trace: a forward that assigns an attribute
    (`self.hidden = ...`) assigns a proxy while it is traced, and the model must still run afterwards."""
    saved = [(m, dict(m.__dict__), dict(m._parameters), dict(m._buffers), dict(m._modules)) for m in model.modules()]
    tensors = [(f"{prefix}.{k}" if prefix else k, t, t._version) for prefix, m in model.named_modules()
               for k, t in list(vars(m).items()) + list(m._parameters.items()) + list(m._buffers.items())
               if isinstance(t, torch.Tensor)]
    written = []
    try:
        yield written
        written.extend(name for name, t, version in tensors if t._version != version)
    finally:
        for m, attributes, parameters, buffers, modules in saved:
            m.__dict__.clear()
            m.__dict__.update(attributes)
            for held, kept in ((m._parameters, parameters), (m._buffers, buffers), (m._modules, modules)):
                held.clear()
                held.update(kept)


def defaulted(model, inputs):
    """forward's parameters that get_inputs() leaves to their defaults (`h0=None`): traced as those values, so that
    `if h0 is None` is plain Python."""
    import inspect
    try:
        parameters = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        return None
    given = parameters[len(inputs):]
    return {p.name: p.default for p in given if p.default is not inspect.Parameter.empty} or None


def capture_fx(model, inputs):
    try:
        with attributes_kept(model) as written:
            tracer = Tracer(inputs)
            graph = tracer.trace(model, concrete_args=defaulted(model, inputs))
            # Before the model's attributes are put back: the trace left its constants there (_tensor_constant0).
            gm = torch.fx.GraphModule(model, graph)
    except Exception as e:
        raise untraceable("torch.fx.symbolic_trace", e)
    notes = []
    if tracer.autocast:
        notes.append(explicit_casts(gm, tracer))
    for node in gm.graph.nodes:
        owner_path, _, name = node.target.rpartition(".") if node.op == "get_attr" else ("", "", "")
        if name and isinstance(getattr(gm.get_submodule(owner_path), name, None), torch.fx.Proxy):
            # The forward assigned the attribute (`self.hidden = tanh(...)`), so the copy above took the proxy it left;
            # the graph reads what the model holds.
            setattr(gm.get_submodule(owner_path), name, getattr(model.get_submodule(owner_path), name))
    lower_modules(gm)
    fqn, kind = {}, {}
    params, buffers = dict(model.named_parameters()), dict(model.named_buffers())
    for node in gm.graph.nodes:
        if node.op == "get_attr":  # a weight, or a tensor the forward made from constants (torch.fx's _tensor_constant)
            fqn[node.target] = node.target
            kind[node.target] = "parameter" if node.target in params else "buffer" if node.target in buffers \
                else "constant"
    capture = Capture(gm, fqn, kind, "torch.fx.symbolic_trace (through torch.nn's modules), values by running it",
                      notes)
    capture.written = list(written)  # make_functional() refuses those it cannot show overwritten before any read
    return capture


def capture_export(model, inputs, autocast=None):
    """torch.export's graph with its lifted weights made get_attr nodes again, on a root of their own. Under
    `autocast` (device type, dtype: optimize's --autocast), the model's forward is exported inside it (Autocast):
    torch.export ignores an autocast around its own call. An autocast in the graph (a forward that enters one, which
    export keeps as a higher-order operator around its part) is written out as casts by decomposing the program
    (with no decompositions but those: linear stays linear)."""
    prefix, options = "", {}
    if autocast is not None:
        model, prefix = Autocast(model, *autocast), "model."
        import inspect
        if "strict" in inspect.signature(torch.export.export).parameters:
            # Non-strict: Dynamo, strict export's tracer, looks the wrapped model's module up by name, and a model
            # file is imported under a name of ours that no import finds.
            options = {"strict": False}
    try:
        program = torch.export.export(model, tuple(inputs), **options)
    except Exception as e:
        raise untraceable("torch.export", e)
    notes = []
    if any("autocast" in str(n.target) for n in program.graph.nodes if n.op == "call_function"):
        try:
            program = program.run_decompositions({})
        except Exception as e:
            raise Refusal("untraceable", "the model's forward runs under torch.autocast, and torch.export's program "
                                         f"does not write its casts out ({type(e).__name__}: {first_line(e)})")
        left = [n.name for n in program.graph.nodes if n.op == "call_function" and "autocast" in str(n.target)]
        if left:
            raise Refusal("untraceable", f"torch.export's program keeps torch.autocast as an operator ({left[0]}): "
                                         "its regions cannot be written in the dtypes the model computes in")
        casts = sum(1 for n in program.graph.nodes if n.op == "call_function" and "_to_copy" in str(n.target))
        notes.append(f"torch.autocast written out: torch.export's program decomposed, its casts explicit ({casts} "
                     "cast(s)), so that each region computes in the dtypes autocast gave it")
    gm = program.graph_module
    root = torch.nn.Module()
    fqn, kind = {}, {}
    values = dict(program.state_dict)
    values.update(getattr(program, "constants", {}) or {})
    by_placeholder = {}
    for spec in program.graph_signature.input_specs:
        kind_name = str(spec.kind).split(".")[-1]
        if kind_name == "USER_INPUT":
            continue
        if kind_name not in ("PARAMETER", "BUFFER", "CONSTANT_TENSOR"):
            raise Refusal("untraceable", f"torch.export lifted an input of kind {kind_name} ({spec.target}), which "
                                         "the optimizer does not handle")
        target = spec.target[len(prefix):] if spec.target.startswith(prefix) else spec.target
        attr = re.sub(r"\W", "_", target)
        value = values[spec.target]
        if kind_name == "PARAMETER":
            root.register_parameter(attr, torch.nn.Parameter(value.detach(), requires_grad=False))
        else:
            root.register_buffer(attr, value.detach())
        fqn[attr] = target
        kind[attr] = {"PARAMETER": "parameter", "BUFFER": "buffer"}.get(kind_name, "constant")
        by_placeholder[spec.arg.name] = attr
    graph = gm.graph
    # Plain code for the graph as it now is (its weights no longer inputs), not the program's pytree calling convention.
    if hasattr(torch.fx.graph, "CodeGen"):
        graph.set_codegen(torch.fx.graph.CodeGen())
    first = next(n for n in graph.nodes if n.op != "placeholder")
    for node in list(graph.nodes):
        if node.op == "placeholder" and node.name in by_placeholder:
            # The graph's module is still export's, without these attributes: torch.fx warns; the root made above has them.
            with graph.inserting_before(first), warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                attr = graph.get_attr(by_placeholder[node.name])
            node.replace_all_uses_with(attr)
            graph.erase_node(node)
    # Export's output is a flat tuple; the model's structure is restored from its own result.
    return Capture(torch.fx.GraphModule(root, graph), fqn, kind,
                   "torch.export (weights lifted), values by running its graph", notes)


def is_view_of_something(node):
    return node.op in ("call_method", "call_function") and op_name(node) in VIEW_OPS and op_name(node) != "contiguous"


def op_name(node):
    """A node's operator as a short name: linear, layer_norm, add, view, addmm (aten's, overload dropped)."""
    t = node.target
    if node.op == "call_module":
        return type(node.graph.owning_module.get_submodule(t)).__name__
    if node.op == "call_method":
        name = t
    elif isinstance(t, torch._ops.OpOverload):
        name = t._schema.name.split("::")[-1]
    elif isinstance(t, torch._ops.OpOverloadPacket):
        name = str(t).split(".")[-1]
    else:
        name = getattr(t, "__name__", str(t))
    name = name.lstrip("_") if name not in ("__getitem__",) else "getitem"
    return {"iadd": "add", "isub": "sub", "imul": "mul", "itruediv": "truediv"}.get(name, name)


# Operators that compute nothing (views, and what is the identity in eval mode): a region of these alone is skipped.
VIEW_OPS = {"view", "reshape", "permute", "transpose", "t", "flatten", "unflatten", "squeeze", "unsqueeze",
            "expand", "expand_as", "getitem", "narrow", "select", "slice", "chunk", "split", "unbind", "view_as",
            "reshape_as", "movedim", "detach", "alias", "split_with_sizes", "unsafe_view", "as_strided",
            "dropout", "identity", "contiguous"}


def target_text(node):
    """The node's operator, fully named, for the region's hash: stable across runs and processes."""
    t = node.target
    if node.op == "call_module":
        m = node.graph.owning_module.get_submodule(t)
        return f"module:{type(m).__module__}.{type(m).__qualname__}:{m!r}"
    if node.op == "call_method":
        return f"method:{t}"
    if isinstance(t, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return f"op:{t}"
    return f"function:{getattr(t, '__module__', '')}.{getattr(t, '__qualname__', getattr(t, '__name__', str(t)))}"


def make_functional(capture):
    """In-place operators written out of place, so that a region neither changes its inputs (a kernel's
    inputs are read-only) nor depends on another's writes: `relu(x, inplace=True)` and `x.add_(y)` become
    their out-of-place forms, and what used the mutated tensor afterwards uses the result. A write into a
    view, a graph input or a weight changes something the graph does not hold as a value: refused."""
    graph = capture.gm.graph
    order = {n: i for i, n in enumerate(graph.nodes)}
    overwritten = set()
    for node in list(graph.nodes):
        if node.op not in ("call_function", "call_method", "call_module"):
            continue
        kind = write_kind(node)
        if kind == "inplace":
            node.kwargs = dict(node.kwargs, inplace=False)
            mutated = node.args[0] if node.args else None
        elif kind == "method" and node.target == "copy_":  # a Tensor has no copy(); aten's is out of place
            node.op, node.target = "call_function", torch.ops.aten.copy.default
            mutated = node.args[0]
        elif kind == "method":
            node.target = node.target[:-1]
            mutated = node.args[0]
        elif kind == "overload":
            base = node.target._schema.name.split("::")[-1]
            packet = getattr(torch.ops.aten, base.rstrip("_"), None) if base.endswith("_") else None
            overload = getattr(packet, node.target._overloadname, None) if packet is not None else None
            if overload is None:
                raise Refusal("untraceable", f"node {node.name} ({node.target}) writes into its input in place and has "
                                             "no out-of-place form the optimizer knows")
            node.target = overload
            mutated = node.args[0]
        elif kind == "function" and hasattr(torch, node.target.__name__[:-1]):
            node.target = getattr(torch, node.target.__name__[:-1])
            mutated = node.args[0]
        else:
            continue
        if not isinstance(mutated, torch.fx.Node):
            continue
        if mutated.op == "get_attr" and overwritten_before_read(graph, mutated.target, node, order):
            # 33_VanillaRNN's `self.hidden.copy_(h0)`: what the tensor held before never shows, so within a call it is
            # the write's value, and the graph holds that as one.
            for held in [n for n in graph.nodes if n.op == "get_attr" and n.target == mutated.target]:
                for user in list(held.users):
                    if user is not node and order[user] > order[node]:
                        user.replace_input_with(held, node)
            overwritten.add(mutated.target)
            continue
        if mutated.op == "get_attr" or is_view_of_something(mutated):
            what = "a weight" if mutated.op == "get_attr" else f"a view ({mutated.name})"
            raise Refusal("untraceable", f"node {node.name} ({op_name(node)}) writes in place into {what}: the "
                                         "write would reach a tensor the graph does not hold as a value")
        for user in list(mutated.users):
            if user is not node and order[user] > order[node]:
                user.replace_input_with(mutated, node)
    kept = [name for name in capture.written if name not in overwritten]
    if kept:
        raise Refusal("untraceable", f"the model's forward writes into its own tensor {kept[0]!r} in place: a graph "
                                     "holds values, not state that one call leaves for the next")
    graph.lint()
    capture.gm.recompile()


def overwritten_before_read(graph, target, write, order):
    """Whether `write` is a copy into the weight `target` (every element: copy_ broadcasts its source) and nothing
    reads the weight before it: then the value one call leaves there is never seen by the next."""
    if op_name(write) != "copy":
        return False
    users = [u for n in graph.nodes if n.op == "get_attr" and n.target == target for u in n.users]
    return all(u is write or order[u] > order[write] for u in users)


class Record(torch.fx.Interpreter):
    """Runs the graph once and records each node's value: shape, dtype and scale for tensors (the mean and
    spread a region's get_inputs() draws at; an integer's range), the value itself for what is not a tensor
    (a size, to be folded), and which values are tuples of tensors (split's, an LSTM's)."""

    def __init__(self, gm):
        super().__init__(gm)
        self.meta = {}
        self.folded = {}
        self.made = {}  # node -> the tensor it made from no input nor weight (made_nodes)
        self.free = made_nodes(gm.graph)

    def run_node(self, n):
        value = super().run_node(n)
        if isinstance(value, torch.Tensor):
            self.meta[n.name] = tensor_meta(value)
            if n in self.free:
                self.made[n] = value
        elif isinstance(value, (tuple, list)) and any(isinstance(v, torch.Tensor) for v in value):
            self.meta[n.name] = {"tuple": len(value)}
        elif n.op != "output":
            self.folded[n.name] = value
        return value


def made_nodes(graph):
    """Operators that read no input and no weight, and what is computed from them alone: `torch.linspace(0, 1, n)`,
    an LSTM's zero initial state. torch.fx's trace runs these and holds their values as constants; torch.export keeps
    them as operators, which would make regions of their own (a region of `zeros`) or join a region to whatever they
    feed first. Either way their values are the model's constants."""
    free = set()
    for node in graph.nodes:
        if node.op in ("call_function", "call_method") and all(a in free for a in node.all_input_nodes):
            free.add(node)
    return free


def fold_made_tensors(capture, made):
    """Each tensor made from constants alone (made_nodes) that an operator reading the model's values uses: a
    constant of the graph's root (kind "constant", hashed by value as torch.fx's own constants are)."""
    graph = capture.gm.graph
    first = next(n for n in graph.nodes if n.op != "placeholder")
    for node, value in made.items():
        if all(u in made for u in node.users):
            continue
        attr = python_attr(capture.gm, f"_tensor_constant_{node.name}")
        capture.gm.register_buffer(attr, value.detach().clone())
        capture.kind[attr], capture.fqn[attr] = "constant", attr
        with graph.inserting_before(first):
            constant_node = graph.get_attr(attr)
        node.replace_all_uses_with(constant_node)
    graph.eliminate_dead_code()
    graph.lint()
    capture.gm.recompile()


def python_attr(module, name):
    name = re.sub(r"\W", "_", name)
    base, k = name, 1
    while hasattr(module, name):
        name, k = f"{base}_{k}", k + 1
    return name


def tensor_meta(t):
    meta = {"shape": list(t.shape), "dtype": dtype_name(t.dtype)}
    if t.numel() > 0 and t.dtype != torch.bool:
        if t.is_floating_point():
            std, mean = torch.std_mean(t.detach().float()) if t.numel() > 1 else (torch.tensor(0.), t.float().mean())
            meta["mean"], meta["std"] = float(mean), float(std)
        elif not t.is_complex():
            meta["min"], meta["max"] = int(t.min()), int(t.max())
            # Cut points (an EmbeddingBag's offsets): each row starts at 0 and never decreases. A draw that keeps
            # the range alone would start a bag anywhere, which embedding_bag refuses.
            if t.dim() >= 1 and t.shape[-1] > 1 and bool((t[..., 0] == 0).all()) and \
                    bool((t[..., 1:] >= t[..., :-1]).all()):
                meta["sorted"] = True
    return meta


def constant(value, where):
    """A folded value as a literal FX can write: an int, a size, a tuple of them."""
    if isinstance(value, torch.Size):
        return tuple(int(v) for v in value)
    if isinstance(value, (int, float, bool, str, type(None), torch.dtype, torch.device)):
        return value
    if isinstance(value, (tuple, list)) and all(isinstance(v, (int, float, bool)) for v in value):
        return type(value)(value)
    raise Refusal("untraceable", f"node {where} gives a {type(value).__name__}, which is neither a tensor nor a "
                                 "constant a region can hold")


def fold_constants(capture, folded):
    graph = capture.gm.graph
    for node in reversed(list(graph.nodes)):  # users first: a check goes before the parameter it checked
        if node.name not in folded:
            continue
        value = folded[node.name]
        if value is None and not node.users:  # a check that returns nothing (export's asserts)
            graph.erase_node(node)
            continue
        if node.op == "placeholder":  # a parameter traced at its default (`h0=None`), its check gone
            if node.users:
                raise Refusal("untraceable", f"forward's parameter {node.name} is a {type(value).__name__}, not a tensor")
            graph.erase_node(node)
            continue
        literal = constant(value, node.name)
        for user in list(node.users):
            user.args = torch.fx.node.map_arg(user.args, lambda a: literal if a is node else a)
            user.kwargs = torch.fx.node.map_arg(user.kwargs, lambda a: literal if a is node else a)
        graph.erase_node(node)
    graph.eliminate_dead_code()
    graph.lint()
    capture.gm.recompile()


def close(a, b):
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point():
        return torch.allclose(a.float(), b.float(), rtol=1e-4, atol=1e-5, equal_nan=True)
    return torch.equal(a, b)


def capture_model(model, inputs, autocast=None):
    """The model's forward as a graph whose every node's value is recorded, checked against the model's own
    output on the same inputs. `autocast` (device type, dtype): the torch.autocast the model is called under, in
    force here already (optimize's --autocast); an autocast the forward enters itself is found by the capture."""
    with torch.no_grad():
        expected = model(*inputs)
    if hasattr(torch, "export") and hasattr(torch.export, "export"):
        try:
            capture = capture_export(model, inputs, autocast)
        except Refusal as e:
            if not getattr(e, "assigns_attribute", False):
                raise
            # torch.export (before 2.7 or so) refuses `self.hidden = ...` outright; torch.fx's trace follows it, and
            # whether what the forward leaves there is ever read again is then make_functional()'s question.
            capture = capture_fx(model, inputs)
            capture.notes.append(f"captured by torch.fx's trace: {e}")
    else:
        capture = capture_fx(model, inputs)
    graph = capture.gm.graph
    count = sum(1 for n in graph.nodes if n.op in ("call_function", "call_method", "call_module"))
    if count > MAX_NODES:
        raise Refusal("too_big", f"the model's graph has {count} operators, more than the {MAX_NODES} the optimizer cuts")
    make_functional(capture)
    record = Record(capture.gm)
    with torch.no_grad():
        try:
            got = record.run(*inputs)
        except Exception as e:
            raise Refusal("untraceable", f"the captured graph does not run ({capture.method}): {type(e).__name__}: "
                                         f"{first_line(e)}")
    outputs_expected, outputs_got = list(tensors_in(expected)), list(tensors_in(got))
    if len(outputs_expected) != len(outputs_got) or not all(close(a, b) for a, b in zip(outputs_expected, outputs_got)):
        raise Refusal("untraceable", f"the captured graph ({capture.method}) does not compute what the model does on "
                                     "the same inputs: the model's forward has behaviour a graph cannot hold")
    fold_constants(capture, record.folded)
    fold_made_tensors(capture, record.made)
    capture.meta = record.meta
    out = next(n for n in graph.nodes if n.op == "output")
    structure = out.args[0]
    names = []
    for item in (structure if isinstance(structure, (tuple, list)) else [structure]):
        if not isinstance(item, torch.fx.Node) or item.op == "get_attr" or item.name not in record.meta or \
                "tuple" in record.meta[item.name]:
            raise Refusal("bad_model", "the model's forward must return a tensor or a tuple of tensors computed from "
                                       f"its inputs (output {len(names)} is {item!r})")
        names.append(item.name)
    if isinstance(expected, torch.Tensor) and len(names) != 1:
        raise Refusal("bad_model", "the model returns one tensor but its graph returns several")
    capture.output_names = names
    capture.output_is_tuple = not isinstance(expected, torch.Tensor)
    if not capture.output_is_tuple and isinstance(structure, (tuple, list)):
        # torch.export's graph returns a flat tuple: the model's own single tensor, so that what is built from this
        # graph (optimized.py) returns what the model returns.
        out.args = (structure[0],)
        capture.gm.recompile()
    return capture


@contextlib.contextmanager
def timed(steps, name):
    start = time.perf_counter()
    yield
    steps[name] = round(time.perf_counter() - start, 3)

