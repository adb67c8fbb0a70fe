import triton
import triton.language as tl


@triton.jit
def row_sum(x, y, M, N, BLOCK: tl.constexpr):
    # y[i] = sum_j x[i, j], one program per row, reading it in chunks of BLOCK into BLOCK partial sums.
    row = tl.program_id(0).to(tl.int64)
    src = x + row * N
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(src + cols, mask=cols < N, other=0.0)
    tl.store(y + row, tl.sum(acc, axis=0))
