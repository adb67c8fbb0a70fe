#!/usr/bin/env python3
"""Issue 31's table: KernelBench levels 1 and 2 with no model and no seed. Each problem file is run as a user runs
it, `kernelevolve run FILE --device cuda:N --no-db --max-evals K --json`: node 0 is torch.compile's program,
captured and translated by the run itself (--first compile, the default there), then the parameter search; the run
measures eager and torch.compile by the same protocol. A file whose program cannot be translated ends with the
run's refusal, which is recorded with its reason.

    python3 bench/inductor_first_levels.py KERNELBENCH_DIR --cli build-gpu/kernelevolve --out FILE.md
        [--levels 1,2] [--devices cuda:0,cuda:1 | cuda:all] [--max-evals 4] [--limit 300] [--deadline SEC]
        [--only REGEX] [--retry]
    python3 bench/inductor_first_levels.py --report FILE.jsonl FILE.md    (the table again from the rows)

Several GPUs share the files out, one run at a time on each, so that every time is one problem's alone on its card.
Rows go to FILE.jsonl as they are made (a later call resumes: a file with a row is not run again; --retry runs
again the rows that timed out or crashed), and the table to FILE.md; both are copied to $OUT when it is set (the
lent GPU's output folder). KernelBench is not part of this repository: git clone
https://github.com/ScalingIntelligence/KernelBench
"""
import argparse
import json
import math
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time

RETRYABLE = ("timeout", "crash")


def problem_files(kb, levels, only):
    root = os.path.join(kb, "KernelBench") if os.path.isdir(os.path.join(kb, "KernelBench")) else kb
    files = []
    for level in levels:
        d = os.path.join(root, f"level{level}")
        if not os.path.isdir(d):
            sys.exit(f"inductor_first_levels: {d} is not a folder (give the KernelBench checkout)")
        names = sorted((n for n in os.listdir(d) if n.endswith(".py")), key=lambda n: int(re.match(r"\d*", n)[0] or 0))
        for n in names:
            if only and not re.search(only, f"level{level}/{n}"):
                continue
            files.append((level, n[:-3], os.path.join(d, n)))
    return files


def reason_of(stderr):
    """The run's own error line (`kernelevolve: ...`), else its last line."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    mine = [line for line in lines if line.startswith("kernelevolve: ") and "sandbox is off" not in line]
    text = (mine[-1][len("kernelevolve: "):] if mine else (lines[-1] if lines else ""))
    return text.strip()[:400]


def first_time(entry):
    """The first workload's median and spread of a report entry ({time_us, spread_us}), or None."""
    if not entry or not entry.get("time_us"):
        return None
    spread = entry.get("spread_us") or [0]
    return entry["time_us"][0], spread[0]


def run_stamped(cmd, limit):
    """Runs cmd; returns (exit code or None on timeout, stdout, stderr, stderr with each line's second since the
    start), so that a run's log shows where its time went (capture, baselines, compiling, timing)."""
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out_parts, err_lines, stamped = [], [], []

    def read_out():
        out_parts.append(p.stdout.read())

    def read_err():
        for line in p.stderr:
            err_lines.append(line)
            stamped.append(f"[{time.time() - t0:7.1f}s] {line}")

    readers = [threading.Thread(target=read_out), threading.Thread(target=read_err)]
    for r in readers:
        r.start()
    try:
        rc = p.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        rc = None
    for r in readers:
        r.join()
    return rc, "".join(out_parts), "".join(err_lines), "".join(stamped)


