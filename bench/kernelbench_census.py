#!/usr/bin/env python3
"""The JSON and table work of bench/kernelbench.sh, which stays a shell script for the processes it runs.

  kernelbench_census.py signature SPEC.json       one line: the compact signature, a tab, the first workload's bytes
  kernelbench_census.py baseline BASELINE.json    one line: bytes, eager us, compile us, status, eager's and compile's reasons (tabs)
  kernelbench_census.py report TSV MD DEVICE      the markdown table and its summary, from the raw results

Standard library only: it runs with whatever python3 is on PATH, torch or not.
"""
import collections
import json
import os
import re
import sys

COLUMNS = ["level", "problem", "import", "reason", "signature", "bytes", "peak_mb", "eager_us", "compile_us",
           "status", "eager_reason", "compile_reason", "seconds", "card"]

# A signature past this many buffers lists the first few inputs and every output, and counts the rest:
# level 3's networks carry hundreds of weights, which would drown the table.
SHOWN_INPUTS = 3


def one_line(text, limit=160):
    text = " ".join(str(text).split()).replace("|", "/")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def dims(shape):
    return "[" + ",".join(str(d) for d in shape) + "]"


def shape_value(dim, sizes):
    """A dimension under a workload: a literal, a size name, or an expression of them (the spec's grammar:
    + - * / % and parentheses, division truncating as C's)."""
    if isinstance(dim, int):
        return dim
    expr = re.sub(r"(?<!/)/(?!/)", "//", str(dim))
    if not re.fullmatch(r"[A-Za-z0-9_+\-*/%() ]+", expr):
        raise ValueError(dim)
    return int(eval(expr, {"__builtins__": {}}, dict(sizes)))  # names checked above: sizes and integers only


DTYPE_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i8": 1, "u8": 1, "i16": 2, "i32": 4, "u32": 4, "i64": 8,
               "u64": 8, "bool": 1}


def signature(path):
    spec = json.load(open(path))
    params = spec.get("params", [])
    buffers = [p for p in params if p.get("role") in ("in", "out", "inout")]
    ins = [p for p in buffers if p["role"] != "out"]
    outs = [p for p in buffers if p["role"] == "out"]
    scalars = [p for p in params if p.get("role") == "scalar"]
    sizes = [p["name"] for p in params if p.get("role") == "size"]
    shown = ins if len(ins) <= SHOWN_INPUTS + 1 else ins[:SHOWN_INPUTS]
    parts = [f"{p['name']} {p['dtype']}{dims(p.get('shape', []))}" for p in shown]
    if len(shown) < len(ins):
        parts.append(f"+{len(ins) - len(shown)} more in")
    text = ", ".join(parts) + " -> " + ", ".join(f"{p['name']} {p['dtype']}{dims(p.get('shape', []))}" for p in outs)
    if scalars:
        text += "; scalars " + " ".join(f"{p['name']}={p.get('value')}" for p in scalars)
    if sizes:
        text += "; sizes " + " ".join(sizes)
    workloads = spec.get("workloads") or [{}]
    try:
        total = 0
        for p in buffers:
            n = 1
            for d in p.get("shape", []):
                n *= shape_value(d, workloads[0])
            total += n * DTYPE_BYTES.get(p["dtype"], 4)
        nbytes = str(total)
    except Exception:  # an expression this reader does not know: the baseline's own figure fills it
        nbytes = "-"
    print(one_line(text, 400) + "\t" + nbytes)


def baseline(path):
    try:
        doc = json.load(open(path))
    except Exception:
        print("-\t-\t-\tno JSON\t\t")
        return
    nbytes = str(doc.get("problem_bytes", ["-"])[0])

    def first(name):
        b = doc.get(name) or {}
        times = b.get("time_us")
        if b.get("status") == "ok" and times:
            return f"{times[0]:.1f}", ""
        return "-", one_line(f"{b.get('status', '?')}: {b.get('reason') or ''}")

    eager, eager_why = first("eager")
    compiled, compile_why = first("compile")
    if eager == "-":
        status = "eager " + (doc.get("eager") or {}).get("status", "?")
    elif compiled == "-":
        status = "eager only"
    else:
        status = "ok"
    print("\t".join([nbytes, eager, compiled, status, eager_why, compile_why]))


def mib(text):
    try:
        v = int(text) / 2**20
        return f"{v:.1f}" if v >= 0.1 else f"{v:.2g}"
    except ValueError:
        return text


def reason_kind(reason):
    """A refusal's reason without what names one file (its path, a param, a number), so that the summary
    counts each kind of refusal once."""
    reason = re.sub(r"^\S+\.py: ", "", reason)
    reason = re.sub(r'"[^"]*"', '"X"', reason)
    return re.sub(r"\d+", "N", reason)


