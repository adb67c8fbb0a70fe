"""Kernels of ours where Inductor calls aten._embedding_bag as it is: the one-table sum, and the batched kernel
over lookups side by side.
"""

from .heuristics import _next_power_of_2
from .output_code import _OwnKernel
from .size_expressions import _unwrap


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
