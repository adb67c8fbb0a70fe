"""Runs a Triton seed of problems/pytorch (a triton_bf16.json) on the CPU, with numpy standing in for Triton, and
compares its output with the problem's module in float64 on the same bf16 inputs, within bf16's 1e-2.

    triton_numpy.py SPEC [odd | SIZES_JSON]    exits 0 when every element is within the tolerance, 1 otherwise

Triton itself needs a GPU, so in CI nothing else runs these seeds: this checks their indexing, masks, tile
loop bounds and arithmetic (each program runs in turn on whole numpy tiles; tl.dot is a float64 product rounded to
fp32, .to(tl.bfloat16) rounds to nearest even), not Triton's compilation, layouts or speed. Only the parts of
triton.language the seeds use are here; a seed that uses another fails with an AttributeError, to be added. Sizes
are the module's defaults (its globals), each changed as SIZES_JSON says; `odd` makes each size global n of the spec
3n/4 + 1 (256 becomes 193), so that no size is a multiple of a tile and every mask is exercised."""
import contextlib
import importlib.util
import json
import os
import re
import sys
import types

import numpy as np
import torch


class Tile(np.ndarray):
    """A tile or a scalar: a numpy array with Triton's .to(dtype)."""

    def __new__(cls, a):
        return np.asarray(a).view(cls)

    def to(self, dtype):
        if dtype == "bf16":
            return bf16_round(self)
        return Tile(np.asarray(self).astype(dtype))


def bf16_round(a):
    bits = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return Tile(rounded.astype(np.uint32).view(np.float32))


class Pointer:
    """A buffer and element offsets: pointer arithmetic as Triton's, by broadcasting."""

    def __init__(self, buffer, offsets=0):
        self.buffer, self.offsets = buffer, np.asarray(offsets, dtype=np.int64)

    def __add__(self, other):
        return Pointer(self.buffer, self.offsets + np.asarray(other, dtype=np.int64))

    __radd__ = __add__


program = [0, 0, 0]


def language():
    tl = types.ModuleType("triton.language")
    tl.constexpr = type("constexpr", (), {})
    tl.int64, tl.int32, tl.float32, tl.bfloat16 = np.int64, np.int32, np.float32, "bf16"

    def load(ptr, mask=None, other=0.0):
        offsets, mask = np.broadcast_arrays(ptr.offsets, np.ones((), bool) if mask is None else np.asarray(mask))
        safe = np.where(mask, offsets, 0)
        if not ((safe >= 0) & (safe < ptr.buffer.size)).all():
            raise IndexError("a load outside its buffer")
        return Tile(np.where(mask, ptr.buffer[safe], other).astype(ptr.buffer.dtype))

    def store(ptr, value, mask=None):
        offsets, mask, value = np.broadcast_arrays(ptr.offsets, np.ones((), bool) if mask is None else np.asarray(mask),
                                                   np.asarray(value))
        if not ((offsets[mask] >= 0) & (offsets[mask] < ptr.buffer.size)).all():
            raise IndexError("a store outside its buffer")
        ptr.buffer[offsets[mask]] = value[mask]

    def dot(a, b, acc=None):
        product = (np.asarray(a, np.float64) @ np.asarray(b, np.float64)).astype(np.float32)
        return Tile(product if acc is None else acc + product)

    def erf(x):
        return Tile(torch.erf(torch.from_numpy(np.ascontiguousarray(x, np.float32))).numpy())

    def exp2(x):
        with np.errstate(over="ignore"):
            return Tile(np.exp2(np.asarray(x, np.float32)))

    tl.program_id = lambda axis: Tile(np.int32(program[axis]))
    tl.arange = lambda start, end: Tile(np.arange(start, end, dtype=np.int32))
    tl.cdiv = lambda a, b: (a + b - 1) // b
    tl.zeros = lambda shape, dtype: Tile(np.zeros(shape, dtype=dtype))
    tl.full = lambda shape, value, dtype: Tile(np.full(shape, value, dtype=dtype))
    tl.load, tl.store, tl.dot, tl.erf, tl.exp2 = load, store, dot, erf, exp2
    tl.where = lambda c, a, b: Tile(np.where(c, a, b).astype(np.float32))
    tl.maximum = lambda a, b: Tile(np.maximum(a, b))
    tl.minimum = lambda a, b: Tile(np.minimum(a, b))
    tl.max = lambda x, axis: Tile(np.max(x, axis=axis))
    tl.sum = lambda x, axis: Tile(np.sum(x, axis=axis, dtype=np.float32))
    tl.sqrt = lambda x: Tile(np.sqrt(np.asarray(x, np.float32)))
    return tl


