#!/usr/bin/env python3
"""Issue 30's level-3 table on one GPU (first run there 2026-11-27: bench/results/optimize_l3_h200.md):
`kernelevolve optimize` on KernelBench level 3's models 1, 4, 9, 11, 20, 28, 33 and 43 (MLP, LeNet5, ResNet18, VGG16,
MobileNetV2, a vision transformer, an RNN cell, attention) and on our recommendation model (problems/models/dlrm),
each from its own folder, with a time limit per model. After each model it writes that model's report
(OUT/NAME.json, optimize's --json; its folder OUT/NAME) and the table so far (OUT/level3.md, from OUT/rows.json):

    model | regions | kept | vs eager (spread) | vs torch.compile (spread) | under CUDA graphs: vs eager / vs
    torch.compile | seconds | outcome

where regions is distinct (occurrences), kept is put back / evolved / kept by share, and a speedup is the median of
optimize's interleaved A/B with its 10th-90th percentile spread (optimize states a speedup only where the spread is
on one side of 1: the outcome says which); on CUDA the same two A/Bs with each forward a CUDA graph (eager replayed,
torch.compile's reduce-overhead mode), which a model bound by the CPU's launches needs to show its kernels.
Resumable: a model with a row is skipped (--retry runs again the rows that failed or timed out; optimize itself
resumes each region's run from OUT/NAME/optimize.db).

    python3 bench/optimize_l3.py KERNELBENCH [--cli build-gpu/kernelevolve] [--device cuda:0] [--max-evals 8]
        [--limit 1800] [--out $OUT] [--models 1,4,...,dlrm] [--retry] [--stop-after SEC]
        [-- extra optimize arguments]

KERNELBENCH is a KernelBench checkout (the folder holding level3/, or above it: kernelbench/KernelBench is one; never
committed here), or any folder of level-3 files with KernelBench's names (smaller copies, for a CPU check). The DLRM
model runs at its GPU size unless KE_DLRM_SIZE=cpu is set. On the lent GPU (torch 2.x with CUDA as KE_PYTHON, or the
first python3 whose torch imports):

    python3 bench/optimize_l3.py kernelbench/KernelBench --cli build-gpu/kernelevolve --device cuda:0 --max-evals 8 \\
        --limit 1500 --out $OUT/l3

On the CPU (the script's own check: 1_MLP as KernelBench sizes it, and the DLRM at its CPU size):

    KE_DLRM_SIZE=cpu python3 bench/optimize_l3.py kernelbench/KernelBench --cli build/kernelevolve --device cpu \\
        --models 1,dlrm --max-evals 1 --limit 600 --out /tmp/l3 -- --budget 0.5 --mutator command --command \\
        "python3 tests/fixtures/optimize/kernel_writer.py"
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LEVEL3 = {"1": "1_MLP.py", "4": "4_LeNet5.py", "9": "9_ResNet18.py", "11": "11_VGG16.py", "20": "20_MobileNetV2.py",
          "28": "28_VisionTransformer.py", "33": "33_VanillaRNN.py", "43": "43_MinGPTCausalAttention.py"}
DLRM = os.path.join(ROOT, "problems", "models", "dlrm", "model.py")
COLUMNS = ["model", "regions", "kept", "vs eager (spread)", "vs torch.compile (spread)",
           "under CUDA graphs: vs eager / vs torch.compile", "seconds", "outcome"]


def level3_dir(path):
    for candidate in (os.path.join(path, "level3"), os.path.join(path, "KernelBench", "level3"), path):
        if os.path.isfile(os.path.join(candidate, LEVEL3["1"])):
            return candidate
    sys.exit(f"optimize_l3: {path} holds no level3/{LEVEL3['1']} (a KernelBench checkout, or a folder of its files)")


def speedup(ab):
    """'1.234x (1.100x-1.350x)' from an A/B's median and spread, or why there is none."""
    if not ab:
        return "-"
    if ab.get("status") not in (None, "done") or ab.get("speedup") is None:
        return ab.get("reason", ab.get("status", "-")).split(":")[0][:60]
    lo, hi = ab.get("spread") or (None, None)
    text = f"{ab['speedup']:.3f}x"
    return text + (f" ({lo:.3f}x-{hi:.3f}x)" if lo is not None else "")


def row_of(name, report, seconds, rc, stderr, limit):
    row = dict.fromkeys(COLUMNS, "-")
    row["model"], row["seconds"] = name, f"{seconds:.0f}"
    if report is None or "regions" not in report:
        timed_out = rc == "timeout"
        why = f"timed out (limit {limit:.0f} s)" if timed_out else \
            f"exit {rc}: " + (stderr.strip().splitlines() or ["(nothing on stderr)"])[-1][:200]
        row["outcome"], row["failed"] = why, True
        return row
    regions = report["regions"]
    row["regions"] = f"{len(regions)} ({sum(r['count'] for r in regions)})"
    evolved = sum(1 for r in regions if (r.get("evolve") or {}).get("status") == "evolved")
    row["kept"] = f"{sum(1 for r in regions if r.get('put_back'))} / {evolved} / {sum(1 for r in regions if r['kept'])}"
    put_back = report.get("put_back") or {}
    row["vs eager (spread)"] = speedup(put_back.get("ab_eager"))
    row["vs torch.compile (spread)"] = speedup(put_back.get("ab_compile"))
    if put_back.get("under_compile") == "original":  # its guards step aside under compile: say what they cost there
        row["vs torch.compile (spread)"] += ("; guards step aside, with the operators "
                                             + speedup(put_back["ab_compile"].get("with_operators")))
    graphs = put_back.get("ab_graphs") or {}
    if graphs.get("status") in ("done", "failed"):  # on CUDA: the same two A/Bs with each forward a CUDA graph
        row["under CUDA graphs: vs eager / vs torch.compile"] = (
            speedup(graphs) + " / " + speedup(put_back.get("ab_compile_graphs") or {"status": "not measured"}))
        with_ops = (put_back.get("ab_compile_graphs") or {}).get("with_operators")
        if with_ops:
            row["under CUDA graphs: vs eager / vs torch.compile"] += "; with the operators " + speedup(with_ops)
    if put_back.get("status") == "done":
        parity = put_back.get("parity", {})
        verdict = (put_back.get("ab_eager") or {}).get("verdict", "")
        row["outcome"] = (f"parity {'yes' if parity.get('ok') else 'NO'} (max error {parity.get('max_abs_error', 0):.2g}), "
                          f"engaged {'yes' if put_back.get('engaged') else 'NO'}; {verdict}")
    elif put_back:
        row["outcome"] = "not put back: " + str(put_back.get("reason", put_back.get("status")))[:160]
    else:
        row["outcome"] = "steps 1-3 only" if report.get("next") else "no put-back section"
    row["failed"] = False
    return row


