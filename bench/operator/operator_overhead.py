"""The PyTorch operator's cost per call over a raw launch of the same kernel (issue 29), on an element-wise problem
(scale.py, y = 2x) at 4 KB and at 64 MB. Per call, in one process, interleaved over ROUNDS rounds of a loop of calls
each (the loop synchronized once, at its end, so at 4 KB the CPU's cost per call is what is measured):
  - raw launch: the same kernel (scale.cu) compiled by NVRTC and launched by one cuLaunchKernel through ctypes on
    PyTorch's stream (raw_launch.py), the data pointers read off the tensors each call, into a preallocated output;
  - raw launch + output: the same with the output allocated each call (x.new_empty), as a hand-written operator
    that returns a new tensor does;
  - C API: kernelevolve.Program.call, the C API's ke_program_call on PyTorch's stream (through ctypes), into a
    preallocated output;
  - operator: the operator as a model calls it (Operator.__call__, what replace() installs): it checks its
    arguments and allocates the output, and on plain tensors in eager mode runs without PyTorch's dispatcher;
  - through the dispatcher: torch.ops.kernelevolve.<name> itself, as torch.compile's graphs call it;
  - eager: PyTorch's own x * 2, for scale.
Prints a markdown table of medians with the rounds' range, and the operator's overhead over the raw launch with
its output (the like-for-like comparison) and over the bare raw launch.

    PYTHONPATH=build/python:bench/operator python3 bench/operator/operator_overhead.py SCALE.db [ROUNDS]
"""
import ctypes
import os
import statistics
import sys
import time

import torch

import kernelevolve.torch as ket
from raw_launch import RawKernel

BLOCK = 256  # the seed's threads per block, as the program's first node launches it


def per_call_us(fn, calls):
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def main():
    op = ket.load(sys.argv[1])
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    program = op.program
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "scale.cu")) as f:
        raw = RawKernel(f.read(), "scale", [f"BLOCK={BLOCK}"])
    rows = []
    for n, calls in ((1024, 5000), (16 * 1024 * 1024, 200)):
        x = torch.randn(n, device="cuda")
        out = torch.empty_like(x)
        stream = torch.cuda.current_stream().cuda_stream or None
        values = [x.data_ptr(), out.data_ptr(), n]
        grid = (n + BLOCK - 1) // BLOCK
        raw_values = [ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_longlong(n)]
        raw_block = raw.arguments(raw_values)
        raw_stream = torch._C._cuda_getCurrentRawStream

        def raw_launch(y):
            raw_values[0].value = x.data_ptr()
            raw_values[1].value = y.data_ptr()
            raw.launch(grid, BLOCK, raw_block, raw_stream(0))
            return y

        variants = {"raw": lambda: raw_launch(out), "raw_out": lambda: raw_launch(x.new_empty(n)),
                    "launch": lambda: program.call(values, stream=stream), "operator": lambda: op(x),
                    "dispatched": lambda: op.op(x), "eager": lambda: x * 2.0}
        with torch.no_grad():
            torch.testing.assert_close(op(x), x * 2.0)
            torch.testing.assert_close(variants["raw_out"](), x * 2.0)
            for fn in variants.values():
                per_call_us(fn, 10)
            times = {k: [] for k in variants}
            for _ in range(rounds):
                for k, fn in variants.items():
                    times[k].append(per_call_us(fn, calls))
        over = {base: sorted(o - b for o, b in zip(times["operator"], times[base])) for base in ("raw_out", "raw")}
        rows.append((n * 4, {k: (statistics.median(v), min(v), max(v)) for k, v in times.items()},
                     {k: (statistics.median(v), v[0], v[-1]) for k, v in over.items()}))
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; {rounds} interleaved rounds; µs per call\n")
    print("| size | raw launch | raw launch + output | C API | operator | through the dispatcher | eager x * 2 | "
          "operator over raw + output | operator over raw |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for size, t, o in rows:
        cell = lambda v: f"{v[0]:.2f} ({v[1]:.2f}-{v[2]:.2f})"
        label = f"{size // 1024} KB" if size < 1 << 20 else f"{size >> 20} MB"
        print(f"| {label} | {cell(t['raw'])} | {cell(t['raw_out'])} | {cell(t['launch'])} | {cell(t['operator'])} | "
              f"{cell(t['dispatched'])} | {cell(t['eager'])} | {cell(o['raw_out'])} | {cell(o['raw'])} |")


if __name__ == "__main__":
    main()