@contextlib.contextmanager
def standing_in():
    """`import triton` and `import triton.language as tl` give this file's numpy stand-in meanwhile (a kernel source
    imported then keeps it); what sys.modules held before is put back."""
    triton = types.ModuleType("triton")
    triton.jit = lambda fn: fn
    triton.language = language()
    names = ("triton", "triton.language")
    saved = {name: sys.modules.get(name) for name in names}
    sys.modules.update(zip(names, (triton, triton.language)))
    try:
        yield triton
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def launch(kernel, grid, args, constants):
    """Every program of `grid` (one to three dimensions) in turn, as Triton's launch would run them."""
    grid = list(grid) + [1] * (3 - len(grid))
    for z in range(grid[2]):
        for y in range(grid[1]):
            for x in range(grid[0]):
                program[:] = [x, y, z]
                kernel(*args, **constants)


def expression(text, names):
    return int(eval(str(text).replace("cdiv", "_cdiv"), {"_cdiv": lambda a, b: -(-a // b), "min": min, "max": max},
                    names))


def main():
    spec_path = sys.argv[1]
    folder = os.path.dirname(os.path.abspath(spec_path))
    spec = json.load(open(spec_path))
    changes = json.loads(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2] != "odd" else {}
    source = open(os.path.join(folder, spec["reference"]["pytorch"])).read()
    if len(sys.argv) > 2 and sys.argv[2] == "odd":
        for p in spec["params"]:
            found = re.search(rf"^{p['name']} = (\d+)$", source, flags=re.M) if p["role"] == "size" else None
            if found:
                changes[p["name"]] = int(found.group(1)) * 3 // 4 + 1
    for name, value in changes.items():
        source = re.sub(rf"^{name} = .*$", f"{name} = {value}", source, flags=re.M)
    module = {}
    exec(compile(source, "model.py", "exec"), module)
    torch.manual_seed(0)
    model = module["Model"](*module["get_init_inputs"]()).double()
    inputs = [x.to(torch.bfloat16).double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x
              for x in module["get_inputs"]()]
    weights = {key.replace(".", "_"): p for key, p in model.named_parameters()}
    with torch.no_grad():
        for p in weights.values():
            p.copy_(p.to(torch.bfloat16).double())
        expected = model(*inputs).float().numpy()

    sizes = {p["name"]: module[p["name"]] for p in spec["params"] if p["role"] == "size"}
    tunables = {name: values[0] for name, values in spec["tunables"].items()}
    for constraint in spec.get("constraints", []):
        if not eval(constraint, {}, {**sizes, **tunables}):
            raise SystemExit(f"the seed point breaks the constraint {constraint} at {sizes}")
    tensors = iter(x for x in inputs if isinstance(x, torch.Tensor))
    args, out = [], None
    for p in spec["params"]:
        if p["role"] == "size":
            args.append(Tile(np.int64(sizes[p["name"]])))
        elif p["role"] == "scalar":
            args.append(np.float32(p["value"]))
        elif p["role"] == "in":
            t = weights[p["name"]] if p["name"] in weights else next(tensors)
            args.append(Pointer(t.detach().float().numpy().ravel().copy()))
        else:
            out = np.full(expected.size, np.nan, np.float32)
            args.append(Pointer(out))
    seed = importlib.util.spec_from_file_location("seed", os.path.join(folder, spec["seed"]["file"]))
    kernel_module = importlib.util.module_from_spec(seed)
    with standing_in():
        seed.loader.exec_module(kernel_module)
    kernel = getattr(kernel_module, spec["entry"])
    names = {**sizes, **tunables}
    grid = [expression(g, names) for g in spec["launch"]["grid"]]
    constants = {k: v for k, v in tunables.items() if k not in ("num_warps", "num_stages")}
    launch(kernel, grid, args, constants)
    got = out.reshape(expected.shape)
    excess = np.abs(got - expected) - (1e-2 + 1e-2 * np.abs(expected))
    worst = int(np.argmax(np.where(np.isnan(excess), np.inf, excess)))
    ok = bool(np.isfinite(got).all() and (excess <= 0).all())
    print(f"{spec['name']} at {sizes}, {constants}: {'ok' if ok else 'wrong'}; worst element {worst}: "
          f"{got.ravel()[worst]} against {expected.ravel()[worst]}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
