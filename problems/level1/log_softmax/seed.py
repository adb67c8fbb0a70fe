import triton
import triton.language as tl


@triton.jit
def log_softmax(x, y, M, N, BLOCK: tl.constexpr):
    # One program per row, three passes over it in chunks of BLOCK: the maximum, the sum of exp(x - max),
    # then y = x - (max + log(sum)).
    row = tl.program_id(0).to(tl.int64)
    src = x + row * N
    dst = y + row * N
    m = tl.zeros([BLOCK], dtype=tl.float32) - float("inf")
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        m = tl.maximum(m, tl.load(src + cols, mask=cols < N, other=-float("inf")))
    peak = tl.max(m, axis=0)
    s = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        v = tl.load(src + cols, mask=mask, other=0.0)
        s += tl.where(mask, tl.exp(v - peak), 0.0)
    lse = peak + tl.log(tl.sum(s, axis=0))
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        v = tl.load(src + cols, mask=mask, other=0.0)
        tl.store(dst + cols, v - lse, mask=mask)
