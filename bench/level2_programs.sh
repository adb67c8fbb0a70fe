#!/usr/bin/env bash
# Issue 28, level 2: hand-written programs (cuBLASLt or cuDNN, then one fused kernel; bench/level2_programs/)
# against PyTorch eager and torch.compile on KernelBench problems, measured by `kernelevolve run` as a search
# measures its first kernel. For each problem, a run with the command mutator, whose only answer is the
# program's file (a fenced block), and --max-evals 1: the program is the run's first kernel, node 0, verified
# against the module and timed; the run measures eager and compile before it (its "baselines"). Only where
# the run gives no baselines (cut off, or they failed) is `kernelevolve baseline` asked for them.
# KernelBench is not ours: git clone https://github.com/ScalingIntelligence/KernelBench (kernelbench/, ignored).
#
#   bench/level2_programs.sh KB_DIR OUT_DIR [PROBLEM...]
#
# KB_DIR: the checkout's root or its KernelBench/ folder (holding level2/, level3/). PROBLEM: a program's name
# (l2_09, l3_01) or a level-2 number (9); default: all of bench/level2_programs/*.cu.
# Writes OUT_DIR/table.md (remade after every problem: the rows so far, the geometric mean over compile,
# and why each program that was not ok failed), OUT_DIR/rows.tsv (one row per problem, appended as made),
# and per problem: NAME.run.json, NAME.run.err, NAME.db, the requests the command got (NAME.req.K.json;
# a second one holds the first attempt's failure in full), NAME.baseline.json where asked.
# Resumable: a problem with a row in rows.tsv is skipped (FORCE=1 measures it again).
# Environment: CLI (default build-gpu/kernelevolve), KE_PYTHON (default /opt/torch/.venv/bin/python3, as
# bench/runs/2026-11-issue27-kernelbench-census-memory-gpu.sh), DEVICE (cuda), LIMIT (seconds per problem's run,
# default 300), BUDGET (seconds: start no problem after this many, default 0: no limit), BASELINE=always (ask
# `baseline` every time).
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
progs=$root/bench/level2_programs

# The command mutator's program: answers the first request with the program's file in a fenced block and
# keeps every request; a later request (the first attempt was not ok) is kept, then refused at once, so the
# run does not evaluate the same program twice more.
if [ "${1:-}" = "--answer" ]; then
  prog=$2 stem=$3
  k=1
  while [ -e "$stem.req.$k.json" ]; do k=$((k + 1)); done
  cat >"$stem.req.$k.json"
  if [ "$k" -gt 1 ]; then
    echo "level2_programs: one answer only; attempt 1 was not ok (see $stem.req.$k.json)" >&2
    exit 3
  fi
  printf '```cuda\n'
  cat "$prog"
  printf '\n```\n'
  exit 0
fi

