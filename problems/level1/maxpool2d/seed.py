import triton
import triton.language as tl


@triton.jit
def maxpool2d(x, y, N, C, H, W, OH, OW, BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr):
    # 3 x 3 max pooling, stride 2, padding 1, NCHW: program (j, i, p) computes a BLOCK_H x BLOCK_W tile of
    # outputs of plane p = n * C + c. Padded taps are masked to -inf; the centre tap is always inside.
    plane = tl.program_id(2).to(tl.int64)
    oh = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    ow = tl.program_id(0) * BLOCK_W + tl.arange(0, BLOCK_W)
    src = x + plane * H * W
    out_mask = (oh[:, None] < OH) & (ow[None, :] < OW)
    m = tl.zeros([BLOCK_H, BLOCK_W], dtype=tl.float32) - float("inf")
    for kh in tl.static_range(3):
        ih = oh * 2 - 1 + kh
        for kw in tl.static_range(3):
            iw = ow * 2 - 1 + kw
            ok = out_mask & (ih[:, None] >= 0) & (ih[:, None] < H) & (iw[None, :] >= 0) & (iw[None, :] < W)
            v = tl.load(src + ih[:, None] * W + iw[None, :], mask=ok, other=-float("inf"))
            m = tl.maximum(m, v)
    tl.store(y + plane * OH * OW + oh[:, None] * OW + ow[None, :], m, mask=out_mask)
