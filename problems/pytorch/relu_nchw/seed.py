# A Triton seed for `kernelevolve run model.py --language triton --device cuda --seed-kernel seed.py`: ReLU,
# element-wise over the NCHW tensor in memory order, BLOCK elements a program (the derived grid is
# cdiv(elements, BLOCK)); the search varies BLOCK and num_warps.
import triton
import triton.language as tl


@triton.jit
def relu_nchw(x, out, batch_size, channels, height, width, BLOCK: tl.constexpr):
    n = batch_size * channels * height * width
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x + offs, mask=mask)
    tl.store(out + offs, tl.where(v > 0, v, 0.0), mask=mask)
