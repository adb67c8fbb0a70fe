#!/usr/bin/env python3
"""PyTorch baselines for the CUDA problem suite, and the table of bench/gpu_suite.sh.

  gpu_baselines.py torch SPEC... --out torch.json   time the PyTorch operator of each spec on its workloads
  gpu_baselines.py table --torch torch.json RUN.json...   print the suite's table from `kernelevolve run --json`

Timing is done the way KernelEvolve times kernels: CUDA events around one launch, L2 flushed before each
(a read of a buffer twice its size, outside the events), inputs drawn at random (never zeros), the
median of many launches. Matrix products run in true fp32 (TF32 off), since the kernels do.
"""
import argparse
import json
import math
import os
import statistics
import sys


def load_spec(path):
    with open(path) as f:
        return json.load(f)


def scalar(spec, name):
    for p in spec["params"]:
        if p["name"] == name:
            return p["value"]
    raise KeyError(name)


def torch_op(spec, w, torch):
    """The PyTorch equivalent of the spec's kernel on workload `w`: a zero-argument callable."""
    F = torch.nn.functional
    dev = "cuda"
    g = torch.Generator(device=dev)
    g.manual_seed(1)
    name = spec["name"]
    if name.startswith("matmul"):
        A = torch.randn(w["M"], w["K"], device=dev, generator=g)
        B = torch.randn(w["K"], w["N"], device=dev, generator=g)
        C = torch.empty(w["M"], w["N"], device=dev)
        return lambda: torch.mm(A, B, out=C)
    x = torch.randn(w["M"], w["N"], device=dev, generator=g)
    if name.startswith("softmax"):
        return lambda: torch.softmax(x, dim=-1)
    if name.startswith("layernorm"):
        gamma = torch.randn(w["N"], device=dev, generator=g)
        beta = torch.randn(w["N"], device=dev, generator=g)
        eps = scalar(spec, "eps")
        return lambda: F.layer_norm(x, (w["N"],), gamma, beta, eps)
    if name.startswith("row_sum"):
        return lambda: x.sum(dim=1)
    if name.startswith("scale_bias_gelu"):
        bias = torch.randn(w["N"], device=dev, generator=g)
        scale = scalar(spec, "scale")
        return lambda: F.gelu(x * scale + bias)
    raise ValueError("no PyTorch baseline for " + name)


def time_us(fn, torch, flush, reps):
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    for _ in range(3):
        fn()
    times = []
    for i in range(reps):
        flush.sum()  # a read: the L2 is left full of clean lines, as KernelEvolve's flush leaves it
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1000.0)
    return statistics.median(times)


def cmd_torch(args):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 50 << 20)
    flush = torch.zeros(2 * l2 // 4, dtype=torch.float32, device="cuda")
    out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "problems": {}}
    # The two ceilings as a PyTorch user would see them: a 1 GiB copy and a 4096^3 fp32 product.
    n = (1 << 30) // 4
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    t = time_us(lambda: dst.copy_(src), torch, flush, 20)
    out["copy_gbps"] = 2 * n * 4 / (t * 1e-6) / 1e9
    del src, dst
    for spec_path in args.specs:
        spec = load_spec(spec_path)
        rows = []
        for w in spec["workloads"]:
            fn = torch_op(spec, w, torch)
            reps = 10 if spec["name"].startswith("matmul") and w["M"] * w["N"] * w["K"] > 1e9 else 50
            rows.append({"workload": w, "time_us": time_us(fn, torch, flush, reps)})
            del fn
            torch.cuda.empty_cache()
        out["problems"][spec["name"]] = rows
        print(f"torch {spec['name']}: " + ", ".join(f"{r['time_us']:.1f} us" for r in rows), file=sys.stderr)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)