def report(tsv, md, device):
    rows = []
    with open(tsv) as f:
        for line in f:
            cells = line.rstrip("\n").split("\t")
            if not cells or cells[0] == "level":
                continue
            rows.append(dict(zip(COLUMNS, cells + [""] * (len(COLUMNS) - len(cells)))))
    rows.sort(key=lambda r: (r["level"], int(re.match(r"\d*", r["problem"]).group() or 0), r["problem"]))
    imported = [r for r in rows if r["import"] == "imported"]
    refusals = collections.Counter(reason_kind(r["reason"]) for r in rows if r["import"] != "imported")
    own_size = [r for r in imported if r["eager_us"] not in ("", "-")]
    compiled = [r for r in imported if r["compile_us"] not in ("", "-")]
    cards = collections.Counter(r["card"] or "?" for r in imported if r["eager_us"] not in ("", "-"))
    out = [f"# KernelBench census on {device}", ""]
    if cards:
        # Calls of the device tool may land on different cards: times compare only within one card.
        out.append("- cards the baselines ran on: " + ", ".join(f"{k} ({v} problems)" for k, v in cards.most_common()))
    out.append(f"- imported {len(imported)} of {len(rows)}")
    by_level = collections.defaultdict(lambda: [0, 0])
    for r in rows:
        by_level[r["level"]][1] += 1
        by_level[r["level"]][0] += r["import"] == "imported"
    out.append("- by level: " + ", ".join(f"level {k}: {v[0]} of {v[1]}" for k, v in sorted(by_level.items())))
    out.append(f"- run at their own size (eager measured under our protocol): {len(own_size)} of {len(imported)} imported")
    out.append(f"- torch.compile measured: {len(compiled)} of {len(imported)} imported")
    statuses = collections.Counter(r["status"] for r in imported)
    out.append("- status of the imported: " + ", ".join(f"{k} {v}" for k, v in statuses.most_common()))
    if refusals:
        out.append("- not imported, by reason:")
        for reason, n in refusals.most_common():
            out.append(f"  - {n} × {reason}")
    peaks = [(float(r["peak_mb"]), int(r["bytes"]), f"level {r['level']} {r['problem']}") for r in imported
             if re.fullmatch(r"[0-9.]+", r["peak_mb"] or "") and re.fullmatch(r"[0-9]+", r["bytes"] or "") and int(r["bytes"]) > 0]
    # Below a GiB the fixed part (the CUDA contexts of the worker and of PyTorch's process, cuBLAS's and
    # cuDNN's workspaces: about 2 GB) is most of the peak, so the ratio says little there.
    big = sorted((p * 2**20 / b, name) for p, b, name in peaks if b >= 2**30 and p > 0)
    if big:
        out.append(f"- peak device memory over the problem's bytes, problems of 1 GiB or more: median "
                   f"{big[len(big) // 2][0]:.2f}×, largest {big[-1][0]:.2f}× ({big[-1][1]}; {len(big)} problems); "
                   f"the module's own intermediates included")
    ratios = sorted(float(r["eager_us"]) / float(r["compile_us"]) for r in compiled
                    if re.fullmatch(r"[0-9.]+", r["eager_us"]) and re.fullmatch(r"[0-9.]+", r["compile_us"]))
    if ratios:
        faster = sum(x > 1 for x in ratios)
        out.append(f"- torch.compile over eager (eager time / compile time, same card and call): median "
                   f"{ratios[len(ratios) // 2]:.2f}×, faster on {faster} of {len(ratios)}")
    out += ["", "| level | problem | import | signature (or why not) | bytes (MiB) | peak (MiB) | eager µs | compile µs | status | card |",
            "| --: | --- | --- | --- | --: | --: | --: | --: | --- | --- |"]
    for r in rows:
        sig = r["signature"] if r["import"] == "imported" else re.sub(r"^\S+\.py:? ", "", r["reason"])
        sig = "`" + one_line(sig, 180).replace("`", "'") + "`" if sig else ""
        status = r["status"]
        if r["status"] not in ("ok", "refused") and (r["compile_reason"] or r["eager_reason"]):
            why = re.sub(r"^\S+\.py:? ", "", r["eager_reason"] or r["compile_reason"])  # the row names the file
            status += ": " + one_line(why, 160)
        out.append(f"| {r['level']} | {r['problem']} | {r['import']} | {sig} | {mib(r['bytes'])} | {r['peak_mb']} | "
                   f"{r['eager_us']} | {r['compile_us']} | {status} | {r['card']} |")
    with open(md + ".tmp", "w") as f:
        f.write("\n".join(out) + "\n")
    os.replace(md + ".tmp", md)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "signature":
        signature(sys.argv[2])
    elif len(sys.argv) >= 3 and sys.argv[1] == "baseline":
        baseline(sys.argv[2])
    elif len(sys.argv) >= 5 and sys.argv[1] == "report":
        report(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)
