import triton
import triton.language as tl


@triton.jit
def silu(x, y, M, N, BLOCK: tl.constexpr):
    # SiLU, y = x / (1 + exp(-x)), over the flat M * N array, one program per BLOCK consecutive elements
    # (int64 offsets).
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < M * N
    v = tl.load(x + offs, mask=mask, other=0.0)
    tl.store(y + offs, v / (1.0 + tl.exp(-v)), mask=mask)
