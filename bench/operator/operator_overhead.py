"""The PyTorch operator's cost per call over the library's own launch of the same kernel (issue 29), on an
element-wise problem (scale.py, y = 2x) at 4 KB and at 64 MB. Per call, in one process, interleaved over ROUNDS
rounds of a loop of calls each (the loop synchronized once, at its end, so at 4 KB the CPU's cost per call is
what is measured):
  - launch: kernelevolve.Program.call, the C API's ke_program_call on PyTorch's stream (through ctypes), into a
    preallocated output;
  - operator: the operator as a model calls it (Operator.__call__, what replace() installs): it checks its
    arguments and allocates the output, and on plain tensors in eager mode runs without PyTorch's dispatcher;
  - through the dispatcher: torch.ops.kernelevolve.<name> itself, as torch.compile's graphs call it;
  - eager: PyTorch's own x * 2, for scale.
Prints a markdown table of medians with the rounds' range, and the operator's overhead over the launch.

    PYTHONPATH=build/python python3 bench/operator/operator_overhead.py SCALE.db [ROUNDS]
"""
import statistics
import sys
import time

import torch

import kernelevolve.torch as ket


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
    rows = []
    for n, calls in ((1024, 5000), (16 * 1024 * 1024, 200)):
        x = torch.randn(n, device="cuda")
        out = torch.empty_like(x)
        stream = torch.cuda.current_stream().cuda_stream or None
        values = [x.data_ptr(), out.data_ptr(), n]
        variants = {"launch": lambda: program.call(values, stream=stream), "operator": lambda: op(x),
                    "dispatched": lambda: op.op(x), "eager": lambda: x * 2.0}
        with torch.no_grad():
            torch.testing.assert_close(op(x), x * 2.0)
            for fn in variants.values():
                per_call_us(fn, 10)
            times = {k: [] for k in variants}
            for _ in range(rounds):
                for k, fn in variants.items():
                    times[k].append(per_call_us(fn, calls))
        overhead = sorted(o - l for o, l in zip(times["operator"], times["launch"]))
        rows.append((n * 4, {k: (statistics.median(v), min(v), max(v)) for k, v in times.items()},
                     (statistics.median(overhead), overhead[0], overhead[-1])))
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; {rounds} interleaved rounds; µs per call\n")
    print("| size | launch (C API) | operator | through the dispatcher | eager x * 2 | operator over launch |")
    print("| --- | --- | --- | --- | --- | --- |")
    for size, t, o in rows:
        cell = lambda v: f"{v[0]:.2f} ({v[1]:.2f}-{v[2]:.2f})"
        label = f"{size // 1024} KB" if size < 1 << 20 else f"{size >> 20} MB"
        print(f"| {label} | {cell(t['launch'])} | {cell(t['operator'])} | {cell(t['dispatched'])} | {cell(t['eager'])} | "
              f"{cell(o)} |")


if __name__ == "__main__":
    main()
