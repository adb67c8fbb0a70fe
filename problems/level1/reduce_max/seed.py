import triton
import triton.language as tl


@triton.jit
def reduce_max(x, y, B, R, C, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    # y[b, c] = max_r x[b, r, c]: program (i, b) takes BLOCK_C columns of batch b and walks down all R rows
    # BLOCK_R at a time, keeping a BLOCK_R x BLOCK_C tile of running maxima.
    b = tl.program_id(1).to(tl.int64)
    cols = tl.program_id(0).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cols < C
    src = x + b * R * C
    acc = tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.float32) - float("inf")
    for start in range(0, R, BLOCK_R):
        rows = start + tl.arange(0, BLOCK_R)
        mask = (rows[:, None] < R) & cmask[None, :]
        v = tl.load(src + rows[:, None] * C + cols[None, :], mask=mask, other=-float("inf"))
        acc = tl.maximum(acc, v)
    tl.store(y + b * C + cols, tl.max(acc, axis=0), mask=cmask)
