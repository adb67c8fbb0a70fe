import triton
import triton.language as tl


@triton.jit
def col_mean(x, y, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # y[j] = (1/M) sum_i x[i, j], one program per BLOCK_N columns, walking down all M rows BLOCK_M at a
    # time into a BLOCK_M x BLOCK_N tile of partial sums.
    cols = tl.program_id(0).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    cmask = cols < N
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for start in range(0, M, BLOCK_M):
        rows = start + tl.arange(0, BLOCK_M)
        mask = (rows[:, None] < M) & cmask[None, :]
        acc += tl.load(x + rows[:, None] * N + cols[None, :], mask=mask, other=0.0)
    tl.store(y + cols, tl.sum(acc, axis=0) / M, mask=cmask)