def eval_cost(expr, names):
    """The spec's integer cost expressions are simple enough for Python once cdiv/min/max are named."""
    env = dict(names)
    env.update({"cdiv": lambda a, b: -(-a // b), "min": min, "max": max})
    return eval(expr.replace("/", "//"), {"__builtins__": {}}, env)


def cmd_table(args):
    with open(args.torch) as f:
        base = json.load(f)
    lines = []
    header = (f"{'problem':<17} {'shape':<16} {'seed us':>9} {'best us':>9} {'speedup':>8} {'torch us':>9} "
              f"{'vs torch':>8} {'achieved':>13} {'of ceiling':>10}  target")
    lines.append(header)
    lines.append("-" * len(header))
    device = None
    for run_path in args.runs:
        with open(run_path) as f:
            text = f.read().strip()
        try:
            run = json.loads(text.splitlines()[-1]) if text else None
        except json.JSONDecodeError:
            run = None
        spec = load_spec(run_path[:-len(".json")] + ".spec.json") if os.path.exists(
            run_path[:-len(".json")] + ".spec.json") else None
        name = os.path.basename(run_path)[:-len(".json")]
        if not run or not spec:
            lines.append(f"{name:<17} (no result: see its log)")
            continue
        device = run.get("device", device)
        torch_rows = base["problems"].get(spec["name"], [])
        seed_t = run.get("seed", {}).get("time_us", [])
        best = run.get("best") or {}
        best_t = best.get("time_us", [])
        for i, w in enumerate(spec["workloads"]):
            shape = "x".join(str(w[k]) for k in ("M", "N", "K") if k in w)
            s = seed_t[i] if i < len(seed_t) else float("nan")
            b = best_t[i] if i < len(best_t) else float("nan")
            tt = torch_rows[i]["time_us"] if i < len(torch_rows) else float("nan")
            names = dict(w)
            names.update(best.get("tunables", {}))
            compute = spec["name"].startswith("matmul")
            if compute:
                rate = eval_cost(spec["cost"]["flops"], names) / (b * 1e-6) / 1e12
                achieved = f"{rate:8.1f} TFLOP/s"
            else:
                rate = eval_cost(spec["cost"]["bytes"], names) / (b * 1e-6) / 1e9
                achieved = f"{rate:7.0f} GB/s"
            share = best.get("roofline_share", [float("nan")] * (i + 1))[i] if best else float("nan")
            share = share if share is not None else float("nan")
            target = ""
            if i == 0:
                if compute:
                    target = f"{'met' if tt / b >= 0.70 else 'MISSED'}: {100 * tt / b:.0f}% of cuBLAS (>= 70%)"
                else:
                    ok = share >= 0.80 and b < tt
                    target = f"{'met' if ok else 'MISSED'}: {100 * share:.0f}% of copy (>= 80%), {tt / b:.2f}x torch (> 1)"
            lines.append(f"{name if i == 0 else '':<17} {shape:<16} {s:9.1f} {b:9.1f} {s / b:7.2f}x {tt:9.1f} "
                         f"{tt / b:7.2f}x {achieved:>13} {100 * share:9.0f}%  {target}")
        lines.append(f"{'':<17} evaluations {run.get('evaluations')}, statuses {run.get('status_counts')}, "
                     f"best {best.get('tunables')}")
        # The best kernel serves every shape (geometric mean); the run may hold a faster one for a shape.
        for i, f in enumerate(run.get("best", {}) and run.get("fastest_per_workload", []) or []):
            if f.get("node") == best.get("node") or i >= len(spec["workloads"]):
                continue
            t = f["time_us"]
            tt = torch_rows[i]["time_us"] if i < len(torch_rows) else float("nan")
            names = dict(spec["workloads"][i])
            names.update(f.get("tunables", {}))
            if spec["name"].startswith("matmul"):
                what = (f"{eval_cost(spec['cost']['flops'], names) / (t * 1e-6) / 1e12:.1f} TFLOP/s, "
                        f"{100 * tt / t:.0f}% of cuBLAS")
            else:
                what = f"{100 * (f.get('roofline_share') or float('nan')):.0f}% of copy, {tt / t:.2f}x torch"
            lines.append(f"{'':<17} workload {i} alone: node {f['node']} {t:.1f} us ({what}), {f.get('tunables')}")
    print(f"device: {device} (PyTorch {base.get('torch')} on {base.get('device')}; torch copy "
          f"{base.get('copy_gbps', float('nan')):.0f} GB/s)")
    print("\n".join(lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("torch")
    t.add_argument("specs", nargs="+")
    t.add_argument("--out", required=True)
    tb = sub.add_parser("table")
    tb.add_argument("--torch", required=True)
    tb.add_argument("runs", nargs="+")
    args = ap.parse_args()
    {"torch": cmd_torch, "table": cmd_table}[args.cmd](args)


if __name__ == "__main__":
    main()
