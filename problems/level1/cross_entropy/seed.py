import triton
import triton.language as tl


@triton.jit
def cross_entropy(logits, target, loss, M, C, BLOCK: tl.constexpr):
    # loss[i] = log(sum_j exp(logits[i, j])) - logits[i, t], t = target[i] modulo C into [0, C): one
    # program per row, two passes over it in chunks of BLOCK (the maximum, then the sum of exp(x - max)).
    row = tl.program_id(0).to(tl.int64)
    src = logits + row * C
    t = tl.load(target + row)
    t = ((t % C) + C) % C
    m = tl.zeros([BLOCK], dtype=tl.float32) - float("inf")
    for start in range(0, C, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        m = tl.maximum(m, tl.load(src + cols, mask=cols < C, other=-float("inf")))
    peak = tl.max(m, axis=0)
    s = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, C, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < C
        v = tl.load(src + cols, mask=mask, other=0.0)
        s += tl.where(mask, tl.exp(v - peak), 0.0)
    tl.store(loss + row, peak + tl.log(tl.sum(s, axis=0)) - tl.load(src + t))
