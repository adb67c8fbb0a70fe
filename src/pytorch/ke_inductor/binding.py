"""Tying call()'s arguments to the spec's params: which are inputs, weights, outputs and sizes."""

import ast
import itertools
import json

from .errors import Untranslatable
from .output_code import _dotted, _TORCH_DTYPES
from .size_expressions import _evaluate, _is_atom, _spec_value, _unwrap


class _Binding:
    """What call()'s names stand for: params, our size expressions, and the sizes Inductor fixed."""

    def __init__(self, spec):
        self.spec = spec
        self.workload = spec["workloads"][0]
        self.params = {p["name"]: p for p in spec["params"]}
        self.tensor_of = {}       # argN_1 -> param name
        # Inductor symbol or local -> our expression text; "__order__": the spec's sizes, to order products by.
        self.names = {"__order__": [p["name"] for p in spec["params"] if p["role"] == "size"]}
        self.symbol_values = {}   # Inductor symbol or local -> its value in the example
        self.constraints = []     # "hidden == 768": the sizes Inductor specialised the code to
        self.layouts = {}         # param name -> (shape, stride) as Inductor asserts them (ast nodes)
        self.workload_symbols = {}  # Inductor symbol -> its value at the workload, where the example's differs

    def bind_symbol(self, symbol, spec_dim):
        text = str(spec_dim)
        text = text if _is_atom(text) else f"({text})"
        if symbol in self.names and self.names[symbol] != text:
            # One symbol for two sizes: they were equal in the example and Inductor's duck sizing merged them
            # (a square image's height and width). The first tie stands; the program holds where they are equal.
            first, second = _unwrap(self.names[symbol]), _unwrap(text)
            self.add_constraint(f"{first} == {second}" if second.isdigit() else f"{second} == {first}")
            return
        self.names[symbol] = text

    def add_constraint(self, constraint):
        if constraint not in self.constraints:
            self.constraints.append(constraint)

    def specialise(self, value, spec_dim):
        text = str(spec_dim)
        if not text.lstrip("-").isdigit():
            self.add_constraint(f"{text} == {value}")


def _match_tensors(call, examples, binding, arg_names=None):
    """Inductor passes the module's parameters in the order the forward first uses them, the inputs and the size
    symbols among them; the spec lists inputs then state-dict entries. Pair them by rank, dtype and shape: first
    where the example's extents are the workload's, the first pairing in the spec's order, so tensors of one shape
    keep their relative order. Where no pairing fits the example (a capture served from Inductor's cache keeps the
    sizes of the problem that filled it), by shape alone: the extents Inductor fixed, and one value for each of
    its size symbols at the spec's workload; that pairing must then be the only one, or the only one under which
    call()'s results have the spec's outputs' extents."""
    tensors = [a for a in _call_args(call) if isinstance(examples.get(a), tuple)]
    candidates = [p for p in binding.spec["params"] if p["role"] in ("in", "scalar")]
    declared = {}  # argN_1 -> the shape call() asserts for it, over Inductor's size symbols
    for node in _statements(call.body):
        if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and
                _dotted(node.value.func) == "assert_size_stride" and isinstance(node.value.args[0], ast.Name)):
            declared[node.value.args[0].id] = list(node.value.args[1].elts)

    def fits(arg, param, symbols, exact):
        """The size symbols' values at the workload with this pair, or None where it does not fit."""
        shape, _, dtype, _ = examples[arg]
        if _TORCH_DTYPES.get(dtype) != param["dtype"] and not (param["role"] == "scalar" and shape == []):
            return None
        if param["role"] == "scalar":
            return symbols if shape == [] else None
        dims = param.get("shape") or []
        if shape == [] and dims in (["1"], [1]):
            return symbols
        if len(shape) != len(dims):
            return None
        wanted = [_spec_value(d, binding.workload) for d in dims]
        if exact and shape != wanted:
            return None
        symbols = dict(symbols)
        for node, want in zip(declared.get(arg) or [ast.Constant(n) for n in shape], wanted):
            if isinstance(node, ast.Constant) and node.value != want:
                return None
            if isinstance(node, ast.Name) and symbols.setdefault(node.id, want) != want:
                return None
        return symbols

    # Params alike in role, dtype and shape are interchangeable here: pair groups, then each group's params in
    # the spec's order, so that two pairings count as different only where a shape tells them apart.
    groups = {}
    for param in candidates:
        groups.setdefault((param["role"], param["dtype"], json.dumps(param.get("shape"))), []).append(param)
    groups = list(groups.values())
    # Where the capture saw which state entry or input each of call()'s arguments is (`arg_names`), a group's
    # entries are taken in call()'s order, not the spec's: a batch norm's weight, bias, running mean and variance
    # have one shape, and the forward uses the statistics first; 33_VanillaRNN's input, initial hidden state and
    # hidden-state buffer have one shape, and Dynamo passes the buffer first and the inputs as the forward uses them.
    args = _call_args(call)
    if arg_names and len(arg_names) == len(args):
        position = {}
        for i, name in enumerate(arg_names):
            if name and name.startswith("input "):  # the module's I-th input: the spec lists the inputs first
                index = int(name.split()[1])
                name = candidates[index]["name"] if index < len(candidates) else None
            if name:
                position[name] = i
        for group in groups:
            slots = [k for k, p in enumerate(group) if p["name"] in position]
            named = sorted((group[k] for k in slots), key=lambda p: position[p["name"]])
            for k, param in zip(slots, named):
                group[k] = param

    returned = _returned_shapes(call)
    outs = [p for p in binding.spec["params"] if p["role"] == "out"]

    def outputs_fit(symbols):
        """Whether call()'s results have the spec's outputs' extents under these symbols' values: what tells
        A @ B from B @ A where the operands fit either way (A [M, N], B [N, M])."""
        for shape, param in zip(returned, outs):
            dims = param.get("shape") or []
            if shape is None or len(shape) != len(dims):
                continue
            for node, dim in zip(shape, dims):
                try:
                    if _evaluate(node, symbols) != _spec_value(dim, binding.workload):
                        return False
                except (NameError, ZeroDivisionError):
                    continue  # a size no tensor argument gives: not a test here
        return True

    def pairings(i, taken, symbols, exact):
        if i == len(tensors):
            yield [], symbols
            return
        for g, group in enumerate(groups):
            if taken[g] < len(group):
                bound = fits(tensors[i], group[taken[g]], symbols, exact)
                if bound is not None:
                    for rest, final in pairings(i + 1, taken[:g] + (taken[g] + 1,) + taken[g + 1:], bound, exact):
                        yield [group[taken[g]]["name"]] + rest, final

    found = list(itertools.islice(pairings(0, (0,) * len(groups), {}, True), 1))
    if not found:
        found = list(itertools.islice(pairings(0, (0,) * len(groups), {}, False), 64))
        if len(found) > 1:
            found = [f for f in found if outputs_fit(f[1])] if len(found) < 64 else found
        if len(found) > 1:
            raise Untranslatable("call()'s arguments", "their example's sizes are not the spec's workload's, and "
                                 "more than one pairing of its tensors with the spec's inputs fits their shapes")
        if found:
            # The sizes of the spec's workload, not of the example the cache kept.
            binding.workload_symbols = found[0][1]
    if not found:
        for arg in tensors:
            shape, _, dtype, device = examples[arg]
            if shape == [] and dtype == "torch.float64" and device == "cpu" and not any(
                    p["role"] == "scalar" for p in candidates):
                raise Untranslatable("a float of the module", f"Dynamo passes it as a 0-d f64 CPU tensor ({arg}), "
                                     "its value in neither the code nor the spec (capture with "
                                     "torch._dynamo.config.specialize_float = True)")
        raise Untranslatable("call()'s arguments", "no pairing of its tensors with the spec's inputs fits their "
                             "shapes and dtypes")
    binding.tensor_of = dict(zip(tensors, found[0][0]))


