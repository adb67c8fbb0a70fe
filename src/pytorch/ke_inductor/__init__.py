"""Translate what torch.compile (Inductor, torch 2.11) generates into a KernelEvolve program (issue 31).

Inductor's output code holds Triton kernels, the buffers between them and the calls to cuBLAS and cuDNN that
`call()` makes in order. `translate` turns it into a Triton candidate with its own launch plan
(docs/spec-format.md, "Programs"): the kernels become plain `@triton.jit` functions, `call()`'s launches become
kernel steps, its extern calls library steps, its buffers temporaries or the spec's outputs, and the block sizes
the tunables. What cannot be translated raises `Untranslatable`, naming the part.

Standard library only: the translation runs where PyTorch has no Inductor (CI's torch 1.13) and must never import
torch or triton; the output code is read as text, through `ast`. Only capture (the driver, `python -m ke_inductor`
as the library runs it: src/core/python_package.hpp) imports torch, and only once it runs.

The modules, in the order they build on each other: errors (Untranslatable); output_code (reading Inductor's output
code: its kernels, call() and get_args()); size_expressions (Inductor's sympy text over our size names);
heuristics (Inductor's block-size configurations); embedding_bag (our kernels where Inductor calls
aten._embedding_bag); binding (call()'s arguments tied to the spec's params); runtime_helpers (Inductor's
triton_helpers rewritten to plain Triton); plan (call()'s buffers, launches and extern calls as plan steps);
program (`translate`: the Triton program); cpu (`translate_cpu`: the C++ program, on the CPU); capture (torch.compile
run and captured, the translation printed); __main__ (the command line).
"""

from .cpu import translate_cpu
from .errors import Untranslatable
from .program import translate

__all__ = ["translate", "translate_cpu", "Untranslatable"]