def run_one(cli, level, name, path, device, max_evals, limit, work, precision=""):
    d = os.path.join(work, f"level{level}", name)
    os.makedirs(d, exist_ok=True)
    cmd = [cli, "run", path, "--device", device, "--no-db", "--max-evals", str(max_evals), "--seed", "7", "--json"]
    if precision:
        cmd += ["--precision", precision]
    t0 = time.time()
    row = {"level": level, "problem": name, "device": device, "command": " ".join(cmd[1:])}
    rc, out, err, stamped = run_stamped(cmd, limit)
    row["seconds"] = round(time.time() - t0, 1)
    with open(os.path.join(d, "run.json"), "w") as f:
        f.write(out)
    with open(os.path.join(d, "run.err"), "w") as f:
        f.write(stamped)
    report = None
    if out.strip():
        try:
            report = json.loads(out.strip().splitlines()[-1])
        except ValueError:
            report = None
    if rc is None:
        row.update(outcome="timeout", reason=f"the run took more than {limit} s")
    elif report is None:
        # Exit 2 is a refusal (the program could not be translated, the module not imported); anything else a crash.
        row.update(outcome="refused" if rc == 2 else "crash", reason=reason_of(err) or f"exit {rc}")
    else:
        seed = report.get("seed") or {}
        row["node0_status"] = seed.get("status")
        row["node0_message"] = (seed.get("message") or "")[:300]
        row["node0"] = first_time(seed)
        # Static sizes are torch.compile's own kernels; a dynamic capture's take the sizes as arguments (slower
        # index arithmetic), so which one node 0 is, and why the static one did not translate, explain its time.
        line = next((x for x in err.splitlines() if "node 0 is torch.compile's program" in x), "")
        if line:
            row["capture"] = ("dynamic" if "static sizes" not in line else
                              "static, plain layouts" if "the default capture did not translate" in line else "static")
            why = re.search(r"(?:the static capture did not translate \(|the default capture did not translate: )"
                            r"(.*?)\); ", line)
            if why:
                row["static_why"] = why.group(1)[:200]
        base = report.get("baselines") or {}
        for key in ("eager", "compile"):
            b = base.get(key) or {}
            row[key] = first_time(b)
            if b.get("status") not in (None, "ok"):
                row[key + "_reason"] = (b.get("reason") or b.get("status"))[:200]
        best = report.get("best")
        row["best"] = first_time(best)
        # The mark to beat (issue 50): the faster of eager and compile, and the best over it (all workloads).
        row["precision"] = (report.get("precision") or {}).get("policy")
        row["best_vs_mark"] = (best or {}).get("speedup_vs_best_baseline")
        row["best_tunables"] = (best or {}).get("tunables")
        row["evaluations"] = report.get("evaluations")
        row["statuses"] = report.get("status_counts")
        row["card"] = report.get("device")
        row["outcome"] = "ok" if best else "no correct program"
        if not best:
            row["reason"] = row["node0_message"] or reason_of(err)
    return row


def ratio(a, b):
    """a's time over b's: how many times faster b is than a (None where either is missing)."""
    if not a or not b or a[0] <= 0 or b[0] <= 0:
        return None
    return a[0] / b[0]


def within_spread(a, b):
    return abs(a[0] - b[0]) <= a[1] + b[1]


def mark(r):
    """The faster of eager and compile on the first workload (issue 50's mark to beat), as (median, spread)."""
    times = [t for t in (r.get("eager"), r.get("compile")) if t and t[0] > 0]
    return min(times) if times else None


def fmt(t):
    return "" if not t else f"{t[0]:.1f}"


def fmtx(x):
    return "" if x is None else f"{x:.2f}x"


