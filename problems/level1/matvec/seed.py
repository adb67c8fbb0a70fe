import triton
import triton.language as tl


@triton.jit
def matvec(A, x, y, M, K, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    # y = A x: one program per BLOCK_M rows, walking along K in chunks of BLOCK_K into a BLOCK_M x BLOCK_K
    # tile of partial sums, reduced along K at the end.
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    rmask = rows < M
    acc = tl.zeros([BLOCK_M, BLOCK_K], dtype=tl.float32)
    for start in range(0, K, BLOCK_K):
        cols = start + tl.arange(0, BLOCK_K)
        cmask = cols < K
        a = tl.load(A + rows[:, None] * K + cols[None, :], mask=rmask[:, None] & cmask[None, :], other=0.0)
        v = tl.load(x + cols, mask=cmask, other=0.0)
        acc += a * v[None, :]
    tl.store(y + rows, tl.sum(acc, axis=1), mask=rmask)
