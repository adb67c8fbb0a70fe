"""Translate what torch.compile (Inductor, torch 2.11) generates into a KernelEvolve program (issue 31).

Inductor's output code holds Triton kernels, the buffers between them and the calls to cuBLAS and cuDNN that
`call()` makes in order. `translate` turns it into a Triton candidate with its own launch plan
(docs/spec-format.md, "Programs"): the kernels become plain `@triton.jit` functions, `call()`'s launches become
kernel steps, its extern calls library steps, its buffers temporaries or the spec's outputs, and the block sizes
the tunables. What cannot be translated raises `Untranslatable`, naming the part.

Standard library only: this runs where PyTorch has no Inductor (CI's torch 1.13) and must never import torch or
triton; the output code is read as text, through `ast`.
"""

import ast
import itertools
import json
import re

__all__ = ["translate", "Untranslatable"]


class Untranslatable(Exception):
    """A part of the output code that has no counterpart in a program; `part` names it, `why` says why."""

    def __init__(self, part, why):
        super().__init__(f"{part}: {why}")
        self.part = part
        self.why = why


_TORCH_DTYPES = {"torch.float32": "f32", "torch.float16": "f16", "torch.bfloat16": "bf16", "torch.float64": "f64",
                 "torch.int64": "i64", "torch.int32": "i32", "torch.int8": "i8", "torch.uint8": "u8",
                 "torch.bool": "u8"}  # a bool tensor is one byte an element, as our bridge passes it: Inductor's
# kernels load it `.to(tl.int1)` and store 0 or 1


# ---------------------------------------------------------------------------------------------------------------
# Reading the output code


def _dotted(node):
    """`a.b.c` as text, or None when the node is not a dotted name."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return base + "." + node.attr if base else None
    return None


def _value(node):
    """A decorator argument as data: literals as Python values; calls (DeviceProperties(...)) and dotted names
    (ReductionHint.INNER) as text, since only their names matter here."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Dict):
        return {_value(k): _value(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.Tuple):
        return tuple(_value(e) for e in node.elts)
    if isinstance(node, ast.List):
        return [_value(e) for e in node.elts]
    if isinstance(node, ast.Call):
        return (_dotted(node.func) or "call") + "(...)"
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_value(node.operand)
    return _dotted(node) or ast.unparse(node)


class _Kernel:
    """One Inductor Triton kernel: its heuristics' metadata and its `@triton.jit` function's text."""

    def __init__(self, name, source):
        self.name = name
        tree = ast.parse(source)
        lines = source.splitlines()
        funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
        if not funcs:
            raise Untranslatable(f"kernel {name}", "its source has no function of that name")
        func = funcs[0]
        self.heuristic = None
        self.meta = {}
        for deco in func.decorator_list:
            if isinstance(deco, ast.Call) and (_dotted(deco.func) or "").startswith("triton_heuristics."):
                self.heuristic = _dotted(deco.func).split(".", 1)[1]
                self.meta = {k.arg: _value(k.value) for k in deco.keywords}
        if self.heuristic not in ("pointwise", "reduction", "persistent_reduction"):
            raise Untranslatable(f"kernel {name}", f"Inductor heuristic {self.heuristic!r} (pointwise, reduction and "
                                 "persistent_reduction are translated)")
        # The function from its `def` line on: the decorators are Inductor's runtime, not Triton's.
        self.body = "\n".join(lines[func.lineno - 1:func.end_lineno])
        # The @triton.jit functions its source defines beside it (a scan's combine, `_triton_helper_fn_add0`):
        # the program carries them with the kernel.
        self.functions = {}
        for node in tree.body:
            if node is func or isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if isinstance(node, ast.Expr) and _dotted(getattr(node.value, "func", None)) == \
                    "triton_helpers.set_driver_to_gpu":
                continue
            if (isinstance(node, ast.FunctionDef) and
                    [_dotted(d) for d in node.decorator_list] == ["triton.jit"]):
                self.functions[node.name] = "\n".join(lines[node.lineno - 1:node.end_lineno])
                continue
            raise Untranslatable(f"kernel {name}", f"its source's statement {ast.unparse(node).splitlines()[0]!r}")
        self.constexprs = [a.arg for a in func.args.args if a.annotation is not None and
                           ast.unparse(a.annotation) == "tl.constexpr"]
        self.params = [a.arg for a in func.args.args if a.arg not in self.constexprs]
        self.inductor_meta = self.meta.get("inductor_meta") or {}
        self.size_hints = self.meta.get("size_hints") or {}
        self.reduction_hint = str(self.meta.get("reduction_hint") or "")
        # A persistent reduction fixes its R0_BLOCK in its body; the value matters to the configurations.
        fixed = re.search(r"R0_BLOCK: tl.constexpr = (\d+)", self.body)
        self.fixed_r0_block = int(fixed.group(1)) if fixed else None


class _OwnKernel:
    """A kernel of ours where Inductor calls an ATen operator as it is (aten._embedding_bag): its @triton.jit text,
    its configurations (the first is node 0's) and its grid, in _Kernel's shape for translate()."""

    heuristic = "ours"

    def __init__(self, name, body, configs, grid):
        self.name, self.body, self.configs, self.grid = name, body, configs, grid
        self.functions = {}
        signature = ast.parse(body).body[0].args.args
        self.constexprs = [a.arg for a in signature if a.annotation is not None]
        self.params = [a.arg for a in signature if a.annotation is None]


# torch.nn.EmbeddingBag(mode="sum") forward, which Inductor leaves to ATen (its CUDA kernel also fills the
# offset2bag, bag_size and max_indices a backward would read): one program per bag and BLOCK_D of its columns,
# BLOCK_I of the bag's rows gathered at a time and summed in fp32. An empty bag is zeros, as PyTorch's.
_EMBEDDING_BAG_SUM = """def ke_embedding_bag_sum(weight, indices, offsets, out, num_bags, num_indices, dim, BLOCK_D: tl.constexpr,
                        BLOCK_I: tl.constexpr):
    bag = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    col_mask = cols < dim
    start = tl.load(offsets + bag)
    end = tl.load(offsets + bag + 1, mask=bag + 1 < num_bags, other=num_indices)
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for first in range(start, end, BLOCK_I):
        at = first + tl.arange(0, BLOCK_I)
        in_bag = at < end
        rows = tl.load(indices + at, mask=in_bag, other=0).to(tl.int64)
        values = tl.load(weight + rows[:, None] * dim + cols[None, :], mask=in_bag[:, None] & col_mask[None, :],
                         other=0.0)
        acc += tl.sum(values.to(tl.float32), axis=0)
    tl.store(out + bag.to(tl.int64) * dim + cols, acc, mask=col_mask)"""


def _embedding_bag_kernel(dim):
    widest = min(_next_power_of_2(dim), 256)
    blocks_d = [widest] + [b for b in (32, 64, 128, 256) if b < widest]
    configs = [{"BLOCK_D": d, "BLOCK_I": i, "num_warps": w, "num_stages": 1}
               for d in blocks_d for i in (8, 4, 16, 32) for w in (2, 1, 4, 8)]

    def grid(numels, tunable):
        return [_unwrap(numels["num_bags"]), f"cdiv({_unwrap(numels['dim'])}, {tunable['BLOCK_D']})"]
    return _OwnKernel("ke_embedding_bag_sum", _EMBEDDING_BAG_SUM, configs, grid)


# Lookups side by side (a DLRM's tables, which optimize's cut makes one region): one launch for all, a grid over the
# tables, as FBGEMM's table-batched embedding is one kernel, where the program paid a launch a table (a model bound
# by its CPU's launches pays each). Each table's program is the one-table kernel's, inlined.
_BAG_SUM_OF_ONE = _EMBEDDING_BAG_SUM.replace("def ke_embedding_bag_sum(", "def ke_bag_sum(", 1)


def _embedding_bags_kernel(tables, one):
    """The batched kernel over `tables` tables, with the configurations and grid of `one`, the one-table kernel."""
    each = ", ".join(f"weight_{t}, indices_{t}, offsets_{t}, out_{t}, num_indices_{t}" for t in range(tables))
    lines = [f"def ke_embedding_bags_sum_{tables}({each}, num_bags, dim, BLOCK_D: tl.constexpr, BLOCK_I: tl.constexpr):",
             "    table = tl.program_id(2)"]
    for t in range(tables):
        lines += [f"    if table == {t}:",
                  f"        ke_bag_sum(weight_{t}, indices_{t}, offsets_{t}, out_{t}, num_bags, num_indices_{t}, dim, "
                  "BLOCK_D, BLOCK_I)"]

    def grid(numels, tunable):
        return one.grid(numels, tunable) + [str(tables)]
    kernel = _OwnKernel(f"ke_embedding_bags_sum_{tables}", "\n".join(lines), one.configs, grid)
    kernel.functions = {"ke_bag_sum": _BAG_SUM_OF_ONE}
    return kernel


def _batch_lookups(plan):
    """Consecutive steps of the one-table lookup over the same bags and width as one step of the batched kernel."""
    def key(step):
        kernel = step.get("kernel")
        if kernel is None or kernel.name != "ke_embedding_bag_sum":
            return None
        return (repr(step["numels"]["num_bags"]), repr(step["numels"]["dim"]))

    def batched(run):
        kernel = next((k for k in plan.launched if k.name == f"ke_embedding_bags_sum_{len(run)}"), None)
        if kernel is None:
            kernel = _embedding_bags_kernel(len(run), run[0]["kernel"])
            plan.launched.append(kernel)
        each = ("weight", "indices", "offsets", "out", "num_indices")
        args = [step["numels"][p] for step in run for p in each] + [run[0]["numels"][p] for p in ("num_bags", "dim")]
        return {"kernel": kernel, "args": args, "numels": dict(zip(kernel.params, args))}

    steps, run = [], []
    for step in plan.steps + [{}]:
        if run and key(step) != key(run[0]):
            steps += [batched(run)] if len(run) > 1 else run
            run = []
        if key(step) is not None:
            run.append(step)
        elif step:
            steps.append(step)
    plan.steps = steps
    if not any(s.get("kernel") is not None and s["kernel"].name == "ke_embedding_bag_sum" for s in steps):
        plan.launched = [k for k in plan.launched if k.name != "ke_embedding_bag_sum"]


def _kernels_of(tree):
    """Each `name = async_compile.triton('name', '''source''', ...)` of the module."""
    kernels = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and
                _dotted(node.value.func) == "async_compile.triton"):
            name = node.targets[0].id
            kernels[name] = _Kernel(name, node.value.args[1].value)
        elif (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and
              (_dotted(node.value.func) or "").startswith("async_compile.") and
              _dotted(node.value.func) != "async_compile.triton" and not isinstance(node.targets[0], ast.Attribute)):
            if isinstance(node.targets[0], ast.Name) and node.targets[0].id != "async_compile":
                raise Untranslatable(_dotted(node.value.func), "only Triton kernels are translated")
    return kernels