def geomean(xs):
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def report(rows, md_path, args_text):
    rows = sorted(rows, key=lambda r: (r["level"], int(re.match(r"\d*", r["problem"])[0] or 0), r["problem"]))
    lines = ["# The first program from torch.compile on KernelBench, with no model", "",
             f"Made by `{args_text}`. Times are each problem's first workload, in µs, medians as the run measured "
             "them (eager and torch.compile by the same protocol in the same run); node 0 is torch.compile's "
             "program translated, verified on fresh inputs; best is the parameter search's best correct program.",
             ""]
    levels = sorted({r["level"] for r in rows})
    cards = sorted({r.get("card") for r in rows if r.get("card")})
    if cards:
        lines += ["Cards: " + "; ".join(cards) + ".", ""]
    precisions = sorted({r.get("precision") for r in rows if r.get("precision")})
    if precisions:
        lines += ["Precision policy: " + ", ".join(precisions) + ".", ""]
    summary = ["| level | problems | node 0 correct | node 0 within the spread of compile | node 0 / compile (geomean) "
               "| fast_0 | fast_1 (eager) | fast_1 (compile) | best over compile (geomean, correct ones) "
               "| node 0 within 3% of the mark or faster | fast_1 (the mark) | best over the mark (geomean) |",
               "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for level in levels + ["all"]:
        rs = [r for r in rows if level == "all" or r["level"] == level]
        n = len(rs)
        ok0 = [r for r in rs if r.get("node0_status") == "ok" and r.get("node0")]
        comp = [r for r in ok0 if r.get("compile")]
        within = sum(1 for r in comp if within_spread(r["node0"], r["compile"]))
        n0c = geomean([ratio(r["node0"], r["compile"]) for r in comp])
        best = [r for r in rs if r.get("best")]
        # KernelBench's fast_p: correct and more than p times faster than eager, over every problem.
        fast0 = sum(1 for r in best if (ratio(r.get("eager"), r["best"]) or 0) > 0)
        fast1 = sum(1 for r in best if (ratio(r.get("eager"), r["best"]) or 0) > 1)
        fast1c = sum(1 for r in best if (ratio(r.get("compile"), r["best"]) or 0) > 1)
        gc = geomean([ratio(r.get("compile"), r["best"]) for r in best])
        # Against the mark (the faster baseline): node 0 within 3% of it or faster, fast_1, and the best's geomean.
        marked = [r for r in ok0 if mark(r)]
        near = sum(1 for r in marked if r["node0"][0] <= 1.03 * mark(r)[0])
        fast1m = sum(1 for r in best if (ratio(mark(r), r["best"]) or 0) > 1)
        gm = geomean([r.get("best_vs_mark") or ratio(mark(r), r["best"]) for r in best])
        summary.append(f"| {level} | {n} | {len(ok0)} | {within} of {len(comp)} | "
                       f"{'' if n0c is None else f'{1 / n0c:.2f}x'} | {fast0 / n:.2f} | {fast1 / n:.2f} | "
                       f"{fast1c / n:.2f} | {fmtx(gc)} over {len(best)} | {near} of {len(marked)} | "
                       f"{fast1m / n:.2f} | {fmtx(gm)} |" if n else f"| {level} | 0 |")
    lines += ["## Summary", "", *summary, "",
              "fast_p is KernelBench's: the share of all problems (every file in the denominator) whose best program "
              "is correct and more than p times faster than eager (fast_1 (compile): than torch.compile). Node 0 / "
              "compile above 1.00x means node 0 is faster than compile. Within the spread: the two medians differ by "
              "no more than the sum of their median absolute deviations. The mark (issue 50) is the faster of eager and "
              "torch.compile on each workload, under the run's precision policy (`precisions` below).", ""]
    reasons = {}
    for r in rows:
        if r["outcome"] != "ok":
            why = r.get("reason") or r["outcome"]
            key = re.sub(r"\b\d+(\.\d+)?\b", "N", why)[:160]
            reasons.setdefault((r["outcome"], key), []).append(f"{r['level']}/{r['problem'].split('_')[0]}")
    if reasons:
        lines += ["## What did not run, and why", "", "| outcome | why | problems |", "| --- | --- | --- |"]
        for (outcome, why), who in sorted(reasons.items(), key=lambda kv: -len(kv[1])):
            lines.append(f"| {outcome} | {why.replace('|', '/')} | {len(who)}: {', '.join(who[:12])}"
                         f"{' ...' if len(who) > 12 else ''} |")
        lines.append("")
    captured = [r for r in rows if r.get("capture")]
    if captured:
        dynamic = [r for r in captured if r["capture"] == "dynamic"]
        plain = [r for r in captured if r["capture"] == "static, plain layouts"]
        lines += ["## How node 0 was captured", "",
                  f"Of {len(captured)} runs whose log says: {len(captured) - len(dynamic) - len(plain)} at the "
                  f"problem's own sizes (static: torch.compile's own kernels); {len(plain)} static again with "
                  "Inductor's layout optimization and stride padding off, where the first capture did not translate; "
                  f"{len(dynamic)} with the sizes as arguments (dynamic), where the static captures tried did not "
                  "translate (a run before the second capture existed tried the first alone). Why the first did not:",
                  ""]
        whys = {}
        for r in plain + dynamic:
            key = re.sub(r"\b(buf)?\d+(\.\d+)?\b", "N", r.get("static_why") or "not said (a run before the reason was kept)")
            whys.setdefault(key[:160], []).append(f"{r['level']}/{r['problem'].split('_')[0]}"
                                                  + ("" if r in plain else " (dynamic)"))
        lines += ["| why not static | problems (static with plain layouts, then dynamic) |", "| --- | --- |"]
        for why, who in sorted(whys.items(), key=lambda kv: -len(kv[1])):
            lines.append(f"| {why.replace('|', '/')} | {len(who)}: {', '.join(who[:12])}{' ...' if len(who) > 12 else ''} |")
        lines.append("")
    lines += ["## Every problem", "",
              "| level | problem | outcome | node 0 | best | eager | compile | node 0 / compile | best over eager "
              "| best over compile | s |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        n0c = ratio(r.get("compile"), r.get("node0")) if r.get("node0_status") == "ok" else None
        lines.append(f"| {r['level']} | {r['problem']} | {r['outcome']} | {fmt(r.get('node0'))} | {fmt(r.get('best'))} "
                     f"| {fmt(r.get('eager'))} | {fmt(r.get('compile'))} | {fmtx(n0c)} "
                     f"| {fmtx(ratio(r.get('eager'), r.get('best')))} | {fmtx(ratio(r.get('compile'), r.get('best')))} "
                     f"| {r.get('seconds', '')} |")
    with open(md_path, "w") as f:
        f.write("\n".join(lines) + "\n")


def load_rows(path):
    rows = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.strip():
                    r = json.loads(line)
                    rows[(r["level"], r["problem"])] = r
    return rows


def publish(paths):
    out = os.environ.get("OUT")
    if out and os.path.isdir(out):
        for p in paths:
            if os.path.exists(p):
                shutil.copy(p, os.path.join(out, "." + os.path.basename(p)))
                os.replace(os.path.join(out, "." + os.path.basename(p)), os.path.join(out, os.path.basename(p)))


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--report":
        report(list(load_rows(sys.argv[2]).values()), sys.argv[3], "bench/inductor_first_levels.py")
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kernelbench")
    ap.add_argument("--cli", default="build/kernelevolve")
    ap.add_argument("--out", default="inductor_first_levels.md")
    ap.add_argument("--levels", default="1,2")
    ap.add_argument("--devices", default="cuda:0")
    ap.add_argument("--max-evals", type=int, default=4)
    ap.add_argument("--limit", type=int, default=300, help="seconds per run")
    ap.add_argument("--deadline", type=int, default=0, help="start no run after this many seconds")
    ap.add_argument("--only", default="")
    ap.add_argument("--retry", action="store_true")
    ap.add_argument("--precision", choices=["", "as-run", "strict"], default="",
                    help="the runs' precision policy (issue 50); empty: the run's default (as-run for a module)")
    ap.add_argument("--every", type=int, default=1,
                    help="a fixed sample: every Nth file of each level, by problem number (4: 1, 5, 9, ...)")
    a = ap.parse_args()
    if not a.out.endswith(".md"):
        sys.exit("inductor_first_levels: --out names a .md file")
    cli = os.path.abspath(a.cli)
    if not os.access(cli, os.X_OK):
        sys.exit(f"inductor_first_levels: no kernelevolve at {cli} (build it, or give --cli)")
    devices = a.devices.split(",")
    if devices == ["cuda:all"]:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout
        devices = [f"cuda:{i}" for i in range(len(re.findall(r"^GPU \d+:", listing, re.M)))] or ["cuda:0"]
    jsonl = a.out[:-3] + ".jsonl"
    work = a.out[:-3] + ".work"
    rows = load_rows(jsonl)
    if a.retry:
        rows = {k: r for k, r in rows.items() if r["outcome"] not in RETRYABLE}
        with open(jsonl, "w") as f:
            for r in rows.values():
                f.write(json.dumps(r) + "\n")
    files = problem_files(a.kernelbench, [int(x) for x in a.levels.split(",")], a.only)
    if a.every > 1:
        files = [f for f in files if (int(re.match(r"\d*", f[1])[0] or 1) - 1) % a.every == 0]
    todo = [f for f in files if (f[0], f[1]) not in rows]
    print(f"inductor_first_levels: {len(files)} files, {len(files) - len(todo)} already in {jsonl}; "
          f"{len(todo)} to run on {', '.join(devices)}", file=sys.stderr)
    args_text = (f"python3 bench/inductor_first_levels.py KernelBench --levels {a.levels} --devices {a.devices} "
                 f"--max-evals {a.max_evals}" + (f" --precision {a.precision}" if a.precision else "")
                 + (f" --every {a.every}" if a.every > 1 else ""))
    jobs = queue.Queue()
    for f in todo:
        jobs.put(f)
    lock = threading.Lock()
    start = time.time()
    done = [len(files) - len(todo)]

    def lane(device):
        while True:
            if a.deadline and time.time() - start >= a.deadline:
                return
            try:
                level, name, path = jobs.get_nowait()
            except queue.Empty:
                return
            row = run_one(cli, level, name, path, device, a.max_evals, a.limit, work, a.precision)
            with lock:
                rows[(level, name)] = row
                with open(jsonl, "a") as f:
                    f.write(json.dumps(row) + "\n")
                done[0] += 1
                speed = ratio(row.get("compile"), row.get("best"))
                print(f"[{done[0]}/{len(files)}] {device} level{level}/{name}: {row['outcome']}"
                      f"{' ' + fmtx(speed) + ' over compile' if speed else ''}"
                      f"{' (' + row['reason'][:120] + ')' if row.get('reason') else ''} in {row['seconds']} s",
                      file=sys.stderr, flush=True)
                report(list(rows.values()), a.out, args_text)
                publish([jsonl, a.out])

    threads = [threading.Thread(target=lane, args=(d,)) for d in devices]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    report(list(rows.values()), a.out, args_text)
    publish([jsonl, a.out])
    left = jobs.qsize()
    print(f"inductor_first_levels: {len(rows)} rows in {jsonl}; table in {a.out}"
          f"{f'; {left} files left for the next call (deadline)' if left else ''}", file=sys.stderr)


if __name__ == "__main__":
    main()