[ $# -ge 2 ] || { sed -n '9,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
kb=$1 out=$2
shift 2
[ -d "$kb/level2" ] || { [ -d "$kb/KernelBench/level2" ] && kb=$kb/KernelBench; }
[ -d "$kb/level2" ] || { echo "level2_programs: no level2/ under $1" >&2; exit 2; }
kb=$(cd "$kb" && pwd)
mkdir -p "$out" && out=$(cd "$out" && pwd)
cli=${CLI:-$root/build-gpu/kernelevolve}
[ -x "$cli" ] || { echo "level2_programs: no kernelevolve at $cli (set CLI)" >&2; exit 2; }
export KE_PYTHON=${KE_PYTHON:-/opt/torch/.venv/bin/python3} PYTHONUNBUFFERED=1
py=$(command -v python3 || echo "$KE_PYTHON")  # json only
device=${DEVICE:-cuda} limit=${LIMIT:-300} budget=${BUDGET:-0}
start=$(date +%s)

names=()
if [ $# -eq 0 ]; then
  for f in "$progs"/*.cu; do names+=("$(basename "$f" .cu)"); done
else
  for p in "$@"; do
    case $p in
      l[0-9]_*) names+=("$p") ;;
      *) names+=("$(printf 'l2_%02d' "$((10#$p))")") ;;
    esac
  done
fi

rows=$out/rows.tsv
touch "$rows"

# The table, remade from rows.tsv: one row per problem, then the geometric means, then the failures.
render() {
  "$py" - "$rows" "$out/table.md" "$cli" <<'EOF'
import math, sys
rows_path, table_path, cli = sys.argv[1:4]
rows = [l.rstrip("\n").split("\t") for l in open(rows_path) if l.strip()]
def num(s):
    try:
        return [float(v) for v in s.split("/")] if s not in ("", "-") else []
    except ValueError:
        return []
def gm(v):
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else None
def fmt(v):
    return " / ".join(f"{x:,.1f}" for x in v) if v else "-"
out = ["# Level-2 programs (issue 28): cuBLASLt / cuDNN plus one fused kernel, against PyTorch", "",
       f"`{cli} run` per problem (--max-evals 1, the program as its first kernel); times are medians in µs per "
       "workload (KernelBench's own sizes), eager and compile as the run measured them. Speedup: the geometric "
       "mean over the problem's workloads of baseline time / program time.", "",
       "| problem | program | status | program µs | eager µs | compile µs | × eager | × compile |",
       "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
over_eager, over_compile, failures = [], [], []
for r in rows:
    r += [""] * (9 - len(r))
    name, problem, status, prog, eager, comp, message, device, seconds = r[:9]
    p, e, c = num(prog), num(eager), num(comp)
    se = gm([a / b for a, b in zip(e, p)]) if p and e and len(p) == len(e) else None
    sc = gm([a / b for a, b in zip(c, p)]) if p and c and len(p) == len(c) else None
    if status == "ok" and se: over_eager.append(se)
    if status == "ok" and sc: over_compile.append(sc)
    out.append(f"| {problem} | {name} | {status} | {fmt(p)} | {fmt(e)} | {fmt(c)} | "
               f"{f'{se:.2f}×' if se else '-'} | {f'{sc:.2f}×' if sc else '-'} |")
    if status != "ok" or message:
        failures.append(f"- **{name}** ({problem}), {status}: {message or '(no message)'}")
out.append("")
g_e, g_c = gm(over_eager), gm(over_compile)
out.append(f"Geometric mean over torch.compile: **{g_c:.3f}×** ({len(over_compile)} problems ok and measured)"
           if g_c else "Geometric mean over torch.compile: - (no problem ok and measured)")
out.append(f"Geometric mean over eager: {g_e:.3f}× ({len(over_eager)} problems)" if g_e else
           "Geometric mean over eager: -")
devices = sorted({r[7] for r in rows if len(r) > 7 and r[7]})
if devices: out.append("\nDevice: " + "; ".join(devices))
if failures:
    out += ["", "## Not ok, or with a note", ""] + failures
open(table_path, "w").write("\n".join(out) + "\n")
EOF
}

# One problem's row from its run's JSON (and the baseline's, where asked): name, problem, status, program
# times, eager times, compile times, message, device (tab-separated; times '/'-joined per workload).
row_of() {  # name problem run.json baseline.json(or '') req2.json(or '') run.err rc seconds
  "$py" - "$@" <<'EOF'
import json, sys
name, problem, run_path, base_path, req_path, err_path, rc, seconds = sys.argv[1:9]
def load(p):
    try:
        return json.load(open(p)) if p else None
    except Exception:
        return None
def clean(s):
    return " ".join(str(s).replace("\t", " ").replace("|", "\\|").split())[:600]
def times(v):
    return "/".join(f"{x:.3f}" for x in v) if v else "-"
run, base, req = load(run_path), load(base_path), load(req_path)
status, prog, message, device = "failed", [], "", ""
eager = comp = []
if run:
    device = run.get("device", "")
    seed = run.get("seed")
    if seed:
        status, prog, message = seed.get("status", "?"), seed.get("time_us") or [], seed.get("message", "")
        if status != "ok": prog = []
    else:
        status, message = "no kernel", run.get("stop_reason", "")
    for k, v in (run.get("baselines") or {}).items():
        if v.get("status") == "ok":
            if k == "eager": eager = v.get("time_us") or []
            if k == "compile": comp = v.get("time_us") or []
        else:
            message += f" [{k}: {v.get('status')}: {v.get('reason')}]"
else:
    status = "timeout" if rc in ("124", "137") else "failed"
    err = open(err_path, errors="replace").read() if err_path else ""
    lines = [l for l in err.splitlines() if l.strip()]
    message = f"run exit {rc}: " + (lines[-1] if lines else "no output")
if req:  # the failed first attempt, in full: its status, message, worst mismatch and the compiler's log
    for a in req.get("failed_attempts", [])[:1]:
        status = a.get("status", status)
        message = a.get("message", "") or message
        if a.get("worst_mismatch"): message += " worst mismatch: " + json.dumps(a["worst_mismatch"])
        if a.get("compile_log"): message += " log: " + a["compile_log"][-400:]
if base:
    device = device or base.get("device", "")
    for k in ("eager", "compile"):
        v = base.get(k) or {}
        if v.get("status") == "ok" and v.get("time_us"):
            if k == "eager": eager = v["time_us"]
            else: comp = v["time_us"]
print("\t".join([name, problem, status, times(prog), times(eager), times(comp), clean(message), clean(device),
                 seconds]))
EOF
}

echo "level2_programs: ${#names[@]} problem(s), CLI $cli, KE_PYTHON $KE_PYTHON, out $out"
for name in "${names[@]}"; do
  prog=$progs/$name.cu
  if [ ! -f "$prog" ]; then echo "== $name: no program $prog, skipped"; continue; fi
  if [ "${FORCE:-0}" != 1 ] && grep -q "^$name	" "$rows"; then echo "== $name: already in rows.tsv, skipped"; continue; fi
  level=${name%%_*}; level=${level#l}
  number=$((10#${name#*_}))
  file=$(ls "$kb/level$level/${number}"_*.py 2>/dev/null | head -1)
  if [ -z "$file" ]; then echo "== $name: no level$level/${number}_*.py under $kb, skipped"; continue; fi
  elapsed=$(( $(date +%s) - start ))
  if [ "$budget" -gt 0 ] && [ "$elapsed" -ge "$budget" ]; then
    echo "== $name: not started, the budget of $budget s is spent (run again to go on)"; continue
  fi
  problem="level$level/$(basename "$file" .py)"
  echo "== $name: $problem ($elapsed s in)"
  stem=$out/$name
  rm -f "$stem".db* "$stem".req.*.json "$stem".run.json "$stem".run.err "$stem".baseline.json
  t0=$(date +%s)
  cmd="bash $(printf '%q' "$root/bench/level2_programs.sh") --answer $(printf '%q' "$prog") $(printf '%q' "$stem")"
  timeout -k 10 "$limit" "$cli" run "$file" --device "$device" --language cuda --mutator command --command "$cmd" \
    --command-timeout 60 --max-evals 1 --jobs 1 --timeout "$limit" --db "$stem.db" --json \
    >"$stem.run.json" 2>"$stem.run.err"
  rc=$?
  echo "   run exit $rc in $(( $(date +%s) - t0 )) s"
  [ $rc -eq 0 ] || tail -3 "$stem.run.err" | sed 's/^/   /'
  base=""
  need_base=$("$py" -c 'import json,sys
try: b = json.load(open(sys.argv[1])).get("baselines") or {}
except Exception: b = {}
print(0 if all((b.get(k) or {}).get("status") == "ok" for k in ("eager", "compile")) else 1)' "$stem.run.json")
  if [ "${BASELINE:-}" = always ] || [ "$need_base" = 1 ]; then
    echo "   baselines: kernelevolve baseline"
    timeout -k 10 "$limit" "$cli" baseline "$file" --device "$device" --json --timeout "$limit" \
      >"$stem.baseline.json" 2>"$stem.baseline.err"
    echo "   baseline exit $?"
    base=$stem.baseline.json
  fi
  req2=""; [ -f "$stem.req.2.json" ] && req2=$stem.req.2.json
  line=$(row_of "$name" "$problem" "$stem.run.json" "$base" "$req2" "$stem.run.err" "$rc" "$(( $(date +%s) - t0 ))")
  if [ -n "$line" ]; then
    [ "${FORCE:-0}" = 1 ] && { grep -v "^$name	" "$rows" >"$rows.tmp"; mv "$rows.tmp" "$rows"; }
    printf '%s\n' "$line" >>"$rows"
    echo "   $(printf '%s' "$line" | cut -f3-6 | tr '\t' ' ')"
  fi
  render
done
render
echo "level2_programs: done in $(( $(date +%s) - start )) s; $out/table.md"
cat "$out/table.md"
