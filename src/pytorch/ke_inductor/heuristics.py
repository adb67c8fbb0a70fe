"""Inductor's configurations, as torch 2.11's triton_heuristics computes them (pointwise, _reduction_configs,
_persistent_reduction_configs), simplified to what the fixtures' kernels reach. The file does not say which
one the autotuner picked at run time: the first is the one its heuristics list first.
"""

from .errors import Untranslatable
from .output_code import _OwnKernel


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
