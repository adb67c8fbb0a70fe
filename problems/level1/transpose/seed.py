import triton
import triton.language as tl


@triton.jit
def transpose(x, y, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # y[j, i] = x[i, j]: program (j, i) loads a BLOCK_M x BLOCK_N tile of x (rows i, columns j) and stores
    # it into y's N x M layout.
    rm = tl.program_id(1).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(0).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tile = tl.load(x + rm[:, None] * N + rn[None, :], mask=mask, other=0.0)
    tl.store(y + rn[None, :] * M + rm[:, None], tile, mask=mask)
