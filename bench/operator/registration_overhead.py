"""What a call through PyTorch's dispatcher costs for the operator as kernelevolve.torch registers it
(torch.library.Library with register_fake) against the same kernel registered by torch.library.custom_op, in one
process, on the CPU, under no_grad: a model's inference calls each put-back operator so, and torch.compile's graphs
call it through the dispatcher. PyTorch 2.4 or later. Prints the minimum over ROUNDS rounds of N calls each, per call.

    PYTHONPATH=build/python python3 bench/operator/registration_overhead.py RUN.db [RUN [ROUNDS]]

RUN.db's run RUN (default: the latest): a CPU run of tests/fixtures/optimize/linear_relu.py at its sizes, x [8, 32]
and a 32x32 layer (the operator falls back to the module, and says so, on any other).
"""
import sys
import timeit

import torch

import kernelevolve.torch as ket


def main():
    if not ket.HAS_CUSTOM_OP:
        sys.exit(f"registration_overhead: {ket.MISSING}")
    run = int(sys.argv[2]) if len(sys.argv) > 2 else None
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    op = ket.load(sys.argv[1], run=run, strict=True)
    x, w, b = torch.randn(8, 32), torch.randn(32, 32), torch.randn(32)
    # The same kernel as a custom_op, as kernelevolve.torch registered operators before.
    custom = torch.library.custom_op("kebench::same", op._run, mutates_args=(),
                                     schema="(Tensor x, Tensor w, Tensor b) -> Tensor")
    custom.register_fake(op._fake)
    ours, theirs = op.op, torch.ops.kebench.same.default
    cases = [("kernelevolve.torch (Library + register_fake)", lambda: ours(x, w, b)),
             ("torch.library.custom_op", lambda: theirs(x, w, b)),
             ("PyTorch eager relu(linear)", lambda: torch.relu(torch.nn.functional.linear(x, w, b)))]
    best = {name: float("inf") for name, _ in cases}
    with torch.no_grad():
        for name, fn in cases:
            fn()
        for _ in range(rounds):  # interleaved: each round times every case once
            for name, fn in cases:
                best[name] = min(best[name], timeit.timeit(fn, number=5000) / 5000)
    print(f"torch {torch.__version__}, {rounds} rounds of 5000 calls, the fastest round's time per call:")
    for name, _ in cases:
        print(f"  {name:48s} {best[name] * 1e6:6.2f} us")
    print(f"  custom_op's extra cost per call: {(best['torch.library.custom_op'] - best[cases[0][0]]) * 1e6:.2f} us")


if __name__ == "__main__":
    main()
