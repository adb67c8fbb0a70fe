import triton
import triton.language as tl


@triton.jit
def argmax(x, idx, B, R, C, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    # idx[b, c] = the first r with the largest x[b, r, c], as int64: program (i, b) takes BLOCK_C columns of
    # batch b and walks down all R rows BLOCK_R at a time. Each of the BLOCK_R lanes of a column keeps the
    # first index of its own maximum (a strict > keeps the earliest); the lanes then combine by the larger
    # value, and among equal values the smaller index.
    b = tl.program_id(1).to(tl.int64)
    cols = tl.program_id(0).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cols < C
    src = x + b * R * C
    best_v = tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.float32) - float("inf")
    best_i = tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.int64) + R
    for start in range(0, R, BLOCK_R):
        rows = (start + tl.arange(0, BLOCK_R)).to(tl.int64)
        mask = (rows[:, None] < R) & cmask[None, :]
        v = tl.load(src + rows[:, None] * C + cols[None, :], mask=mask, other=-float("inf"))
        better = mask & (v > best_v)
        best_v = tl.where(better, v, best_v)
        best_i = tl.where(better, rows[:, None], best_i)
    m = tl.max(best_v, axis=0)
    first = tl.min(tl.where(best_v == m[None, :], best_i, R), axis=0)
    tl.store(idx + b * C + cols, first, mask=cmask)
