import triton
import triton.language as tl


@triton.jit
def layernorm(x, gamma, beta, y, M, N, eps, BLOCK: tl.constexpr):
    # One program per row, three passes over it in chunks of BLOCK: the mean, the biased variance around
    # the mean, then y = (x - mean) / sqrt(var + eps) * gamma + beta.
    row = tl.program_id(0).to(tl.int64)
    src = x + row * N
    dst = y + row * N
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(src + cols, mask=cols < N, other=0.0)
    mean = tl.sum(acc, axis=0) / N
    sq = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        d = tl.where(mask, tl.load(src + cols, mask=mask, other=0.0) - mean, 0.0)
        sq += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(sq, axis=0) / N + eps)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        v = tl.load(src + cols, mask=mask, other=0.0)
        g = tl.load(gamma + cols, mask=mask, other=0.0)
        b = tl.load(beta + cols, mask=mask, other=0.0)
        tl.store(dst + cols, (v - mean) * rstd * g + b, mask=mask)
