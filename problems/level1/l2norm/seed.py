import triton
import triton.language as tl


@triton.jit
def l2norm(x, y, M, N, BLOCK: tl.constexpr):
    # One program per row, two passes over it in chunks of BLOCK: the sum of squares, then
    # y = x / max(||x||_2, 1e-12).
    row = tl.program_id(0).to(tl.int64)
    src = x + row * N
    dst = y + row * N
    sq = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        v = tl.load(src + cols, mask=cols < N, other=0.0)
        sq += v * v
    norm = tl.maximum(tl.sqrt(tl.sum(sq, axis=0)), 1e-12)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        v = tl.load(src + cols, mask=mask, other=0.0)
        tl.store(dst + cols, v / norm, mask=mask)
