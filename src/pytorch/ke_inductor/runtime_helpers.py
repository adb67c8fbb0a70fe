"""The kernels' text: Inductor's runtime helpers (triton_helpers) rewritten to plain Triton functions of the
program's own source.
"""

import re

from .errors import Untranslatable


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
