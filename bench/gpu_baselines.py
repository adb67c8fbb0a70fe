#!/usr/bin/env python3
"""PyTorch baselines for the GPU problem suite, and the tables of bench/gpu_suite.sh and
bench/runs/2026-11-triton-vs-cuda-vs-eager-gpu.sh.

  gpu_baselines.py torch SPEC... --out torch.json [--device cuda|cpu]
      time the PyTorch operator of each spec (cuda.json or triton.json; cpu.json with --device cpu, to check
      the ops) on its workloads
  gpu_baselines.py table --torch torch.json RUN.json...   print the suite's table from `kernelevolve run --json`
  gpu_baselines.py triton-table --torch torch.json --triton RUN.json... --cuda RUN.json... [--out STEM]
      one row per problem: Triton's seed and best, CUDA's best, PyTorch eager, their ratios; STEM.md and STEM.tsv

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


# Spec names carry the language: relu_cuda, relu_triton (a CPU spec's is the bare problem name).
LANGUAGE_SUFFIXES = ("_triton", "_cuda", "_hip")


def problem_name(spec_name):
    """The problem a spec name is of: relu_triton -> relu, matmul_rect_cuda -> matmul_rect."""
    for suffix in LANGUAGE_SUFFIXES:
        if spec_name.endswith(suffix):
            return spec_name[:-len(suffix)]
    return spec_name


TORCH_DTYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
                "i8": "int8", "u8": "uint8", "i32": "int32", "i64": "int64"}


def spec_names(spec, w):
    """The names a shape or range expression may use: the workload's sizes and the scalars' values."""
    names = {p["name"]: p["value"] for p in spec["params"] if p.get("role") == "scalar" and "value" in p}
    names.update(w)
    return names


def spec_inputs(spec, w, torch, dev, g):
    """Every `in` and `inout` buffer of the spec on workload w, drawn as the spec's `inputs` says (the
    evaluator's first trial): floats uniform (default [-1, 1)), normal or Laplace; integers uniform on the
    inclusive range low..high (or index_of's 0..V-1; default -100..100)."""
    names = spec_names(spec, w)
    declared = spec.get("inputs") or {}
    out = {}
    for p in spec["params"]:
        if p.get("role") not in ("in", "inout"):
            continue
        shape = [int(eval_cost(str(d), names)) for d in p["shape"]]
        dtype = getattr(torch, TORCH_DTYPES[p["dtype"]])
        how = declared.get(p["name"], {})
        if p["dtype"].startswith(("i", "u")):
            if "index_of" in how:
                low, high = 0, eval_cost(str(how["index_of"]), names) - 1
            else:
                low, high = (eval_cost(str(how[k]), names) for k in ("low", "high")) if "low" in how else (-100, 100)
            if p["dtype"] == "u8":
                low = max(low, 0)
            t = torch.randint(int(low), int(high) + 1, shape, generator=g, device=dev, dtype=torch.int64)
            if how.get("sorted"):
                t = torch.sort(t.flatten()).values.view(shape)
            out[p["name"]] = t.to(dtype)
            continue
        dist = how.get("dist", "uniform")
        if dist == "normal":
            t = torch.randn(shape, generator=g, device=dev) * how.get("std", 1.0) + how.get("mean", 0.0)
        elif dist == "laplace":
            u = torch.rand(shape, generator=g, device=dev) - 0.5  # inverse CDF; u = -0.5 kept finite
            t = how.get("mean", 0.0) - how.get("std", 1.0) * torch.sign(u) * torch.log1p(
                (-2 * u.abs()).clamp(min=-1 + 1e-7))
        else:
            low, high = how.get("low", -1.0), how.get("high", 1.0)
            t = torch.rand(shape, generator=g, device=dev) * (high - low) + low
        out[p["name"]] = t.to(dtype)
    return out


SPEC_INPUT_PROBLEMS = {"relu", "gelu", "silu", "log_softmax", "l2norm", "cumsum", "col_mean", "transpose", "reduce_max",
                       "argmax", "rmsnorm", "batchnorm", "cross_entropy", "matvec", "maxpool2d", "gemm_bias_relu_scale",
                       "residual_layernorm"}


def torch_op(spec, w, torch, device="cuda"):
    """The PyTorch equivalent of the spec's kernel on workload `w`: a zero-argument callable returning the
    spec's outputs (a tuple where it has several, in the spec's order). The problem is the spec's name
    without its language suffix, matched exactly (matmul is not matmul_rect, softmax not log_softmax)."""
    F = torch.nn.functional
    dev = device
    g = torch.Generator(device=dev)
    g.manual_seed(1)
    name = problem_name(spec["name"])
    # The CUDA engineer's five problems, as they always were: standard normal inputs.
    if name == "matmul":
        A = torch.randn(w["M"], w["K"], device=dev, generator=g)
        B = torch.randn(w["K"], w["N"], device=dev, generator=g)
        C = torch.empty(w["M"], w["N"], device=dev)
        return lambda: torch.mm(A, B, out=C)
    if name in ("softmax", "layernorm", "row_sum", "scale_bias_gelu"):
        x = torch.randn(w["M"], w["N"], device=dev, generator=g)
        if name == "softmax":
            return lambda: torch.softmax(x, dim=-1)
        if name == "layernorm":
            gamma = torch.randn(w["N"], device=dev, generator=g)
            beta = torch.randn(w["N"], device=dev, generator=g)
            eps = scalar(spec, "eps")
            return lambda: F.layer_norm(x, (w["N"],), gamma, beta, eps)
        if name == "row_sum":
            return lambda: x.sum(dim=1)
        bias = torch.randn(w["N"], device=dev, generator=g)
        scale = scalar(spec, "scale")
        return lambda: F.gelu(x * scale + bias)
    # The others (those with a Triton version): the spec's own inputs, by name; each call is what the
    # problem's ref.cu computes, written as a PyTorch user would.
    if name not in SPEC_INPUT_PROBLEMS:
        raise ValueError("no PyTorch baseline for " + spec["name"])
    t = spec_inputs(spec, w, torch, dev, g)
    if name in ("relu", "gelu", "silu", "log_softmax", "l2norm", "cumsum", "col_mean", "transpose"):
        x = t["x"]
        return {"relu": lambda: torch.relu(x),
                "gelu": lambda: F.gelu(x),  # the erf form, as ref.cu
                "silu": lambda: F.silu(x),
                "log_softmax": lambda: torch.log_softmax(x, dim=1),
                "l2norm": lambda: F.normalize(x, p=2.0, dim=1),  # x / max(||x||, 1e-12), as ref.cu
                "cumsum": lambda: torch.cumsum(x, dim=1),
                "col_mean": lambda: x.mean(dim=0),
                "transpose": lambda: x.t().contiguous()}[name]
    if name in ("reduce_max", "argmax"):  # over R of a B x R x C tensor; argmax's first maximum, int64
        x = t["x"]
        return (lambda: torch.amax(x, dim=1)) if name == "reduce_max" else (lambda: torch.argmax(x, dim=1))
    if name == "rmsnorm":
        x, wt, eps, n = t["x"], t["w"], scalar(spec, "eps"), w["N"]
        if hasattr(F, "rms_norm"):
            return lambda: F.rms_norm(x, (n,), wt, eps)
        return lambda: x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * wt  # torch < 2.4
    if name == "batchnorm":  # inference: running statistics (var drawn positive, so |var| = var)
        eps = scalar(spec, "eps")
        return lambda: F.batch_norm(t["x"], t["mean"], t["var"], t["gamma"], t["beta"], False, 0.0, eps)
    if name == "cross_entropy":
        # ref.cu takes each target modulo C; PyTorch needs them in range: reduced once, outside the timing.
        logits, target = t["logits"], torch.remainder(t["target"], w["C"])
        return lambda: F.cross_entropy(logits, target, reduction="none")
    if name == "matvec":
        A, x = t["A"], t["x"]
        return lambda: torch.mv(A, x)
    if name == "maxpool2d":  # 3x3 window, stride 2, padding 1 (the padding never wins), as ref.cu
        x = t["x"]
        return lambda: F.max_pool2d(x, 3, 2, 1)
    if name == "gemm_bias_relu_scale":  # relu(x W^T + b) * scale
        x, W, b, scale = t["x"], t["W"], t["b"], scalar(spec, "scale")
        return lambda: F.relu(F.linear(x, W, b)) * scale
    if name == "residual_layernorm":  # h = x + r; y = layer_norm(h): both outputs, as ref.cu
        x, r, gamma, beta, eps, n = t["x"], t["r"], t["gamma"], t["beta"], scalar(spec, "eps"), w["N"]

        def run():
            h = x + r
            return h, F.layer_norm(h, (n,), gamma, beta, eps)
        return run
    raise ValueError("no PyTorch baseline for " + spec["name"])


def output_mismatch(spec, w, result, torch):
    """Why `result` (what torch_op's callable returned) is not the spec's outputs in shape and dtype, or ""."""
    names = spec_names(spec, w)
    want = [(tuple(int(eval_cost(str(d), names)) for d in p["shape"]), getattr(torch, TORCH_DTYPES[p["dtype"]]))
            for p in spec["params"] if p.get("role") in ("out", "inout")]
    got = [(tuple(r.shape), r.dtype) for r in (result if isinstance(result, (tuple, list)) else (result,))]
    return "" if got == want else f"outputs {got}, the spec's {want}"


def time_us(fn, torch, flush, reps, device="cuda"):
    if not str(device).startswith("cuda"):  # the CPU (for checking the ops): wall time, no cache flush
        import time
        for _ in range(2):
            fn()
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e6)
        return statistics.median(times)
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
    dev = args.device
    cuda = dev.startswith("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    if cuda:
        props = torch.cuda.get_device_properties(dev)
        l2 = getattr(props, "L2_cache_size", 50 << 20)
        flush = torch.zeros(2 * l2 // 4, dtype=torch.float32, device=dev)
        out = {"device": torch.cuda.get_device_name(dev), "torch": torch.__version__, "problems": {}}
        n = (1 << 30) // 4
    else:
        import platform
        flush = None
        out = {"device": f"{dev} {platform.processor() or platform.machine()}", "torch": torch.__version__,
               "problems": {}}
        n = (64 << 20) // 4
    # The two ceilings as a PyTorch user would see them: a 1 GiB copy and a 4096^3 fp32 product.
    src = torch.randn(n, device=dev)
    dst = torch.empty_like(src)
    t = time_us(lambda: dst.copy_(src), torch, flush, 20, dev)
    out["copy_gbps"] = 2 * n * 4 / (t * 1e-6) / 1e9
    src = dst = None  # the copy's buffers freed before the problems run
    failed = 0
    for spec_path in args.specs:
        spec = load_spec(spec_path)
        rows = []
        try:
            for w in spec["workloads"]:
                fn = torch_op(spec, w, torch, dev)
                why = output_mismatch(spec, w, fn(), torch)
                if why:
                    print(f"torch {spec['name']} {w}: {why}", file=sys.stderr)
                big = w.get("M", 0) * w.get("N", 0) * w.get("K", 0) > 1e9  # matrix products: 10 calls do
                reps = (10 if big else 50) if cuda else 5
                rows.append({"workload": w, "time_us": time_us(fn, torch, flush, reps, dev)})
                del fn
                if cuda:
                    torch.cuda.empty_cache()
        except Exception as e:  # one problem's failure leaves the others' times
            print(f"torch {spec['name']}: failed: {type(e).__name__}: {e}", file=sys.stderr)
            failed += 1
            continue
        out["problems"][spec["name"]] = rows
        print(f"torch {spec['name']}: " + ", ".join(f"{r['time_us']:.1f} us" for r in rows), file=sys.stderr)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    if failed:
        sys.exit(1)


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


def geomean(xs):
    xs = [x for x in xs if x is not None and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def last_log_line(path):
    """The last line of a run's log that is not a search progress line: usually why it stopped."""
    try:
        with open(path, errors="replace") as f:
            lines = [l.strip() for l in f if l.strip() and not l.startswith(("node ", "evolving "))]
    except OSError:
        return ""
    return lines[-1][:160] if lines else ""


def read_run(path):
    """A `kernelevolve run --json` output: (the run's JSON or None, its problem name, why it has no correct
    kernel or ""). Beside RUN.json, RUN.rc (the exit status) and RUN.log are read where they exist."""
    stem = path[:-len(".json")] if path.endswith(".json") else path
    run, why = None, ""
    try:
        with open(path) as f:
            text = f.read().strip()
        run = json.loads(text.splitlines()[-1]) if text else None
        if run is not None and not isinstance(run, dict):
            run = None
        if run is None:
            why = "no output"
    except OSError as e:
        why = f"cannot read {os.path.basename(path)}: {e.strerror}"
    except json.JSONDecodeError:
        why = "its output is not JSON"
    if run is None:
        try:
            with open(stem + ".rc") as f:
                rc = f.read().strip()
            if rc.lstrip("-").isdigit():
                why += {"124": " (exit 124: ran past its time limit)", "137": " (exit 137: killed)"}.get(
                    rc, f" (exit {rc})")
            elif rc:
                why = rc  # the driver's own word: e.g. not run, past its deadline
        except OSError:
            pass
        log = last_log_line(stem + ".log")
        if log:
            why += f"; log: {log}"
    elif run.get("best") is None or (run.get("seed") or {}).get("status") != "ok":
        seed = run.get("seed") or {}
        if seed.get("status") not in (None, "ok"):
            why = f"seed {seed['status']}: {' '.join(str(seed.get('message', '')).split())[:160]}"
        else:
            why = f"no correct kernel ({run.get('status_counts')}, stopped: {run.get('stop_reason')})"
    if run and run.get("spec"):
        name = problem_name(run["spec"])
    else:  # from the file's name: relu.triton.json, relu_cuda.json, level1-relu.cuda.json
        name = os.path.basename(stem)
        for lang in ("triton", "cuda"):
            for sep in (".", "_"):
                if name.endswith(sep + lang):
                    name = name[:-len(sep + lang)]
        name = name.rsplit("-", 1)[-1]
    return run, name, why


def run_ok(run):
    return bool(run) and run.get("best") is not None and (run.get("seed") or {}).get("status") == "ok"


def cmd_triton_table(args):
    """One row per problem: Triton's seed and best, CUDA's best, PyTorch eager, and their ratios."""
    notes = []
    base, torch_rows = {}, {}
    if args.torch:
        try:
            with open(args.torch) as f:
                base = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            notes.append(f"PyTorch eager: no times ({args.torch}: {e})")
    # PyTorch's times by problem (a Triton spec's times over a CUDA spec's where both were timed).
    for spec_name, rows in sorted((base.get("problems") or {}).items(), key=lambda kv: kv[0].endswith("_triton")):
        torch_rows[problem_name(spec_name)] = [r.get("time_us") for r in rows]
    runs = {"triton": {}, "cuda": {}}
    order = []
    device = None
    for lang, paths in (("triton", args.triton or []), ("cuda", args.cuda or [])):
        for path in paths:
            run, name, why = read_run(path)
            if name in runs[lang]:
                notes.append(f"{name} {lang}: more than one run given; {path} is the one shown")
            runs[lang][name] = (run, why, path)
            if name not in order:
                order.append(name)
            if run and run.get("device") and device is None:
                device = run["device"]

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

    def level_of(name):
        import glob
        found = sorted(glob.glob(os.path.join(root, "problems", "level*", name)))
        return os.path.basename(os.path.dirname(found[0])) if found else ""

    def first(xs):
        return xs[0] if xs else None

    rows = []
    for name in order:
        trun, twhy, _ = runs["triton"].get(name, (None, "no run given", None))
        crun, cwhy, _ = runs["cuda"].get(name, (None, "no run given", None))
        t_ok, c_ok = run_ok(trun), run_ok(crun)
        if not t_ok:
            notes.append(f"{name} triton: {twhy}")
        if not c_ok:
            notes.append(f"{name} cuda: {cwhy}")
        tb = trun["best"]["time_us"] if t_ok else []
        cb = crun["best"]["time_us"] if c_ok else []
        eager = torch_rows.get(name) or []
        if args.torch and base and not eager:
            notes.append(f"{name} eager: no PyTorch time in {os.path.basename(args.torch)}")
        r = {"level": level_of(name), "problem": name, "t_ok": t_ok, "c_ok": c_ok,
             "t_seed": first((trun.get("seed") or {}).get("time_us")) if t_ok else None,
             "t_best": first(tb), "t_speedup": trun["best"].get("speedup") if t_ok else None,
             "c_best": first(cb), "eager": first(eager),
             "t_vs_c": None, "e_vs_t": None, "gbps": None, "tflops": None, "roofline": None,
             "t_evals": trun.get("evaluations") if trun else None, "c_evals": crun.get("evaluations") if crun else None,
             "t_tunables": trun["best"].get("tunables") if t_ok else None,
             "c_tunables": crun["best"].get("tunables") if c_ok else None}
        if tb and cb:
            if len(tb) == len(cb):
                r["t_vs_c"] = geomean([t / c for t, c in zip(tb, cb)])
            else:
                notes.append(f"{name}: Triton timed {len(tb)} workloads, CUDA {len(cb)}: no ratio")
        if tb and eager:
            if len(tb) == len(eager) and all(e is not None for e in eager):
                r["e_vs_t"] = geomean([e / t for e, t in zip(eager, tb)])
            else:
                notes.append(f"{name}: Triton timed {len(tb)} workloads, PyTorch {len(eager)}: no ratio")
        if t_ok:
            best = trun["best"]
            gbps, gflops = first(best.get("gbps")), first(best.get("gflops"))
            # Compute-bound (a matrix product) where the work per byte is high: TFLOP/s; else GB/s.
            if gflops and gbps and gflops / gbps > 20:
                r["tflops"] = gflops / 1e3
            else:
                r["gbps"] = gbps
            r["roofline"] = first(best.get("roofline_share"))
        rows.append(r)

    def us(v):
        return "-" if v is None else (f"{v:.0f}" if v >= 1000 else f"{v:.1f}")

    def x(v):
        return "-" if v is None else f"{v:.2f}x"

    def rate(r):
        if r["tflops"] is not None:
            return f"{r['tflops']:.1f} TFLOP/s"
        return "-" if r["gbps"] is None else f"{r['gbps']:.0f} GB/s"

    def pct(v):
        return "-" if v is None else f"{100 * v:.0f}%"

    def evals(r):
        return f"{'-' if r['t_evals'] is None else r['t_evals']}/{'-' if r['c_evals'] is None else r['c_evals']}"

    cols = [("problem", 20, "l"), ("T seed us", 10, "r"), ("T best us", 10, "r"), ("T speedup", 9, "r"),
            ("C best us", 10, "r"), ("eager us", 9, "r"), ("T/C time", 8, "r"), ("eager/T", 8, "r"),
            ("T achieved", 13, "r"), ("T roofline", 10, "r"), ("evals T/C", 9, "r")]

    def cells(r):
        return [r["problem"], us(r["t_seed"]), us(r["t_best"]), x(r["t_speedup"]), us(r["c_best"]), us(r["eager"]),
                x(r["t_vs_c"]), x(r["e_vs_t"]), rate(r), pct(r["roofline"]), evals(r)]

    def line(vals):
        return " ".join(f"{v:<{w}}" if a == "l" else f"{v:>{w}}" for v, (_, w, a) in zip(vals, cols)).rstrip()

    g_tc = geomean([r["t_vs_c"] for r in rows])
    g_et = geomean([r["e_vs_t"] for r in rows])
    g_sp = geomean([r["t_speedup"] for r in rows])
    with_eager = [r for r in rows if r["e_vs_t"] is not None]
    with_cuda = [r for r in rows if r["t_vs_c"] is not None]
    beats_eager = sum(r["e_vs_t"] > 1 for r in with_eager)
    beats_cuda = sum(r["t_vs_c"] < 1 for r in with_cuda)
    summary = (f"Triton's best beats PyTorch eager on {beats_eager} of {len(with_eager)} problems and CUDA's best on "
               f"{beats_cuda} of {len(with_cuda)} (of the {len(rows)} problems, those with both times; geometric "
               f"means over workloads).")
    explain = ("T: the Triton spec (triton.json), C: the CUDA spec (cuda.json), eager: the PyTorch operator "
               "(bench/gpu_baselines.py torch). Times are the first workload's medians (the best kernel's, "
               "which serves every workload); T speedup (over its seed), T/C time (below 1: Triton faster) and "
               "eager/T (above 1: Triton faster) are geometric means over all workloads. T achieved and T "
               "roofline: the Triton best on the first workload (TFLOP/s for matrix products, else GB/s; the "
               "roofline share of the device's measured ceiling).")
    torch_line = (f"PyTorch {base.get('torch')} on {base.get('device')}; torch copy "
                  f"{base.get('copy_gbps', float('nan')):.0f} GB/s") if base else "no PyTorch times"

    text = [f"device: {device} ({torch_line})", line([c[0] for c in cols]), "-" * len(line([c[0] for c in cols]))]
    text += [line(cells(r)) for r in rows]
    text.append("-" * len(text[1]))
    text.append(line(["geometric mean", "", "", x(g_sp), "", "", x(g_tc), x(g_et), "", "", ""]))
    text.append(summary)
    if notes:
        text.append("missing or failed (shown as -):")
        text += [f"  {n}" for n in notes]
    print("\n".join(text))

    if not args.out:
        return
    with open(args.out + ".tsv", "w") as f:
        def num(v):
            return "nan" if v is None else str(v)

        def tun(t):
            return "" if not t else " ".join(f"{k}={v}" for k, v in t.items())
        f.write("level\tproblem\ttriton_correct\tcuda_correct\ttriton_seed_us\ttriton_best_us\ttriton_speedup\t"
                "cuda_best_us\ttorch_us\ttriton_vs_cuda\ttorch_vs_triton\ttriton_gbps\ttriton_tflops\t"
                "triton_roofline\ttriton_evals\tcuda_evals\ttriton_tunables\tcuda_tunables\n")
        for r in rows:
            f.write("\t".join([r["level"], r["problem"], str(int(r["t_ok"])), str(int(r["c_ok"])),
                               *(num(r[k]) for k in ("t_seed", "t_best", "t_speedup", "c_best", "eager", "t_vs_c",
                                                     "e_vs_t", "gbps", "tflops", "roofline", "t_evals", "c_evals")),
                               tun(r["t_tunables"]), tun(r["c_tunables"])]) + "\n")
    with open(args.out + ".md", "w") as f:
        def dash(s):
            return "–" if s == "-" else s
        f.write(f"## Triton, CUDA and PyTorch eager: {device}\n\n")
        if args.made_by:
            f.write(f"{args.made_by}\n\n")
        f.write(f"{torch_line}.\n\n")
        f.write("| level | problem | T seed µs | T best µs | T speedup | C best µs | eager µs | T/C time | eager/T "
                "| T achieved | T roofline | evals T/C | T best tunables |\n")
        f.write("| --- | --- | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --- |\n")
        for r in rows:
            c = [dash(v) for v in cells(r)]
            f.write(f"| {r['level']} | " + " | ".join(c) + f" | {tun(r['t_tunables']) or '–'} |\n")
        f.write(f"| | **geometric mean** | | | {dash(x(g_sp))} | | | {dash(x(g_tc))} | {dash(x(g_et))} | | | | |\n\n")
        f.write(summary + "\n\n" + explain + "\n")
        if notes:
            f.write("\nMissing or failed (–):\n\n" + "".join(f"- {n}\n" for n in notes))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("torch")
    t.add_argument("specs", nargs="+")
    t.add_argument("--out", required=True)
    t.add_argument("--device", default="cuda", help="where to run them (default cuda; cpu checks the ops)")
    tb = sub.add_parser("table")
    tb.add_argument("--torch", required=True)
    tb.add_argument("runs", nargs="+")
    tt = sub.add_parser("triton-table", help="Triton next to CUDA next to PyTorch eager, one row per problem")
    tt.add_argument("--torch", help="PyTorch's times (gpu_baselines.py torch --out)")
    tt.add_argument("--triton", nargs="*", default=[], help="kernelevolve run --json outputs of triton.json specs")
    tt.add_argument("--cuda", nargs="*", default=[], help="kernelevolve run --json outputs of cuda.json specs")
    tt.add_argument("--out", help="also write OUT.md and OUT.tsv")
    tt.add_argument("--made-by", help="a line for OUT.md saying how the runs were made")
    args = ap.parse_args()
    {"torch": cmd_torch, "table": cmd_table, "triton-table": cmd_triton_table}[args.cmd](args)


if __name__ == "__main__":
    main()
