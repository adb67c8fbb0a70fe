"""Relayout kernels of ours: a view call() returns (strided, at an offset, or one of several views into one buffer, as
a split of q, k and v) copied into the dense, row-major output param the spec has for it.

Inductor returns what eager returns: `reinterpret_tensor(buf0, (B, H, S, D), (S*3C, D, 3C, 1), C)` is k of a QKV
projection, a view into the [B * S, 3C] product at an offset. Our spec's outputs are dense tensors of the module's
output shapes, so the program writes Inductor's buffer as a temporary and a relayout step copies each view out of
it: one extra pass over each such output, a start the search can improve on (a kernel that writes the output where
the spec wants it). The step's arguments are the source, the output, the view's element count, its sizes, its
strides and its offset, in elements. One kernel per rank (1 to 6 dimensions), whatever the dtype: each loads and
stores what it is given (Triton through its pointers' types; C++ one function per rank and element type).
"""

from .errors import Untranslatable
from .output_code import _OwnKernel

MAX_RANK = 6

_TRITON = """def ke_relayout_{rank}d(src, dst, numel, {sizes}, {strides}, offset, XBLOCK: tl.constexpr):
    index = tl.program_id(0).to(tl.int64) * XBLOCK + tl.arange(0, XBLOCK)
    mask = index < numel
{unravel}
    value = tl.load(src + (offset + {address}), mask=mask)
    tl.store(dst + index, value, mask=mask)"""


def _unravel(rank, indent):
    """The view's index of each dimension from the output's flat index: the last dimension varies fastest."""
    if rank == 1:
        return [f"{indent}i0 = index"]
    lines = [f"{indent}rest = index"]
    for d in range(rank - 1, 0, -1):
        lines.append(f"{indent}i{d} = rest % size{d}")
        lines.append(f"{indent}rest = rest // size{d}" if d > 1 else f"{indent}i0 = rest // size{d}")
    return lines


def triton_relayout_kernel(rank):
    """The Triton kernel of a `rank`-d view: one program per XBLOCK elements of the output, each element loaded
    from the source at offset + sum(i_d * stride_d)."""
    _check_rank(rank)
    body = _TRITON.format(rank=rank, sizes=", ".join(f"size{d}" for d in range(rank)),
                          strides=", ".join(f"stride{d}" for d in range(rank)),
                          unravel="\n".join(_unravel(rank, "    ")),
                          address=" + ".join(f"i{d} * stride{d}" for d in range(rank)))
    configs = [{"XBLOCK": block, "num_warps": warps, "num_stages": 1}
               for block in (1024, 512, 2048, 256) for warps in (4, 8)]

    def grid(numels, tunable):
        return [f"cdiv({numels['numel']}, {tunable['XBLOCK']})"]
    kernel = _OwnKernel(f"ke_relayout_{rank}d", body, configs, grid)
    kernel.note = "ours, a view call() returns copied into its dense output"
    return kernel


# The element type a C++ relayout copies: a 16-bit float is copied as its bits.
_CPP_TYPES = {"f32": "float", "f64": "double", "f16": "uint16_t", "bf16": "uint16_t", "i64": "int64_t",
              "i32": "int32_t", "i8": "int8_t", "u8": "uint8_t"}


def cpp_relayout_source(rank, dtype):
    """The C++ kernel of a `rank`-d view of `dtype` elements, as Inductor's kernels are written (`extern "C" void
    kernel(...)`, renamed by _CppKernel): nested loops over the view's sizes, the output written in order, so that
    Clang vectorizes the innermost loop where the source's stride allows."""
    _check_rank(rank)
    if dtype not in _CPP_TYPES:
        raise Untranslatable(f"a relayout of {dtype} elements", "the C++ relayout copies f32, f64, f16, bf16 and "
                             "integers")
    ctype = _CPP_TYPES[dtype]
    params = ([f"const {ctype}* src", f"{ctype}* dst", "const int64_t numel"] +
              [f"const int64_t size{d}" for d in range(rank)] + [f"const int64_t stride{d}" for d in range(rank)] +
              ["const int64_t offset"])
    lines = ['extern "C" void kernel(' + ", ".join(params) + ")", "{",
             "    // numel, the product of the sizes, is the Triton kernel's grid; the loops run over the sizes.",
             "    (void)numel;", "    const " + ctype + "* from = src + offset;"]
    indent = "    "
    for d in range(rank):
        lines.append(f"{indent}for (int64_t i{d} = 0; i{d} < size{d}; ++i{d})")
        indent += "    "
    lines.append(f"{indent}*dst++ = from[" + " + ".join(f"i{d} * stride{d}" for d in range(rank)) + "];")
    lines.append("}")
    return "\n".join(lines)


def cpp_relayout_name(rank, dtype):
    return f"ke_relayout_{rank}d_{dtype}"


def _check_rank(rank):
    if not 1 <= rank <= MAX_RANK:
        raise Untranslatable(f"an output view of {rank} dimensions", f"the relayout kernels take 1 to {MAX_RANK}")
