"""Integer expressions: Inductor's sympy text over its symbols, rendered over our size names, and evaluated at
the example's sizes.
"""

import ast
import re

from .errors import Untranslatable


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
