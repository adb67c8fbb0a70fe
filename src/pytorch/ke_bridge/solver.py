"""The size-expression solver: integer expressions that give a dimension's values at every sample, found by
fitting (affine, linear) or by a bottom-up enumeration."""

import ast

import torch


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