def _function(tree, name, in_class=None):
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and in_class and node.name == in_class:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == name:
                    return item
        if in_class is None and isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise Untranslatable(f"{name}()", "the output code has no such function")


def _example_args(tree):
    """get_args(): each argN_1's example, an int (a size symbol's value) or (shape, stride, dtype)."""
    examples = {}
    for node in _function(tree, "get_args").body:
        if not isinstance(node, ast.Assign):
            continue
        name, value = node.targets[0].id, node.value
        if isinstance(value, ast.Constant):
            examples[name] = value.value
        elif isinstance(value, ast.Call) and _dotted(value.func) == "rand_strided":
            keywords = {k.arg: k.value for k in value.keywords}
            examples[name] = (list(_value(value.args[0])), list(_value(value.args[1])), _dotted(keywords["dtype"]),
                              _value(keywords["device"]) if "device" in keywords else None)
        else:
            raise Untranslatable(f"get_args()'s {name}", f"an example argument {ast.unparse(value)!r}")
    return examples


# ---------------------------------------------------------------------------------------------------------------
# Integer expressions: Inductor's sympy text over its symbols, rendered over our size names

_PRECEDENCE = {ast.Add: 1, ast.Sub: 1, ast.Mult: 2, ast.FloorDiv: 2, ast.Mod: 2}
_OPERATOR = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "/", ast.Mod: "%"}


_FUNCTIONS = {"max": max, "min": min}


def _is_atom(text):
    return re.fullmatch(r"[A-Za-z_]\w*|\d+", text) is not None


def _render(node, names):
    """An integer expression in our syntax (C's `/`: the operands are sizes, never negative). `names` maps
    Inductor's symbols and locals to our text."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return str(node.value), 3
    if isinstance(node, ast.Name):
        if node.id not in names:
            raise Untranslatable(f"the size {node.id}", "it is tied to no size of the spec")
        text = names[node.id]
        return text, 3 if _is_atom(text) else 0
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        text, prec = _render(node.operand, names)
        return "-" + (text if prec >= 3 else f"({text})"), 3
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        # sympy orders a product's symbols by name (s0*s27*s53*s77); ours reads better in the spec's order.
        factors = [_render(f, names) for f in _factors(node)]
        order = names.get("__order__", [])
        if all(prec == 3 for _, prec in factors):
            factors.sort(key=lambda f: (not f[0].isdigit(), order.index(f[0]) if f[0] in order else len(order)))
        # A quotient or remainder among the factors keeps its parentheses: a * (b / c) is not a * b / c in
        # integers (an average pool's (H / 11) * (H / 11)).
        return " * ".join(text if prec >= 3 else f"({text})" for text, prec in factors), 2
    if isinstance(node, ast.BinOp) and type(node.op) in _PRECEDENCE:
        prec = _PRECEDENCE[type(node.op)]
        left, lp = _render(node.left, names)
        right, rp = _render(node.right, names)
        if lp < prec:
            left = f"({left})"
        if rp < prec or (rp == prec and not isinstance(node.op, (ast.Add, ast.Mult))):
            right = f"({right})"
        return f"{left} {_OPERATOR[type(node.op)]} {right}", prec
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS and
            len(node.args) >= 2 and not node.keywords):
        # sympy's Max and Min (a convolution's output extent, clamped to 1 in its strides): ours has both.
        return f"{node.func.id}(" + ", ".join(_unwrap(_render(a, names)[0]) for a in node.args) + ")", 3
    raise Untranslatable(f"the expression {ast.unparse(node)}", "not an integer expression over the sizes")


def _factors(node):
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return _factors(node.left) + _factors(node.right)
    return [node]


def _expr(node, names):
    return _render(node, names)[0]


def _unwrap(text):
    """`(a * b)` -> `a * b` where the parentheses enclose the whole text."""
    if not (text.startswith("(") and text.endswith(")")):
        return text
    depth = 0
    for i, c in enumerate(text):
        depth += c == "("
        depth -= c == ")"
        if depth == 0 and i < len(text) - 1:
            return text
    return text[1:-1]


def _evaluate(node, values):
    """An Inductor integer expression's value at the example's sizes."""
    text = ast.unparse(node) if isinstance(node, ast.AST) else str(node)
    # Sizes, + - * // % and max, min only: what _render accepts.
    return eval(compile(text, "<size>", "eval"), {"__builtins__": {}, **_FUNCTIONS}, dict(values))


def _spec_value(text, workload):
    """A spec dimension's value at its first workload (its expressions use C's `/`, Python's `//` here)."""
    return eval(compile(str(text).replace("/", "//"), "<spec>", "eval"), {"__builtins__": {}}, dict(workload))


def _dense_strides(shape):
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return list(reversed(strides))


# ---------------------------------------------------------------------------------------------------------------
# Tying call()'s arguments to the spec's params


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


# ---------------------------------------------------------------------------------------------------------------
# Inductor's configurations, as torch 2.11's triton_heuristics computes them (pointwise, _reduction_configs,
# _persistent_reduction_configs), simplified to what the fixtures' kernels reach. The file does not say which
# one the autotuner picked at run time: the first is the one its heuristics list first.


def _next_power_of_2(n):
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def _num_warps(n, max_warps=8, min_warps=2, register_intensive=False):
    if register_intensive:
        max_warps //= 2
    return _next_power_of_2(min(max(n, min_warps), max_warps))


