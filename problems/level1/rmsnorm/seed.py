import triton
import triton.language as tl


@triton.jit
def rmsnorm(x, w, y, M, N, eps, BLOCK: tl.constexpr):
    # One program per row, two passes over it in chunks of BLOCK: the sum of squares, then
    # y = x / sqrt(mean(x^2) + eps) * w.
    row = tl.program_id(0).to(tl.int64)
    src = x + row * N
    dst = y + row * N
    sq = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        v = tl.load(src + cols, mask=cols < N, other=0.0)
        sq += v * v
    r = 1.0 / tl.sqrt(tl.sum(sq, axis=0) / N + eps)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        v = tl.load(src + cols, mask=mask, other=0.0)
        g = tl.load(w + cols, mask=mask, other=0.0)
        tl.store(dst + cols, v * r * g, mask=mask)
