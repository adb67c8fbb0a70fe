#!/usr/bin/env python3
"""Where an optimized DLRM's time goes (issue 30): `kernelevolve optimize problems/models/dlrm/model.py` leaves
OUT/optimized.py; this loads it as a user would, beside the model, on the lent GPU:

    KE_PYTHON=/opt/torch/.venv/bin/python3 $KE_PYTHON bench/optimize_dlrm_calls.py OUT [build-gpu]

1. Each forward's GPU time (CUDA events around 30 forwards) and the CPU's time to queue it, medians of nine rounds
   in which the ways take turns: eager, the optimized model, torch.compile of each (the optimized with its operators
   compiled in, and with its guards stepping aside), and torch.compile's reduce-overhead mode of each. Where the CPU's
   time is the larger, the forward waits on the CPU's launches, and a kernel that saves the GPU time shortens nothing.
2. Per put-back place, the CPU's microseconds per call (best of five loops of 2000) of: the region's own code, the
   Guarded module, Operator._execute, the program's launch through the C API alone, and the operator through
   PyTorch's dispatcher (what a compiled graph calls).
3. torch.profiler's CPU table of torch.compile of the optimized model with its operators: what its CPU time is."""
import os
import statistics
import sys

import torch

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
out = os.path.abspath(sys.argv[1])
build = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else os.path.join(root, "build-gpu"))
sys.path[:0] = [os.path.join(build, "python"), os.path.join(root, "bench")]
import kernelevolve.torch as ket  # noqa: E402
from dlrm_timing import load, per_call, queued  # noqa: E402


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; {out}")
    dlrm = load(os.path.join(root, "problems", "models", "dlrm", "model.py"), "dlrm")
    torch.manual_seed(0)  # optimize's MODEL_SEED and INPUTS_SEED
    model = dlrm.Model(*dlrm.get_init_inputs()).cuda().eval()
    torch.manual_seed(1)
    inputs = [x.cuda() for x in dlrm.get_inputs()]
    optimized_module = load(os.path.join(out, "optimized.py"), "dlrm_optimized")
    optimized = optimized_module.load("cuda")
    guards = optimized_module.operators(optimized)
    print("places:", ", ".join(f"{name} ({g.op.qualname}, {len(g.op.signature)} arguments)"
                                for name, g in guards.items()))

    def fresh_model():
        torch.manual_seed(0)
        return dlrm.Model(*dlrm.get_init_inputs()).cuda().eval()

    def compiled(m, mode=None):
        c = torch.compile(m, mode=mode)
        for _ in range(3):
            c(*inputs)
        return lambda: c(*inputs)

    print("\n## 1. A forward: GPU us / CPU us to queue it (medians of 9 interleaved rounds of 30 forwards)")
    with torch.no_grad():
        # Each way its own instance (a guard's `compiled` is read when Dynamo traces), all compiled before any is
        # timed, then timed round by round in turn, so that a slow moment of the host falls on all alike.
        ways = [("eager", lambda: model(*inputs)), ("optimized", lambda: optimized(*inputs))]
        for mode in (None, "reduce-overhead"):
            label = "torch.compile" + (f" ({mode})" if mode else "")
            ways += [(label, compiled(fresh_model(), mode)),
                     (f"{label} of optimized, operators",
                      compiled(optimized_module.load("cuda", under_compile="operator"), mode)),
                     (f"{label} of optimized, guards aside",
                      compiled(optimized_module.load("cuda", under_compile="original"), mode))]
        times = {label: [] for label, _ in ways}
        for r in range(9):
            for k in range(len(ways)):
                label, fn = ways[(k + r) % len(ways)]
                times[label].append(queued(fn, n=30, rounds=1))
        for label, _ in ways:
            gpu = statistics.median(t[0] for t in times[label])
            cpu = statistics.median(t[1] for t in times[label])
            print(f"  {label}: GPU {gpu:.1f} us, CPU {cpu:.1f} us", flush=True)
        for base in ("torch.compile", "torch.compile (reduce-overhead)"):
            for other in ("operators", "guards aside"):
                ratio = [a[0] / b[0] for a, b in zip(times[base], times[f"{base} of optimized, {other}"])]
                print(f"  {base} / its optimized, {other}: {statistics.median(ratio):.3f}x "
                      f"(rounds {min(ratio):.3f}x to {max(ratio):.3f}x)")

    with torch.no_grad():
        print("\n## 2. A place's call: the CPU's us")
        seen = {}
        for name, g in guards.items():
            g.compiled = "operator"
            original_forward = g.forward

            def record(*args, name=name, forward=original_forward):
                seen.setdefault(name, args)
                return forward(*args)
            g.forward = record
        optimized(*inputs)
        for name, g in guards.items():
            del g.forward
            args = seen[name]
            op = g.op
            key = tuple((a.shape, a.dtype, a.device, a.is_contiguous()) for a in args)
            dispatched = getattr(torch.ops.kernelevolve, op.qualname.split("::")[1])
            kept = op._execute(args, key)  # the launch alone writes where this call's outputs are
            rows = [("own code", lambda: g.original(*args)), ("Guarded", lambda: g(*args)),
                    ("Operator._execute", lambda: op._execute(args, key)),
                    ("the launch (C API)", lambda: op.program.launch(ket._raw_stream(0), op._flags)),
                    ("through the dispatcher", lambda: dispatched(*args))]
            print(f"  {name} ({len(args)} arguments, {len(op.outputs)} outputs): " +
                  ", ".join(f"{label} {per_call(fn, 2000)[0]:.1f}" for label, fn in rows))
            del kept

    with torch.no_grad():
        print("\n## 3. torch.compile of the optimized model with its operators: the CPU's time by operator")
        fn = compiled(optimized_module.load("cuda", under_compile="operator"))
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(20):
                fn()
            torch.cuda.synchronize()
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=18))


if __name__ == "__main__":
    main()
