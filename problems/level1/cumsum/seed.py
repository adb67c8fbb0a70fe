import triton
import triton.language as tl


@triton.jit
def cumsum(x, y, M, N, BLOCK: tl.constexpr):
    # Inclusive prefix sum along each row, one program per row: each chunk of BLOCK is scanned with
    # tl.cumsum and offset by the running total of the chunks before it.
    row = tl.program_id(0).to(tl.int64)
    src = x + row * N
    dst = y + row * N
    carry = 0.0
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        v = tl.load(src + cols, mask=mask, other=0.0)
        tl.store(dst + cols, tl.cumsum(v, axis=0) + carry, mask=mask)
        carry += tl.sum(v, axis=0)
