#!/usr/bin/env python3
"""A model trains with RMSNorm's forward and backward programs in place, against the same model in eager (issue 32).

    PYTHONPATH=build-gpu/python python3 bench/training_gpu.py --forward-db rms_fwd.db --backward-db rms_bwd.db \\
        --out OUT [--steps 40] [--lr 0.2] [--rtol 1e-3] [--model problems/pytorch/rms_norm_backward/model.py] [--compile]

The two databases are runs of the same module (model.py's source, which the operator compares): its forward
(problems/pytorch/rms_norm_backward/forward_cuda.json on a GPU) and its backward (cuda.json there, or
`kernelevolve run model.py --backward`). `kernelevolve.torch.load(forward_db, backward=backward_db)` makes them one
operator, and `kernelevolve.torch.replace` puts it in place of every RMSNorm of a small pre-norm MLP: an input
projection, `--layers` residual blocks `x + down(gelu(up(norm(x))))`, a final norm and an output projection. That
model and an eager copy of it, from the same initial weights, train `--steps` SGD steps on the same batches (drawn
from a seeded generator each step: a fixed random teacher's `tanh(x @ T)` as the target, MSE loss), at a shape both
programs were verified on (the first the two runs share, or `--workload K`). The device is the programs' own
(cuda where they were verified on a GPU), TF32 off in both.

Writes OUT/training_loss.tsv (step, both losses, their difference, each step's time), OUT/training_loss.png
(matplotlib, if it imports; else says so and skips it) and OUT/training.json (the summary, printed too).
Exits 1 if a step's losses differ by more than `rtol * |eager| + atol` (defaults 1e-3 and 1e-6: the programs are
verified within 1e-4 of float64, eager's float32 is within about 1e-6 of it, and the difference compounds over
the steps), if the backward program ran fewer times than the forward (`op.backward_calls`), or if any call fell back on the module
(`op.fallbacks`: then the programs were not what trained); 2 on bad usage (no shape both programs were verified on).
"""
import argparse
import copy
import importlib.util
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

import kernelevolve.torch as ket

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_MODEL = os.path.join(HERE, "..", "problems", "pytorch", "rms_norm_backward", "model.py")