def write_table(out, rows, settings):
    lines = [f"# optimize on KernelBench level 3 and the DLRM model ({settings})", "",
             "kept: put back / evolved / kept by share. Speedups: optimize's interleaved A/B, median (10th-90th "
             "percentile of the rounds).", "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows:
        lines.append("| " + " | ".join(str(row[c]).replace("|", "/") for c in COLUMNS) + " |")
    with open(os.path.join(out, "level3.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        extra, argv = argv[argv.index("--") + 1:], argv[:argv.index("--")]
    parser = argparse.ArgumentParser(prog="optimize_l3", description=__doc__.split("\n\n")[0])
    parser.add_argument("kernelbench")
    parser.add_argument("--cli", default=os.path.join(ROOT, "build-gpu", "kernelevolve"))
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--max-evals", type=int, default=8)
    parser.add_argument("--limit", type=float, default=1800,
                        help="seconds per model: optimize's --timeout (which stops the optimizer a minute past it); "
                             "the model's whole process group is killed two minutes past it")
    parser.add_argument("--out", default=os.environ.get("OUT", "/tmp/ke-optimize-l3"))
    parser.add_argument("--models", default=",".join(list(LEVEL3) + ["dlrm"]))
    parser.add_argument("--retry", action="store_true", help="run again the models whose row failed or timed out")
    parser.add_argument("--stop-after", type=float, default=0,
                        help="seconds for this call: start no model that its --limit could carry past them (a "
                             "device command's own limit; the next call resumes)")
    args = parser.parse_args(argv)
    level3 = level3_dir(args.kernelbench)
    os.makedirs(args.out, exist_ok=True)
    rows_file = os.path.join(args.out, "rows.json")
    rows = json.load(open(rows_file)) if os.path.exists(rows_file) else []
    settings = f"--device {args.device} --max-evals {args.max_evals}, {args.limit:.0f} s a model" + \
               (f", {' '.join(extra)}" if extra else "")
    began = time.monotonic()
    for key in args.models.split(","):
        if key == "dlrm":
            name, path = "dlrm" + ("_cpu" if os.environ.get("KE_DLRM_SIZE") == "cpu" else ""), DLRM
        elif key in LEVEL3:
            name, path = LEVEL3[key][:-3], os.path.join(level3, LEVEL3[key])
        else:
            sys.exit(f"optimize_l3: --models: {key} is none of {', '.join(LEVEL3)}, dlrm")
        done = next((r for r in rows if r["model"] == name), None)
        if done and not (args.retry and done.get("failed")):
            print(f"{name}: has a row, skipped", file=sys.stderr)
            continue
        if args.stop_after and time.monotonic() - began + args.limit + 120 > args.stop_after:
            print(f"{name}: not started, {args.stop_after - (time.monotonic() - began):.0f} s of --stop-after left "
                  f"(a model may take --limit {args.limit:.0f} s and 120 more): the next call resumes here",
                  file=sys.stderr)
            break
        rows = [r for r in rows if r["model"] != name]
        command = [args.cli, "optimize", path, "--device", args.device, "--max-evals", str(args.max_evals), "--json",
                   "--out", os.path.join(args.out, name), "--timeout", str(int(args.limit)), *extra]
        print(f"{name}: {' '.join(command)}", file=sys.stderr, flush=True)
        start = time.monotonic()
        # Its own process group, so that a model past its limit is stopped with every run it started.
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   start_new_session=True)
        try:
            stdout, stderr = process.communicate(timeout=args.limit + 120)  # optimize's own --timeout first
            rc = process.returncode
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
            rc = "timeout"
        seconds = time.monotonic() - start
        with open(os.path.join(args.out, name + ".err"), "w") as f:
            f.write(stderr)
        report = None
        if rc == 0:
            try:
                report = json.loads(stdout)
            except ValueError:
                rc = "unreadable report"
        if report is not None:
            with open(os.path.join(args.out, name + ".json"), "w") as f:
                json.dump(report, f, indent=1)
        row = row_of(name, report, seconds, rc, stderr, args.limit)
        rows.append(row)
        with open(rows_file, "w") as f:
            json.dump(rows, f, indent=1)
        write_table(args.out, rows, settings)
        print(f"{name}: {row['outcome']} ({seconds:.0f} s)", file=sys.stderr, flush=True)
    print(open(os.path.join(args.out, "level3.md")).read() if rows else "no rows")


if __name__ == "__main__":
    main()
