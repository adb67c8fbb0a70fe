"""`describe`: the kernel signature derived from the module, with its cost, constants and workloads."""

import ast
import inspect
import math
import re

import torch

from .dtypes import TORCH_DTYPES
from .errors import first_line, Unmappable
from .loading import int_globals, module_at, requested_workloads, workload_text
from .meta import meta_kernels, OnDevice
from .naming import Namer
from .precision import precision_state
from .sampling import Sample, signature_change
from .solver import evaluate


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