def import_file(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # torch.compile looks a traced function's globals up by its module's name
    spec.loader.exec_module(module)
    return module


def make_net(rms, hidden, ffn, layers):
    """The pre-norm MLP, each norm an instance of the problem's own RMSNorm module (what replace() targets)."""

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = rms.Model(hidden)
            self.up = torch.nn.Linear(hidden, ffn)
            self.down = torch.nn.Linear(ffn, hidden)

        def forward(self, x):
            return x + self.down(F.gelu(self.up(self.norm(x))))

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(hidden, hidden)
            self.blocks = torch.nn.ModuleList([Block() for _ in range(layers)])
            self.norm = rms.Model(hidden)
            self.head = torch.nn.Linear(hidden, hidden)

        def forward(self, x):
            h = self.proj(x)
            for block in self.blocks:
                h = block(h)
            return self.head(self.norm(h))

    return Net()


def batch(step, shape, teacher, device, seed):
    """The step's batch, the same for both models: x and the teacher's target."""
    g = torch.Generator(device=device)
    g.manual_seed(seed * 100003 + step)
    x = torch.randn(shape, generator=g, device=device)
    return x, torch.tanh(x @ teacher)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train(net, steps, lr, shape, teacher, device, seed):
    """The loss before each step's update, and each step's wall time in ms (forward, backward and update)."""
    optimizer = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
    losses, times = [], []
    for step in range(steps):
        x, target = batch(step, shape, teacher, device, seed)
        sync(device)
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = F.mse_loss(net(x), target)
        loss.backward()
        optimizer.step()
        sync(device)
        times.append((time.perf_counter() - start) * 1e3)
        losses.append(loss.item())
    return losses, times


def plot(path, eager, replaced, title, rtol):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print(f"training_gpu: no picture ({e}); the curves are in the TSV", file=sys.stderr)
        return False
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6), sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    steps = range(len(eager))
    top.plot(steps, eager, label="eager", linewidth=2)
    top.plot(steps, replaced, label="KernelEvolve forward + backward programs", linestyle="--")
    top.set_ylabel("MSE loss")
    top.set_title(title, fontsize=9)
    top.legend()
    floor = 1e-10  # equal losses drawn at the floor: a log scale has no 0
    bottom.plot(steps, [max(abs(a - b) / max(abs(b), 1e-30), floor) for a, b in zip(replaced, eager)], marker=".")
    bottom.axhline(rtol, color="red", linestyle=":", label=f"tolerance {rtol:g}")
    bottom.set_yscale("log")
    bottom.set_ylim(floor / 2, max(rtol * 5, 1e-9))
    bottom.set_ylabel("|relative diff|")
    bottom.legend(fontsize=8)
    bottom.set_xlabel("step")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--forward-db", required=True, help="the run database of RMSNorm's forward")
    ap.add_argument("--backward-db", required=True, help="the run database of its backward (a backward problem)")
    ap.add_argument("--model", default=DEFAULT_MODEL, help="the problem's model.py (RMSNorm): its Model is the norm")
    ap.add_argument("--out", required=True, help="folder for training_loss.tsv, .png and training.json")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--lr", type=float, default=0.2)
    ap.add_argument("--layers", type=int, default=2, help="residual blocks (each with its own RMSNorm)")
    ap.add_argument("--ffn", type=int, default=0, help="the blocks' inner width (default: hidden)")
    ap.add_argument("--workload", type=int, default=None,
                    help="train at the forward spec's workload K (default: the first both runs verified)")
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--atol", type=float, default=1e-6)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--compile", action="store_true",
                    help="train both models through torch.compile: the operator's backward then runs from the compiled "
                         "graph, through the op's register_autograd (PyTorch 2.4 and later)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    rms = import_file(args.model, "rms_norm_problem")
    op = ket.load(args.forward_db, backward=args.backward_db, name="training_rms_norm")
    device = torch.device("cuda" if op.program.device_kind == "cuda" else "cpu")
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    forward_shapes, backward_shapes = op.program.workloads, op.backward.program.workloads
    common = [w for w in forward_shapes if w in backward_shapes]
    if args.workload is not None:
        if not 0 <= args.workload < len(forward_shapes) or forward_shapes[args.workload] not in backward_shapes:
            print(f"training_gpu: workload {args.workload} is not one both runs verified ({common})", file=sys.stderr)
            return 2
        sizes = forward_shapes[args.workload]
    elif common:
        sizes = common[0]
    else:
        print(f"training_gpu: no shape both programs were verified on: forward {forward_shapes}, backward "
              f"{backward_shapes}", file=sys.stderr)
        return 2
    shape = (sizes["batch_size"], sizes["seq_len"], sizes["hidden"])
    hidden, ffn = shape[2], args.ffn or shape[2]

    torch.manual_seed(args.seed)
    eager = make_net(rms, hidden, ffn, args.layers).to(device)
    replaced = copy.deepcopy(eager)
    norms = ket.replace(replaced, rms.Model, op)
    teacher = torch.randn(hidden, hidden, generator=torch.Generator().manual_seed(args.seed + 1)).to(device)
    teacher /= hidden ** 0.5
    probe = torch.randn(shape, device=device)
    why = op.why_not(probe, replaced.norm.weight)
    if why is not None:
        print(f"training_gpu: the forward program would not take the model's call: {why}", file=sys.stderr)
        return 2

    calls, backward_calls, fallbacks = op.calls, op.backward_calls, op.fallbacks
    # The optimizer holds the module's own parameters; the compiled wrapper shares them.
    run_eager, run_replaced = (torch.compile(eager), torch.compile(replaced)) if args.compile else (eager, replaced)
    expected, eager_ms = train(run_eager, args.steps, args.lr, shape, teacher, device, args.seed)
    got, replaced_ms = train(run_replaced, args.steps, args.lr, shape, teacher, device, args.seed)
    calls, backward_calls, fallbacks = op.calls - calls, op.backward_calls - backward_calls, op.fallbacks - fallbacks

    worst, failed_steps = 0.0, []
    tsv = os.path.join(args.out, "training_loss.tsv")
    with open(tsv, "w") as f:
        f.write("step\teager_loss\tkernelevolve_loss\tabs_diff\trel_diff\teager_ms\tkernelevolve_ms\n")
        for step, (a, b, ta, tb) in enumerate(zip(got, expected, replaced_ms, eager_ms)):
            diff = abs(a - b)
            rel = diff / max(abs(b), 1e-30)
            worst = max(worst, rel)
            if not diff <= args.rtol * abs(b) + args.atol:  # NaN fails too
                failed_steps.append(step)
            f.write(f"{step}\t{b:.9g}\t{a:.9g}\t{diff:.3g}\t{rel:.3g}\t{tb:.3f}\t{ta:.3f}\n")
    weights = max(((p - q).abs().max() / q.abs().max().clamp_min(1e-30)).item()
                  for p, q in zip(replaced.parameters(), eager.parameters()))
    title = (f"RMSNorm's programs in a {args.layers}-block MLP ({len(norms)} norms), {device}, batch {list(shape)}\n"
             f"{args.steps} SGD steps: worst loss difference {worst:.2g} (tolerance rtol {args.rtol:g}, "
             f"atol {args.atol:g})")
    pictured = plot(os.path.join(args.out, "training_loss.png"), expected, got, title, args.rtol)

    problems = []
    if failed_steps:
        problems.append(f"the losses differ beyond rtol {args.rtol:g} + atol {args.atol:g} at steps {failed_steps}")
    if backward_calls < calls:
        # Every forward call of a training step is differentiated: each owes one run of the backward program.
        problems.append(f"the backward program ran {backward_calls} times for {calls} forward calls")
    if fallbacks:
        problems.append(f"{fallbacks} calls fell back on the module: the programs were not what trained")
    steady = slice(min(3, args.steps - 1), None)  # the first steps compile and warm up
    summary = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "forward": op.program.provenance, "backward": op.backward.program.provenance,
        "shape": list(shape), "layers": args.layers, "ffn": ffn, "norms_replaced": len(norms), "steps": args.steps,
        "lr": args.lr, "rtol": args.rtol, "atol": args.atol, "compiled": args.compile,
        "eager_loss": expected, "kernelevolve_loss": got,
        "worst_loss_rel_diff": worst, "worst_weight_rel_diff": weights,
        "forward_calls": calls, "backward_calls": backward_calls, "fallbacks": fallbacks,
        "eager_step_ms_median": sorted(eager_ms[steady])[len(eager_ms[steady]) // 2],
        "kernelevolve_step_ms_median": sorted(replaced_ms[steady])[len(replaced_ms[steady]) // 2],
        "picture": pictured, "ok": not problems, "problems": problems,
    }
    with open(os.path.join(args.out, "training.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps({k: v for k, v in summary.items() if k not in ("eager_loss", "kernelevolve_loss")}))
    print(f"training_gpu: {len(norms)} norms replaced; loss {expected[0]:.6g} -> {expected[-1]:.6g} (eager), "
          f"{got[0]:.6g} -> {got[-1]:.6g} (programs); worst step difference {worst:.3g}; forward calls {calls}, "
          f"backward calls {backward_calls}, fallbacks {fallbacks}", file=sys.stderr)
    for p in problems:
        print(f"training_gpu: FAILED: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
