"""Interleaved A/B of a DLRM-style model (dlrm.py) against the same model with its interaction replaced by a run's
best program (kernelevolve.torch), eager and under torch.compile, in one process: original, replaced, original, ...
for ROUNDS rounds of ITERS forwards each, timed by CUDA events. Prints a markdown table: each variant's median
time per forward with the rounds' range, and the speedup (the median of the per-round ratios, with their range).

    PYTHONPATH=build/python:bench/operator python3 bench/operator/operator_ab.py DLRM.db [ROUNDS] [ITERS]
"""
import statistics
import sys

import torch

import dlrm
import kernelevolve.torch as ket


def per_forward_ms(fn, args, iters):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn(*args)
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / iters


def main():
    db = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    iters = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    op = ket.load(db)
    torch.manual_seed(0)
    original = dlrm.DLRM().cuda().eval()
    replaced = dlrm.DLRM().cuda().eval()
    replaced.load_state_dict(original.state_dict())
    ket.replace(replaced, "interaction", op)
    args = dlrm.inputs("cuda")
    features = torch.randn(dlrm.BATCH, dlrm.TABLES + 1, dlrm.DIM, device="cuda")
    rows = []
    with torch.no_grad():
        pairs = [("interaction alone, eager", original.interaction, op, (features,)),
                 ("DLRM, eager", original, replaced, args),
                 ("DLRM, torch.compile", torch.compile(original), torch.compile(replaced), args)]
        for name, a, b, xs in pairs:
            for _ in range(3):  # compile and warm both
                a(*xs), b(*xs)
            calls = op.calls
            ta, tb = [], []
            for _ in range(rounds):
                ta.append(per_forward_ms(a, xs, iters))
                tb.append(per_forward_ms(b, xs, iters))
            engaged = op.calls > calls
            ratios = sorted(x / y for x, y in zip(ta, tb))
            rows.append((name, statistics.median(ta), min(ta), max(ta), statistics.median(tb), min(tb), max(tb),
                         statistics.median(ratios), ratios[0], ratios[-1], engaged))
    p = op.program.provenance
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; {p['problem']} run {p['run']}, node {p['node']}"
          f" ({p['speedup']:.3g}x its run's first node); {rounds} interleaved rounds of {iters} forwards, batch "
          f"{dlrm.BATCH}\n")
    print("| what | original ms (range) | with the program ms (range) | speedup (range of rounds) | called |")
    print("| --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r[0]} | {r[1]:.3f} ({r[2]:.3f}-{r[3]:.3f}) | {r[4]:.3f} ({r[5]:.3f}-{r[6]:.3f}) | "
              f"{r[7]:.3f}x ({r[8]:.3f}-{r[9]:.3f}) | {'yes' if r[10] else 'NO'} |")


if __name__ == "__main__":
    main()
