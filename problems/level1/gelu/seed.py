import triton
import triton.language as tl


@triton.jit
def gelu(x, y, M, N, BLOCK: tl.constexpr):
    # Exact GELU, y = 0.5 x (1 + erf(x / sqrt 2)), over the flat M * N array, one program per BLOCK
    # consecutive elements (int64 offsets).
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < M * N
    v = tl.load(x + offs, mask=mask, other=0.0)
    tl.store(y + offs, 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476)), mask=mask)
