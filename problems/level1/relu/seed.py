import triton
import triton.language as tl


@triton.jit
def relu(x, y, M, N, BLOCK: tl.constexpr):
    # y = max(x, 0) over the flat M * N array, one program per BLOCK consecutive elements (int64 offsets).
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < M * N
    v = tl.load(x + offs, mask=mask, other=0.0)
    tl.store(y + offs, tl.where(v > 0.0, v, 0.0), mask=mask)