def _pointwise_config(size_hints, x, y=None, elements_per_warp=256):
    target = x * (y or 1)
    total = 1
    for v in size_hints.values():
        total *= v
    if total < target:
        target //= 8
    x = min(x, size_hints["x"])
    if y is not None:
        y = min(y, size_hints["y"])
    while x < min(size_hints["x"], 4096) and x * (y or 1) < target:
        x *= 2
    while y is not None and y < min(size_hints["y"], 1024) and x * y < target:
        y *= 2
    warps = _num_warps((x * (y or 1)) // elements_per_warp, min_warps=1)
    if x * (y or 1) >= 128:
        warps = max(warps, 4)
    return {"XBLOCK": x, **({"YBLOCK": y} if y is not None else {}), "num_warps": warps, "num_stages": 1}


def _pointwise_configs(kernel):
    hints = kernel.size_hints
    total = 1
    for v in hints.values():
        total *= v
    bs = max(256, min(total // 128, 1024))
    if len(hints) == 1:
        return [_pointwise_config(hints, bs), _pointwise_config(hints, bs // 2, elements_per_warp=64)]
    if len(hints) == 2:
        # Inductor's dictionary is {'y': ..., 'x': ...}; its tile configs are (x, y).
        return [_pointwise_config(hints, x, y) for x, y in ((32, 32), (64, 64), (256, 16), (16, 256), (bs, 1),
                                                              (1, bs))]
    raise Untranslatable(f"kernel {kernel.name}", f"a pointwise kernel over {len(hints)} dimensions")


def _reduction_config(hints, x, r, warps=None, register_intensive=False):
    rnumel = hints.get("r0_", 1)
    x = min(x, hints["x"])
    target = x * r
    if hints["x"] * rnumel < target:
        target //= 8
    r = min(r, rnumel)
    while x < hints["x"] and x * r < target:
        x *= 2
    while x * r < target:
        r *= 2
    if warps is None:
        warps = (x * r) // 128
    warps = _num_warps(warps, max_warps=16 if r <= 8192 else 32, register_intensive=register_intensive)
    while x * r > target and r > 1:
        r //= 2
    return {"XBLOCK": x, "R0_BLOCK": r, "num_warps": warps, "num_stages": 1}


def _reduction_configs(kernel):
    hints = kernel.size_hints
    rnumel = hints.get("r0_", 1)
    loads_and_reductions = kernel.inductor_meta.get("num_load", 0) + kernel.inductor_meta.get("num_reduction", 0)
    max_r0 = 2048
    intensive = False
    if hints["x"] >= 1024 and loads_and_reductions >= 10:
        max_r0, intensive = 1024, True
    contiguous = _reduction_config(hints, 1, min(rnumel, max_r0), register_intensive=intensive)
    outer = _reduction_config(hints, 64, 8, register_intensive=intensive)
    tiny = _reduction_config(hints, 2 * (256 // rnumel) if rnumel <= 256 else 1, min(rnumel, max_r0),
                             register_intensive=intensive)
    others = [_reduction_config(hints, 64, 64), _reduction_config(hints, 8, 512),
              _reduction_config(hints, 64, 4, warps=8)]
    first = {"INNER": contiguous, "OUTER": outer, "OUTER_TINY": tiny}.get(kernel.reduction_hint.rsplit(".", 1)[-1])
    configs = [contiguous, outer, tiny] + others
    return [first] + [c for c in configs if c is not first] if first else configs


def _persistent_configs(kernel):
    hints = kernel.size_hints
    rnumel = kernel.fixed_r0_block or hints.get("r0_", 1)
    configs = [_reduction_config(hints, xblock, rnumel, register_intensive=True) for xblock in (1, 8, 32, 128)
               if xblock == 1 or (rnumel * xblock <= 4096 and xblock <= hints["x"])]
    hint = kernel.reduction_hint.rsplit(".", 1)[-1]
    loads_and_stores = kernel.inductor_meta.get("num_load", 0) + kernel.inductor_meta.get("num_store", 0)
    first = None
    if hint == "INNER" and rnumel >= 256:
        if rnumel > 1024:
            first = configs[0]
        else:
            x_block = 1 if hints["x"] // 8 < 128 or loads_and_stores >= 5 else 8
            first = _reduction_config(hints, x_block, rnumel, register_intensive=True)
    elif hint == "OUTER":
        first = configs[-1]
    elif hint == "OUTER_TINY":
        first = _reduction_config(hints, 2 * (256 // rnumel) if rnumel <= 256 else 1, rnumel)
    if first:
        configs = [first] + [c for c in configs if c != first]
    for c in configs:
        c.pop("R0_BLOCK")  # a persistent reduction takes the whole row: its body fixes R0_BLOCK
    return configs


def _configs(kernel):
    if isinstance(kernel, _OwnKernel):
        return kernel.configs
    return {"pointwise": _pointwise_configs, "reduction": _reduction_configs,
            "persistent_reduction": _persistent_configs}[kernel.heuristic](kernel)


# ---------------------------------------------------------------------------------------------------------------
# The kernels' text: Inductor's runtime helpers rewritten to plain Triton

# triton_helpers' functions that the kernels call, with Inductor's semantics (a maximum propagates NaN, as
# PyTorch's does; tl.maximum does not), as @triton.jit functions of the program's own source. Written here from
# what torch 2.11's torch/_inductor/runtime/triton_helpers.py computes, under the same signatures (the kernels call
# them so), in the order the source needs them: each after those it calls.
def _index_combine(name, wins):
    return f'''@triton.jit
def triton_helpers_{name}(a_value, a_index, b_value, b_index):
    take_a = a_value {wins} b_value
    tie = a_value == b_value
    if (a_value + tl.zeros((1,), tl.int1)).dtype.is_floating():
        a_nan = a_value != a_value
        b_nan = b_value != b_value
        take_a |= a_nan & (b_value == b_value)
        tie |= a_nan & b_nan
    take_a |= tie & (a_index < b_index)
    return tl.where(take_a, a_value, b_value), tl.where(take_a, a_index, b_index)
'''


_HELPERS = {
    "maximum": '''@triton.jit
def triton_helpers_maximum(a, b):
    mask = a > b
    if (a + tl.zeros((1,), tl.int1)).dtype.is_floating():
        mask |= a != a
    return tl.where(mask, a, b)
''',
    "minimum": '''@triton.jit
def triton_helpers_minimum(a, b):
    mask = a < b
    if (a + tl.zeros((1,), tl.int1)).dtype.is_floating():
        mask |= a != a
    return tl.where(mask, a, b)
''',
    "max2": '''@triton.jit
def triton_helpers_max2(a, dim):
    return tl.reduce(a, dim, triton_helpers_maximum)
''',
    "min2": '''@triton.jit
def triton_helpers_min2(a, dim):
    return tl.reduce(a, dim, triton_helpers_minimum)
''',
    # argmax's and argmin's combine: a NaN wins over a number (NaNs tie with each other), and of two equal values
    # the one at the lower index, as PyTorch's argmax and argmin answer.
    "maximum_with_index": _index_combine("maximum_with_index", ">"),
    "minimum_with_index": _index_combine("minimum_with_index", "<"),
    "max_with_index": '''@triton.jit
def triton_helpers_max_with_index(value, index, dim):
    return tl.reduce((value, index), dim, triton_helpers_maximum_with_index)
''',
    "min_with_index": '''@triton.jit
def triton_helpers_min_with_index(value, index, dim):
    return tl.reduce((value, index), dim, triton_helpers_minimum_with_index)
''',
    # Welford's running mean and sum of squared deviations (M2), one value a lane and iteration; the first
    # iteration starts each lane at its value, as Inductor's does, rather than updating its zeros.
    "welford_reduce": '''@triton.jit
def triton_helpers_welford_reduce(value, mean, m2, weight, first_iteration):
    if first_iteration:
        next_weight = tl.full(weight.shape, 1, weight.dtype)
        next_mean = value
        next_m2 = tl.zeros_like(m2)
    else:
        deviation = value - mean
        next_weight = weight + 1
        next_mean = mean + deviation / next_weight
        next_m2 = m2 + deviation * (value - next_mean)
    return next_mean, next_m2, next_weight
''',
    # Two partial (mean, M2, count) merged (Chan et al.); two empty ones merge to an empty one, not to NaN.
    "welford_combine": '''@triton.jit
def triton_helpers_welford_combine(mean_1, m2_1, weight_1, mean_2, m2_2, weight_2):
    weight = weight_1 + weight_2
    share_2 = tl.where(weight == 0.0, 0.0, weight_2 / weight)
    delta = mean_2 - mean_1
    return mean_1 + delta * share_2, m2_1 + m2_2 + delta * delta * weight_1 * share_2, weight
''',
    "welford": '''@triton.jit
def triton_helpers_welford(mean, m2, weight, dim):
    return tl.reduce((mean, m2, weight), dim, triton_helpers_welford_combine)
''',
    # The online softmax's exp: exp2 of x * log2(e) where the kernel allows fast math, else Triton's exp.
    "exp": '''@triton.jit
def triton_helpers_exp(x, use_fast_math: tl.constexpr):
    if use_fast_math:
        return libdevice.exp2(x * 1.4426950408889634)
    else:
        return tl.math.exp(x)
''',
    # Each lane's running (max, sum of exp(x - max)) merged along dim: every sum rescaled to the row's max, except
    # where the row's max is -inf (a row of -inf keeps its sums).
    "online_softmax_reduce": '''@triton.jit
def triton_helpers_online_softmax_reduce(lhs_max, lhs_sum, dim, use_fast_math: tl.constexpr):
    row_max = triton_helpers_max2(lhs_max, dim)
    kept = tl.expand_dims(row_max, dim)
    shift = tl.where(kept == float("-inf"), 0, lhs_max - kept)
    return row_max, tl.sum(lhs_sum * triton_helpers_exp(shift, use_fast_math), dim)
''',
    # The running (max, sum) with one more value, rhs_max, whose own sum is 1.
    "online_softmax_combine": '''@triton.jit
def triton_helpers_online_softmax_combine(lhs_max, lhs_sum, rhs_max, use_fast_math: tl.constexpr):
    new_max = triton_helpers_maximum(lhs_max, rhs_max)
    lhs_scale = tl.where(new_max == float("-inf"), 1.0, triton_helpers_exp(lhs_max - new_max, use_fast_math))
    rhs_scale = tl.where(new_max == float("-inf"), 1.0, triton_helpers_exp(rhs_max - new_max, use_fast_math))
    return new_max, lhs_sum * lhs_scale + rhs_scale
''',
    # The one element along dim where mask holds (a scan's last), bit for bit: summed as unsigned integers of its
    # width, since a float sum with zeros would turn -0.0 into 0.0.
    "select_one": '''@triton.jit
def triton_helpers_select_one(x, mask, dim, keep_dims=False):
    bits_type = tl.core.get_int_dtype(x.dtype.primitive_bitwidth, signed=False)
    bits = x.to(bits_type, bitcast=True)
    picked = tl.sum(tl.where(mask, bits, 0), dim, keep_dims=keep_dims).to(bits_type)
    return picked.to(x.dtype, bitcast=True)
''',
    # Python's a // b for integers (rounded down); Triton's // truncates toward zero, as C's does.
    "div_floor_integer": '''@triton.jit
def triton_helpers_div_floor_integer(a, b):
    quotient = a // b
    return tl.where(((a % b) != 0) & ((a < 0) != (b < 0)), quotient - 1, quotient)
''',
}
_HELPER_NEEDS = {"max2": ["maximum"], "min2": ["minimum"], "max_with_index": ["maximum_with_index"],
                 "min_with_index": ["minimum_with_index"], "welford": ["welford_combine"],
                 "online_softmax_reduce": ["max2", "exp"], "online_softmax_combine": ["maximum", "exp"]}


def _with_needs(name, helpers):
    if name not in helpers:
        helpers.add(name)
        for need in _HELPER_NEEDS.get(name, []):
            _with_needs(need, helpers)


def _rewrite_runtime(kernel, body, helpers):
    """Replace triton_helpers.X, tl_math.X in a kernel's text; keep libdevice.X (the source imports Triton's own
    libdevice)."""

    def helper(match):
        name = match.group(1)
        if name not in _HELPERS:
            raise Untranslatable(f"a kernel using triton_helpers.{name}", f"{kernel.name} calls a helper of "
                                 "Inductor's runtime with no plain-Triton counterpart here")
        _with_needs(name, helpers)
        return f"triton_helpers_{name}"

    body = re.sub(r"\btriton_helpers\.(\w+)", helper, body)
    body = re.sub(r"\btl_math\.(\w+)", r"tl.math.\1", body)
    for other in re.findall(r"\b(triton_heuristics|torch)\.\w+", body):
        raise Untranslatable(f"a kernel using {other}", f"{kernel.name} needs PyTorch's runtime")
    return body


# ---------------------------------------------------------------------------------------------------------------
# call(): buffers, launches and extern calls, into plan steps


class _Storage:
    """A buffer call() allocates; `name` is its temporary's name, or the out param it is returned as."""

    def __init__(self, name, shape_nodes, stride_nodes, dtype, alias_of=None):
        self.name = name
        self.shape_nodes = shape_nodes
        self.stride_nodes = stride_nodes
        self.dtype = dtype
        self.output = None
        # `buf3 = reinterpret_tensor(buf1, shape, stride, 0)`: buf1's memory under another shape. Kernels get the
        # same pointer; a library step reads this shape.
        self.alias_of = alias_of

    def root(self):
        return self.alias_of.root() if self.alias_of else self


class _Plan:
    def __init__(self, binding, kernels):
        self.binding = binding
        self.kernels = kernels
        self.buffers = {}    # Inductor name -> _Storage
        self.storages = []
        self.steps = []      # each a dict whose buffer args are _Storage objects until resolved
        self.launched = []   # the kernels in launch order
        self.item_args = {}  # kernel -> {param index: scalar param}: `argN_1.item()` passed by value
        self.results = {}    # `buf0 = aten op(...)` returning a tuple -> its results (None: not computed)

    # Reading a call's arguments -------------------------------------------------------------------------------

    def tensor(self, node, what):
        """A buffer argument: a param's name or a _Storage."""
        if isinstance(node, ast.Name):
            if node.id in self.binding.tensor_of:
                return self.binding.tensor_of[node.id]
            if node.id in self.buffers:
                return self.buffers[node.id]
        raise Untranslatable(what, f"the argument {ast.unparse(node)} is not a buffer of the program")

    def dtype_of(self, ref):
        """A buffer argument's dtype: a param's, or the _Storage's."""
        return ref.dtype if isinstance(ref, _Storage) else self.binding.params[ref]["dtype"]

    def shape_of(self, ref):
        """A buffer's shape and strides as Inductor expressions (ast nodes)."""
        if isinstance(ref, _Storage):
            return ref.shape_nodes, ref.stride_nodes
        if ref not in self.binding.layouts:
            raise Untranslatable(f"the input {ref}", "call() asserts no shape for it")
        return self.binding.layouts[ref]

    def value(self, node):
        return _evaluate(node, self.binding.symbol_values)

    def expr(self, node):
        return _expr(node, self.binding.names)

    # Statements ----------------------------------------------------------------------------------------------

    def run(self, call):
        for node in _statements(call.body):
            self.statement(node)

    def statement(self, node):
        text = ast.unparse(node)
        if isinstance(node, (ast.Delete, ast.Pass)):
            return
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id == "args":
            return  # `arg0_1, arg1_1 = args`: matched already
        if isinstance(node, ast.Return):
            return self.outputs(node.value)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            func = _dotted(node.value.func) or ""
            if func in ("args.clear", "torch.cuda.set_device", "assert_alignment"):
                return
            if func == "assert_size_stride":
                return self.assert_shape(node.value)
            if func.endswith(".run") and func[:-4] in self.kernels:
                return self.launch(self.kernels[func[:-4]], node.value)
            if func in ("extern_kernels.mm", "extern_kernels.addmm", "extern_kernels.bmm"):
                return self.matmul(func.split(".")[1], node.value)
            raise Untranslatable(func, "a call the translation does not know")
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            return self.assign(node.targets[0].id, node.value)
        raise Untranslatable(text.splitlines()[0], "a statement of call() the translation does not know")

    def assign(self, name, value):
        func = _dotted(value.func) if isinstance(value, ast.Call) else None
        if isinstance(value, ast.Name) and value.id == "args":
            return
        if isinstance(value, ast.Name) and value.id in self.buffers:
            self.buffers[name] = self.buffers[value.id]  # `buf1 = buf0; del buf0  # reuse`
            return
        if isinstance(value, ast.Name) and value.id in self.binding.symbol_values and name == value.id:
            return
        if isinstance(value, ast.Name) and name in self.binding.symbol_values:
            return  # `s77 = arg2_1`: tied already
        if func == "get_raw_stream":
            return
        if func == "empty_strided_cuda":
            shape, stride, dtype = value.args
            storage = _Storage(name, list(shape.elts), list(stride.elts), _TORCH_DTYPES.get(_dotted(dtype)))
            if storage.dtype is None:
                raise Untranslatable(f"the buffer {name}", f"dtype {_dotted(dtype)}")
            self.buffers[name] = storage
            self.storages.append(storage)
            return
        if func == "extern_kernels.convolution":
            return self.convolution(name, value)
        if func == "reinterpret_tensor" and isinstance(value.args[0], ast.Name) and value.args[0].id in self.buffers:
            # `buf3 = reinterpret_tensor(buf1, ...); del buf1  # reuse`, or `# alias`: the same memory.
            base = self.buffers[value.args[0].id]
            if self.value(value.args[3]) != 0:
                raise Untranslatable(f"{name} = reinterpret_tensor(...): a view at an offset into a buffer",
                                     "a plan passes whole buffers")
            view_numel = 1
            for node in value.args[1].elts:
                view_numel *= self.value(node)
            root_numel = 1
            for node in base.root().shape_nodes or []:
                root_numel *= self.value(node)
            if base.root().shape_nodes is None or view_numel > root_numel:
                raise Untranslatable(f"{name} = reinterpret_tensor(...)", "a view larger than its buffer")
            storage = _Storage(name, list(value.args[1].elts), list(value.args[2].elts), base.dtype, alias_of=base)
            self.buffers[name] = storage
            return
        if func == "torch.ops.aten.avg_pool3d.default":
            return self.avg_pool3d(name, value)
        if func in ("torch.ops.aten._embedding_bag.default", "torch.ops.aten._embedding_bag_forward_only.default"):
            return self.embedding_bag(name, value)
        if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name) and value.value.id in self.results:
            # `buf1 = buf0[0]`: one of an ATen operator's results.
            index = _value(value.slice)
            results = self.results[value.value.id]
            if not isinstance(index, int) or not 0 <= index < len(results) or results[index] is None:
                raise Untranslatable(f"{name} = {ast.unparse(value)}", "a result of the operator the program does "
                                     "not compute (only an embedding bag's pooled rows are)")
            self.buffers[name] = results[index]
            return
        if func and (func.startswith("torch.ops.") or func.startswith("aten.")):
            raise Untranslatable(func.replace("torch.ops.", "").replace(".default", ""),
                                 "an ATen operator Inductor calls as it is: no library step computes it")
        if func and func not in _FUNCTIONS:
            raise Untranslatable(func, "a call the translation does not know")
        # An integer local: `ps0 = 2*s53`, `kernel_xnumel = 384*s77`.
        self.binding.names[name] = self.wrap(self.expr(value))  # raises Untranslatable on anything but sizes
        self.binding.symbol_values[name] = self.value(value)

    @staticmethod
    def wrap(text):
        return text if _is_atom(text) else f"({text})"

    def assert_shape(self, call):
        """After an extern call that allocates its result, Inductor asserts its shape: that gives the buffer's."""
        target = call.args[0]
        if isinstance(target, ast.Name) and target.id in self.buffers:
            storage = self.buffers[target.id]
            if storage.shape_nodes is None:
                storage.shape_nodes = list(call.args[1].elts)
                storage.stride_nodes = list(call.args[2].elts)

    # Kernel launches ------------------------------------------------------------------------------------------

    def launch(self, kernel, call):
        if kernel not in self.launched:
            self.launched.append(kernel)
        if len(call.args) != len(kernel.params):
            raise Untranslatable(f"{kernel.name}.run", f"{len(call.args)} arguments for {len(kernel.params)} params")
        args = []
        for index, node in enumerate(call.args):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "item"
                    and not node.args):
                # A 0-d tensor's value (a module's scalar): our spec has it as a scalar param, passed by value.
                param = self.tensor(node.func.value, f"{kernel.name}.run")
                if not isinstance(param, str) or self.binding.params[param]["role"] != "scalar":
                    raise Untranslatable(f"{kernel.name}.run", f"{ast.unparse(node)} is not a scalar of the spec")
                args.append(param)
            elif isinstance(node, ast.Name) and (node.id in self.buffers or node.id in self.binding.tensor_of):
                args.append(self.tensor(node, f"{kernel.name}.run"))
            else:
                args.append(_unwrap(self.expr(node)))
        numels = dict(zip(kernel.params, args))
        self.steps.append({"kernel": kernel, "args": args, "numels": numels})

    # Library calls --------------------------------------------------------------------------------------------

    def operand(self, node, what):
        """A matrix operand: (buffer, shape nodes, transposed). `reinterpret_tensor(w, (K, N), (1, K), 0)` is
        w stored [N, K] read transposed (a Linear's weight)."""
        if isinstance(node, ast.Call) and _dotted(node.func) == "reinterpret_tensor":
            base, shape, stride, offset = node.args
            if self.value(offset) != 0:
                raise Untranslatable(what, "an operand at an offset into its buffer")
            shape, stride = list(shape.elts), list(stride.elts)
            values = [self.value(s) for s in shape]
            strides = [self.value(s) for s in stride]
            if len(shape) == 2 and strides == [1, values[0]]:
                return self.tensor(base, what), shape, True
            # A batch of matrices each read transposed: [B, R, C] over memory stored [B, C, R] (x.transpose(1, 2)).
            if len(shape) == 3 and strides == [values[1] * values[2], 1, values[1]]:
                return self.tensor(base, what), shape, True
            if strides == _dense_strides(values):
                return self.tensor(base, what), shape, False
            raise Untranslatable(what, f"an operand with strides {ast.unparse(node.args[2])}")
        ref = self.tensor(node, what)
        shape, stride = self.shape_of(ref)
        if stride is not None and [self.value(s) for s in stride] != _dense_strides([self.value(s) for s in shape]):
            raise Untranslatable(what, f"the operand {ast.unparse(node)} is not contiguous")
        return ref, shape, False

    def dim(self, node):
        """An operand's extent, in our names."""
        return self.expr(node)

    def matmul(self, op, call):
        what = f"extern_kernels.{op}"
        keywords = {k.arg: k.value for k in call.keywords}
        if "out" not in keywords:
            raise Untranslatable(what, "a product without out=")
        positional = list(call.args)
        bias = positional.pop(0) if op == "addmm" else None
        if any(k not in ("out", "alpha", "beta") for k in keywords):
            raise Untranslatable(what, f"options {sorted(keywords)}")
        for k in ("alpha", "beta"):
            if k in keywords and ast.unparse(keywords[k]) != "1":
                raise Untranslatable(what, f"{k}={ast.unparse(keywords[k])}")
        a, a_shape, a_transposed = self.operand(positional[0], what)
        b, b_shape, b_transposed = self.operand(positional[1], what)
        out, out_shape, _ = self.operand(keywords["out"], what)
        if a_transposed and bias is not None:
            # cuBLASLt's step, which adds addmm's bias, reads A row-major [M, K]; cublas.gemm has the transposed A.
            raise Untranslatable(f"{what} of a transposed left operand", "cublaslt.matmul, which adds the bias, reads "
                                 "A row-major [M, K]; only cublas.gemm takes A transposed")
        rank = 3 if op == "bmm" else 2
        if len(a_shape) != rank or len(b_shape) != rank:
            raise Untranslatable(what, f"an operand that is not {rank}-d")
        # The operands' logical shapes ([B,] M, K and [B,] K, N), whatever their memory's order.
        m, k, n = (_unwrap(self.dim(d)) for d in (a_shape[-2], a_shape[-1], b_shape[-1]))
        if op == "bmm":
            step = {"library": "cublas.gemm_batched", "args": [a, b, out, _unwrap(self.dim(a_shape[0])), m, n, k],
                    "options": {}}
        else:
            step = {"library": "cublas.gemm", "args": [a, b, out, m, n, k], "options": {}}
        step["dtype"] = self.dtype_of(a)  # whether TF32 may apply (translate())
        if bias is not None:
            bias_ref, bias_shape, _ = self.operand(bias, what)
            if len(bias_shape) != 1:
                raise Untranslatable(what, "a bias that is not one value per column")
            step["library"] = "cublaslt.matmul"
            step["args"].append(bias_ref)
            step["options"]["epilogue"] = "bias"
        if a_transposed:
            step["options"]["a_transposed"] = "true"
        if b_transposed:
            step["options"]["b_transposed"] = "true"
        self.steps.append(step)

    def convolution(self, name, call):
        """A 1-d, 2-d or 3-d convolution, forward or transposed: cudnn.conv2d, conv3d, conv_transpose2d or
        conv_transpose3d, a 1-d one as the 2-d one over an image one row high."""
        what = "extern_kernels.convolution"
        keywords = {k.arg: _value(k.value) for k in call.keywords}
        transposed = bool(keywords.get("transposed"))
        try:
            x, x_shape, _ = self.operand(call.args[0], what)
            w, w_shape, _ = self.operand(call.args[1], what)
        except Untranslatable as error:
            raise Untranslatable(f"{what} on a channels-last buffer", "cuDNN's steps read NCHW: " + error.why)
        spatial = len(x_shape) - 2
        if spatial not in (1, 2, 3) or len(w_shape) != len(x_shape):
            raise Untranslatable(f"{what} over {spatial} dimensions", "cuDNN's steps are 1-d, 2-d or 3-d")
        library = "cudnn.conv3d" if spatial == 3 else "cudnn.conv2d"
        if transposed:
            library = library.replace(".conv", ".conv_transpose")
        elif any(v != 0 for v in keywords.get("output_padding", [0])):
            raise Untranslatable(f"{what} with output_padding", "a forward convolution has none")
        # The convolution's result has its input's dtype; its shape comes with the assert that follows.
        storage = _Storage(name, None, None, self.dtype_of(x))
        self.buffers[name] = storage
        self.storages.append(storage)
        defaults = {"stride": 1, "padding": 0, "dilation": 1, "output_padding": 0}
        options = {}
        for key, default in defaults.items():
            if key == "output_padding" and not transposed:
                continue
            value = list(keywords.get(key, [default] * spatial))
            # A 1-d convolution is the 2-d one over an image one row high, in the same memory: [N, C, L] is
            # [N, C, 1, L], the weight [K, C, R] is [K, C, 1, R], and the row's stride, padding, dilation (and
            # output_padding) are 1, 0, 1 and 0.
            if spatial == 1:
                value = [default] + value
            options[key] = ",".join(str(v) for v in value)
        groups = keywords.get("groups", 1)
        options["groups"] = str(groups)
        # The weight is [K, C / groups, ...] forward, and [C, K / groups, ...] transposed (ConvTranspose's own
        # layout): the output's channels are its second extent times the groups.
        out_channels = self.dim(w_shape[0])
        if transposed:
            per_group = self.dim(w_shape[1])
            out_channels = (str(int(per_group) * groups) if re.fullmatch(r"\d+", per_group)
                            else per_group if groups == 1 else f"{groups} * {self.wrap(per_group)}")
        if spatial == 1:
            x_dims = [self.dim(x_shape[0]), self.dim(x_shape[1]), "1", self.dim(x_shape[2])]
            w_dims = [out_channels, "1", self.dim(w_shape[2])]
        else:
            x_dims = [self.dim(d) for d in x_shape]
            w_dims = [out_channels] + [self.dim(d) for d in w_shape[2:]]
        args = [x, w, storage] + x_dims + w_dims
        bias = call.keywords and [k.value for k in call.keywords if k.arg == "bias"]
        if bias and ast.unparse(bias[0]) != "None":
            args.append(self.tensor(bias[0], what))
        self.steps.append({"library": library, "args": args, "options": options, "conv_input": x,
                           "dtype": self.dtype_of(x)})

    def avg_pool3d(self, name, call):
        """aten.avg_pool3d, which Inductor does not lower and calls as it is: cudnn.avg_pool3d."""
        what = "aten.avg_pool3d"
        given = dict(zip(("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"),
                         (_value(a) for a in call.args[1:])))
        given.update({k.arg: _value(k.value) for k in call.keywords})
        if given.get("ceil_mode"):
            raise Untranslatable(f"{what} with ceil_mode", "cuDNN's pooling rounds its output down")
        if given.get("divisor_override") is not None:
            raise Untranslatable(f"{what} with divisor_override", "cuDNN's pooling divides by its window")
        kernel = list(given.get("kernel_size") or [])
        settings = {"kernel_size": kernel, "stride": list(given.get("stride") or kernel),  # [] is the kernel's
                    "padding": list(given.get("padding") or [0])}
        options = {}
        for key, values in settings.items():
            values = values * 3 if len(values) == 1 else values
            if len(values) != 3 or not all(isinstance(v, int) for v in values):
                raise Untranslatable(what, f"a {key} of neither one nor three integers")
            options[key] = ",".join(str(v) for v in values)
        options["count_include_pad"] = "true" if given.get("count_include_pad", True) else "false"
        try:
            x, x_shape, _ = self.operand(call.args[0], what)
        except Untranslatable as error:
            raise Untranslatable(f"{what} on a channels-last buffer", "cudnn.avg_pool3d reads NCDHW: " + error.why)
        if len(x_shape) != 5:
            raise Untranslatable(f"{what} of a {len(x_shape)}-d input", "cudnn.avg_pool3d takes [N, C, D, H, W]")
        # The result has its input's dtype; its shape comes with the assert that follows.
        storage = _Storage(name, None, None, self.dtype_of(x))
        self.buffers[name] = storage
        self.storages.append(storage)
        self.steps.append({"library": "cudnn.avg_pool3d", "args": [x, storage] + [self.dim(d) for d in x_shape],
                           "options": options, "conv_input": x, "conv_output": storage})

    def embedding_bag(self, name, call):
        """aten._embedding_bag(weight, indices, offsets) in sum mode, which Inductor calls as it is: a kernel of
        ours (_EMBEDDING_BAG_SUM). Its other results (offset2bag, bag_size, max_indices) feed only a backward."""
        what = "aten._embedding_bag"
        names = ("weight", "indices", "offsets", "scale_grad_by_freq", "mode", "sparse", "per_sample_weights",
                 "include_last_offset", "padding_idx")
        given = dict(zip(names, call.args))
        given.update({k.arg: k.value for k in call.keywords})
        for key, default in (("mode", 0), ("per_sample_weights", None), ("include_last_offset", False),
                             ("padding_idx", -1)):
            if key in given and _value(given[key]) not in (default, None if key == "padding_idx" else default):
                raise Untranslatable(f"{what} with {key}={ast.unparse(given[key])}", "the program's embedding bag "
                                     "sums each bag's rows (mode='sum', offsets of each bag's start, no weights per "
                                     "sample, no padding index)")
        refs = {}
        for key in ("weight", "indices", "offsets"):
            if key not in given:
                raise Untranslatable(what, f"a call without its {key}")
            try:
                ref, shape, transposed = self.operand(given[key], f"{what}'s {key}")
            except Untranslatable as error:
                raise Untranslatable(f"{what}'s {key}", error.why)
            if transposed or len(shape) != (2 if key == "weight" else 1):
                raise Untranslatable(f"{what}'s {key}", f"a {len(shape)}-d operand" if not transposed else
                                     "a transposed operand")
            refs[key] = (ref, shape)
        if self.dtype_of(refs["weight"][0]) not in ("f32", "f16", "bf16"):
            raise Untranslatable(f"{what}'s weight", f"dtype {self.dtype_of(refs['weight'][0])}")
        for key in ("indices", "offsets"):
            if self.dtype_of(refs[key][0]) not in ("i64", "i32"):
                raise Untranslatable(f"{what}'s {key}", f"dtype {self.dtype_of(refs[key][0])}")
        (weight, weight_shape), (indices, indices_shape), (offsets, offsets_shape) = \
            refs["weight"], refs["indices"], refs["offsets"]
        # One kernel however many calls launch it: the program's source defines it once.
        kernel = next((k for k in self.launched if k.name == "ke_embedding_bag_sum"), None)
        if kernel is None:
            kernel = _embedding_bag_kernel(self.value(weight_shape[1]))
            self.launched.append(kernel)
        # The pooled rows have the weight's dtype; their shape comes with the assert that follows `buf1 = buf0[0]`.
        storage = _Storage(name + "_0", None, None, self.dtype_of(weight))
        self.storages.append(storage)
        self.results[name] = [storage, None, None, None]
        args = [weight, indices, offsets, storage, self.dim(offsets_shape[0]), self.dim(indices_shape[0]),
                self.dim(weight_shape[1])]
        self.steps.append({"kernel": kernel, "args": args, "numels": dict(zip(kernel.params, args))})

    # Outputs --------------------------------------------------------------------------------------------------

    def outputs(self, node):
        returned = node.elts if isinstance(node, ast.Tuple) else [node]
        outs = [p for p in self.binding.spec["params"] if p["role"] == "out"]
        if len(returned) != len(outs):
            raise Untranslatable("call()'s results", f"{len(returned)} tensors for the spec's {len(outs)} outputs")
        for result, param in zip(returned, outs):
            view = None
            if isinstance(result, ast.Call) and _dotted(result.func) == "reinterpret_tensor":
                # A view of a buffer it wrote (a 1-d pool's result without its unsqueezed dimension, a batched
                # product's [B * M, N] as [B, M, N]): that buffer is the output, where the view is all of it.
                view, result = result, result.args[0]
            if not (isinstance(result, ast.Name) and result.id in self.buffers):
                raise Untranslatable("call()'s results", f"{ast.unparse(view or result)} is not a buffer it wrote")
            storage = self.buffers[result.id]
            if storage.root().shape_nodes is None:
                raise Untranslatable(f"the output {result.id}", "call() asserts no shape for it")
            if view is not None:
                if self.value(view.args[3]) != 0:
                    raise Untranslatable("call()'s results: a view at an offset into a buffer",
                                         "a plan passes whole buffers")
                shape_nodes, stride_nodes = list(view.args[1].elts), list(view.args[2].elts)
            else:
                shape_nodes, stride_nodes = storage.shape_nodes, storage.stride_nodes
            shape = [self.value(s) for s in shape_nodes]
            if [self.value(s) for s in stride_nodes] != _dense_strides(shape):
                raise Untranslatable(f"the output {result.id}", "it is not laid out row-major, as our outputs are")
            root = storage.root()
            if (view is not None or root is not storage) and not self.same_numel(shape_nodes, root.shape_nodes):
                raise Untranslatable(f"the output {result.id}", f"{ast.unparse(view) if view else result.id} "
                                     f"is not all of {root.name}")
            if root.dtype != param["dtype"]:
                raise Untranslatable(f"the output {result.id}", f"dtype {root.dtype}, the spec's {param['dtype']}")
            if root.output is not None:
                raise Untranslatable(f"the output {result.id}", "one buffer returned as two outputs")
            root.output = param["name"]

    def same_numel(self, shape, other):
        """Whether two shapes hold as many elements: at the example's sizes and at other sizes too, so that a
        coincidence of the example (4 * 4 == 16) does not pass for an identity."""
        def numel(nodes, values):
            total = 1
            for node in nodes:
                total *= _evaluate(node, values)
            return total

        if other is None:
            return False
        moved = {name: value + 5 + 2 * i for i, (name, value) in enumerate(self.binding.symbol_values.items())}
        try:
            return all(numel(shape, values) == numel(other, values) for values in (self.binding.symbol_values, moved))
        except (NameError, ZeroDivisionError):
            return False


# ---------------------------------------------------------------------------------------------------------------
# The program


def _tunable_names(kernels):
    """Each kernel's constexpr -> its tunable: `XBLOCK` alone, `K0_XBLOCK` ... where several kernels run."""
    names = {}
    for index, kernel in enumerate(kernels):
        prefix = f"K{index}_" if len(kernels) > 1 else ""
        names[kernel.name] = {c: prefix + c for c in kernel.constexprs}
    return names


def _grid(kernel, numels, tunable):
    """Inductor's grid types: Grid1D, one program per XBLOCK elements (rows of a reduction, persistent too);
    Grid2D, x then y; Grid2DWithYZOverflow, Grid2D with y's blocks over y and z."""
    if isinstance(kernel, _OwnKernel):
        return kernel.grid(numels, tunable)
    grid_type = kernel.inductor_meta.get("grid_type")
    x = f"cdiv({_unwrap(numels['xnumel'])}, {tunable['XBLOCK']})"
    if grid_type == "Grid1D":
        return [x]
    if grid_type == "Grid2D":
        return [x, f"cdiv({_unwrap(numels['ynumel'])}, {tunable['YBLOCK']})"]
    if grid_type == "Grid2DWithYZOverflow":
        # y's blocks spread over y and z where they outgrow y's 65535: the kernel's y block is
        # program_id(1) + program_id(2) * num_programs(1).
        blocks = f"cdiv({_unwrap(numels['ynumel'])}, {tunable['YBLOCK']})"
        spread = f"max(1, cdiv({blocks}, 65535))"
        return [x, f"cdiv({blocks}, {spread})", spread]
    raise Untranslatable(f"kernel {kernel.name}", f"grid type {grid_type}")


def _temporary_shape(plan, storage):
    """A temporary holds its buffer's extent: the product of its shape where its strides are a permutation of
    dense ones (a channels-last layout too), else the furthest element plus one."""
    shape = [plan.value(s) for s in storage.shape_nodes]
    strides = [plan.value(s) for s in storage.stride_nodes]
    order = sorted(range(len(shape)), key=lambda i: (strides[i], shape[i]))
    step = 1
    for i in order:
        if shape[i] != 1 and strides[i] != step:
            raise Untranslatable(f"the buffer {storage.name}", "a layout with gaps")
        step *= shape[i]
    # A 0-d buffer (a full reduction's result, as Frobenius norm's sum) holds one element.
    return [_unwrap(plan.expr(s)) for s in storage.shape_nodes] or ["1"]


def _is_nchw(plan, ref):
    if not isinstance(ref, _Storage):
        return True
    shape = [plan.value(s) for s in ref.shape_nodes]
    return [plan.value(s) for s in ref.stride_nodes] == _dense_strides(shape)


def _chosen_in(output_code):
    # scripts/capture-inductor.py appends the autotuner's choices to the code it records.
    found = re.search(r"^# kernelevolve-chosen: (\{.*\})$", output_code, re.M)
    try:
        chosen = json.loads(found.group(1)) if found else {}
    except ValueError:
        return {}
    return chosen if isinstance(chosen, dict) and "error" not in chosen else {}


def _arg_names_in(output_code):
    # scripts/capture-inductor.py records what each of call()'s arguments is: "state KEY", "input I" or null.
    found = re.search(r"^# kernelevolve-args: (\[.*\])$", output_code, re.M)
    try:
        identities = json.loads(found.group(1)) if found else None
    except ValueError:
        return None
    return state_names(identities) if isinstance(identities, list) else None


def state_names(identities):
    """What the capture saw each argument to be ("state fc.weight", "input 0", None) -> the spec param of each
    state entry (fc_weight, as the spec derived from the module names it), "input I" for the module's I-th input
    (_match_tensors() names it: the spec's I-th param), None for the others."""
    def name(key):
        out = "".join(c if c.isalnum() or c == "_" else "_" for c in key.replace(".", "_"))
        return out if out and not out[0].isdigit() else "p_" + out

    def one(i):
        if isinstance(i, str) and i.startswith("state "):
            return name(i[len("state "):])
        return i if isinstance(i, str) and re.fullmatch(r"input \d+", i) else None
    return [one(i) for i in identities]


def _first(values, value):
    return [value] + [v for v in values if v != value]


def _tf32_libraries(spec):
    """The libraries whose f32 calls ran on TF32 in the capture: those whose switch the spec's precision turns on
    (cudnn: torch.backends.cudnn.allow_tf32; cublas and cublaslt: torch.backends.cuda.matmul.allow_tf32). The
    capture driver set torch's switches from the same precision before it compiled (inductor_capture.apply_precision),
    so reading it here reads what torch had; this module never imports torch. A policy alone is PyTorch's defaults."""
    precision = spec.get("precision")
    if precision == "as-run":
        precision = {"cudnn_tf32": True, "matmul_tf32": False}
    if not isinstance(precision, dict):
        return set()
    return ({"cudnn"} if precision.get("cudnn_tf32") else set()) | \
        ({"cublas", "cublaslt"} if precision.get("matmul_tf32") else set())


def translate(output_code, spec, chosen=None, arg_names=None):
    """Inductor's output code for a problem -> {"source", "tunables", "notes", "constraints"} (see the module's
    docstring). `constraints` lists the sizes Inductor fixed in the code (`hidden == 768`): the program computes
    the problem only where they hold. `chosen`: the configuration Inductor's autotuner kept for each kernel, by
    name ({"triton_red_fused_sum_0": {"XBLOCK": 1, "R0_BLOCK": 2048, "num_warps": 16, "num_stages": 1}}), known
    only after a run: each tunable's first value (node 0's) is the chosen one. Without it, the choices recorded in
    the code are used, else the heuristics' first configuration. `arg_names`: the spec param each of call()'s
    arguments is, where the capture saw it (state_names()), else None; without it, those recorded in the code.
    A library step on f32 data takes "math": "tf32" where the spec's "precision" had its library's TF32 switch on
    (_tf32_libraries): the math the captured torch.compile ran, which the run's precision allows."""
    if chosen is None:
        chosen = _chosen_in(output_code)
    if arg_names is None:
        arg_names = _arg_names_in(output_code)
    tree = ast.parse(output_code)
    kernels = _kernels_of(tree)
    examples = _example_args(tree)
    call = _function(tree, "call", in_class="Runner")
    binding = _Binding(spec)
    _match_tensors(call, examples, binding, arg_names)
    _tie_sizes(call, examples, binding)
    plan = _Plan(binding, kernels)
    plan.run(call)
    if not plan.steps:
        raise Untranslatable("call()", "it launches nothing")

    for step in plan.steps:
        if step.get("library", "").startswith("cudnn."):
            if not _is_nchw(plan, step["conv_input"]) or not _is_nchw(plan, step.get("conv_output", step["args"][2])):
                call = "aten.avg_pool3d" if "conv_output" in step else "extern_kernels.convolution"
                raise Untranslatable(f"{call} on a channels-last buffer", "cuDNN's steps read and write NCHW")

    _batch_lookups(plan)
    names = _tunable_names(plan.launched)
    several = len(plan.launched) > 1
    options = {kernel.name: {key: f"K{index}_{key}" for key in ("num_warps", "num_stages")}
               for index, kernel in enumerate(plan.launched)}
    helpers = set()
    bodies, tunables, notes = [], {}, []
    carried = {}  # a kernel's own function's name in the program -> its text
    for kernel in plan.launched:
        body = _rewrite_runtime(kernel, kernel.body, helpers)
        for function, text in kernel.functions.items():
            text = _rewrite_runtime(kernel, text, helpers)
            if carried.get(function, text) != text:
                # Two kernels' sources define one name differently (each its own `_triton_helper_fn_add0`).
                renamed = f"{function}_{kernel.name}"
                text = re.sub(rf"\b{function}\b", renamed, text)
                body = re.sub(rf"\b{function}\b", renamed, body)
                function = renamed
            if function not in carried:
                carried[function] = text
                bodies.append(text)
        for constexpr, tunable in names[kernel.name].items():
            if tunable != constexpr:
                body = re.sub(rf"\b{constexpr}\b", tunable, body)
        bodies.append(body)
        configs = _configs(kernel)
        for constexpr, tunable in names[kernel.name].items():
            values = []
            for config in configs:
                if constexpr not in config:
                    raise Untranslatable(f"kernel {kernel.name}", f"no configuration sets its {constexpr}")
                if config[constexpr] not in values:
                    values.append(config[constexpr])
            picked = chosen.get(kernel.name, {}).get(constexpr)
            tunables[tunable] = _first(values, picked) if isinstance(picked, int) else values
        picked = chosen.get(kernel.name, {})
        for key in ("num_warps", "num_stages"):
            # Each kernel its own where several run, as Inductor launches them: a pointwise kernel's 4 warps would
            # starve a reduction that its autotuner gave 16.
            values = ([picked[key]] if isinstance(picked.get(key), int) else []) + [c[key] for c in configs]
            tunables[options[kernel.name][key] if several else key] = list(dict.fromkeys(values))
        if isinstance(kernel, _OwnKernel):
            notes.append(f"{kernel.name}: ours, where Inductor calls ATen, {len(configs)} configuration(s)")
            continue
        notes.append(f"{kernel.name}: {kernel.heuristic}, {len(configs)} configuration(s) of Inductor's heuristics"
                     + (", starting from its autotuner's choice" if picked else ""))

    steps = []
    tf32_libraries = _tf32_libraries(spec)
    for step in plan.steps:
        if "kernel" in step:
            kernel = step["kernel"]
            tunable = names[kernel.name]
            entry = {"kernel": kernel.name, "grid": _grid(kernel, step["numels"], tunable)}
            if several:
                entry.update(options[kernel.name])
            entry["args"] = [_ref(a) for a in step["args"]]
            steps.append(entry)
            # Persistent reductions and static kernels reassign their numels in their bodies; the launch
            # still passes them, as Inductor's does.
        else:
            entry = {"library": step["library"], "args": [_ref(a) for a in step["args"]]}
            options = dict(step["options"])
            tf32 = step.get("dtype") == "f32" and step["library"].split(".")[0] in tf32_libraries
            if tf32:
                options["math"] = "tf32"
            if options:
                entry["options"] = options
            steps.append(entry)
            notes.append(f"extern_kernels -> {step['library']}" + (" (TF32, as the capture ran)" if tf32 else ""))

    used = {id(a.root()) for s in plan.steps for a in s["args"] if isinstance(a, _Storage)}
    for storage in plan.storages:
        if id(storage) in used and storage.shape_nodes is None:
            raise Untranslatable(f"the buffer {storage.name}", "call() asserts no shape for it")
    temporaries = [{"name": s.name, "dtype": s.dtype, "shape": _temporary_shape(plan, s)}
                   for s in plan.storages if s.output is None and id(s) in used]
    block = {"temporaries": temporaries, "steps": steps} if temporaries else {"steps": steps}
    texts = bodies + [_HELPERS[name] for name in helpers]
    source = _source(block, bodies, helpers, bool(re.search(r"\blibdevice\.", "\n".join(texts))))
    if binding.constraints:
        notes.append("specialised by Inductor to " + ", ".join(binding.constraints))
    return {"source": source, "tunables": tunables, "constraints": binding.constraints,
            "notes": "Translated from torch.compile's (Inductor's) output code: " + "; ".join(notes) + "."}


def _ref(arg):
    if isinstance(arg, _Storage):
        arg = arg.root()
        return arg.output or arg.name
    return arg


def _source(block, bodies, helpers, libdevice):
    plan_text = json.dumps(block, indent=None)
    # One step a line keeps the block readable where a person or a model reads it.
    plan_text = plan_text.replace('{"kernel"', '\n   {"kernel"').replace('{"library"', '\n   {"library"')
    parts = ['"""kernelevolve-plan\n' + plan_text + '\n"""', "import triton", "import triton.language as tl"]
    if libdevice:
        parts.append("from triton.language.extra import libdevice")
    text = "\n".join(parts) + "\n\n"
    for name, helper in _HELPERS.items():
        if name in helpers:
            text += "\n" + helper + "\n"
    for body in bodies:
        text += "\n@triton.jit\n" + body + "\n\n"
    return text
