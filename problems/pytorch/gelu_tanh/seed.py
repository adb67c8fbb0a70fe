# A Triton seed for `kernelevolve run model.py --language triton --device cuda --seed-kernel seed.py`: GELU's
# tanh approximation, element-wise in memory order, BLOCK elements a program (the derived grid is
# cdiv(elements, BLOCK)), tanh written through exp as 2 / (1 + exp(-2u)) - 1.
import triton
import triton.language as tl


@triton.jit
def gelu_tanh(x, out, batch_size, features, BLOCK: tl.constexpr):
    n = batch_size * features
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x + offs, mask=mask)
    u = 0.7978845608028654 * (v + 0.044715 * v * v * v)
    t = 2.0 / (1.0 + tl.exp(-2.0 * u)) - 1.0
    tl.store(out + offs, 0.5 * v * (1.0 + t), mask=mask)
