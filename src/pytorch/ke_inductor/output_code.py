"""Reading Inductor's output code: its Triton kernels (their heuristics' metadata and text), its functions, and
get_args()'s example arguments.
"""

import ast
import re

from .errors import Untranslatable


_TORCH_DTYPES = {"torch.float32": "f32", "torch.float16": "f16", "torch.bfloat16": "bf16", "torch.float64": "f64",
                 "torch.int64": "i64", "torch.int32": "i32", "torch.int8": "i8", "torch.uint8": "u8",
                 "torch.bool": "u8"}  # a bool tensor is one byte an element, as our bridge passes it: Inductor's
# kernels load it `.to(tl.int1)` and store 0 or 1


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