def _returned_shapes(call):
    """The shape (ast nodes) of each tensor call() returns, where the code says it (None where not)."""
    shapes = {}
    for node in _statements(call.body):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, value = node.targets[0].id, node.value
            if isinstance(value, ast.Name) and value.id in shapes:
                shapes[name] = shapes[value.id]  # `buf1 = buf0; del buf0  # reuse`
            elif isinstance(value, ast.Call) and _dotted(value.func) in ("empty_strided_cuda", "reinterpret_tensor"):
                shapes[name] = list(value.args[1 if _dotted(value.func) == "reinterpret_tensor" else 0].elts)
        elif (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and
              _dotted(node.value.func) == "assert_size_stride" and isinstance(node.value.args[0], ast.Name)):
            shapes.setdefault(node.value.args[0].id, list(node.value.args[1].elts))
        elif isinstance(node, ast.Return):
            results = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            return [shapes.get(r.id) if isinstance(r, ast.Name) else
                    list(r.args[1].elts) if isinstance(r, ast.Call) and _dotted(r.func) == "reinterpret_tensor"
                    else None for r in results]
    return []


def _call_args(call):
    for node in call.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id == "args":
            return [e.id for e in node.targets[0].elts]
    raise Untranslatable("call()", "it does not unpack its args")


def _tie_sizes(call, examples, binding):
    """`s77 = arg2_1` names a size symbol; `assert_size_stride(argN_1, shape, stride)` ties each symbol to the
    spec dimension at its place, and each number where the spec has a size to a constraint."""
    for node in call.body:
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and
                isinstance(examples.get(node.value.id), int)):
            symbol = node.targets[0].id
            binding.symbol_values[symbol] = binding.workload_symbols.get(symbol, examples[node.value.id])
    for node in _statements(call.body):
        if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and
                _dotted(node.value.func) == "assert_size_stride"):
            continue
        arg = node.value.args[0]
        if not (isinstance(arg, ast.Name) and arg.id in binding.tensor_of):
            continue
        param = binding.params[binding.tensor_of[arg.id]]
        binding.layouts[param["name"]] = (list(node.value.args[1].elts), list(node.value.args[2].elts))
        dims = param.get("shape") or []
        for dim, spec_dim in zip(node.value.args[1].elts, dims):
            if isinstance(dim, ast.Name):
                binding.bind_symbol(dim.id, spec_dim)
            elif isinstance(dim, ast.Constant):
                binding.specialise(dim.value, spec_dim)
    for symbol in binding.symbol_values:
        if symbol not in binding.names:
            raise Untranslatable(f"the size {symbol}", "it is no dimension of a tensor argument")


def _statements(body):
    """call()'s statements, with the `with torch.cuda._DeviceGuard(0):` block's inline."""
    for node in body:
        if isinstance(node, ast.With):
            yield from _statements(node.body)
        else:
            yield node
