#!/usr/bin/env bash
# Issue 18's hardware counters on a lent GPU, in one call: the GPU tests that read counters with Nsight
# Compute (the candidate's launch, not a same-named reference's), then a CUDA run with --counters whose new
# bests are profiled, `show` of the run and of its best node, and the counters in `export`.
#
#   bench/runs/2026-11-issue18-hardware-counters-gpu.sh    (KE_BUILD: default build-gpu, from scripts/bundle-gpu.sh; OUT: where to write)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${KE_BUILD:-$root/build-gpu}
out=${OUT:-/tmp/ke-counters-gpu}
spec=${SPEC:-problems/level1/row_sum/cuda.json}
mkdir -p "$out"
cd "$root"
export PATH=$PATH:/usr/local/cuda/bin
nvidia-smi -L 2>/dev/null | head -2
ncu --version 2>/dev/null | tail -1

echo "== GPU tests"
"$build/tests/test_cuda_isolation" -s 2>&1 | grep -E "MESSAGE|counters in|broken candidate|ERROR|FAILED|test cases|assertions|Status" | head -40

echo "== a run with --counters: $spec"
rm -f "$out/run.db"
/usr/bin/time -f "run: %e s wall" "$build/kernelevolve" run "$spec" --device cuda:0 --max-evals "${MAX_EVALS:-16}" \
  --counters --db "$out/run.db" >"$out/run.txt" 2>"$out/run.err"
echo "exit $?"
tail -12 "$out/run.txt"
grep -E "hardware counters|run:" "$out/run.err"
echo "== show"
"$build/kernelevolve" show "$out/run.db" >"$out/show.txt" 2>&1
grep -nE "counters|occupancy|best" "$out/show.txt" | head -20
best=$("$build/kernelevolve" export "$out/run.db" --format json 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
nodes = d["nodes"] if "nodes" in d else d["runs"][-1]["nodes"]
with_hw = [n for n in nodes if any(k.startswith("hw_") for k in (n.get("resources") or {}))]
print(len(with_hw), "nodes with counters:", ", ".join(str(n["id"]) for n in with_hw), file=sys.stderr)
print(with_hw[-1]["id"] if with_hw else "")')
if [ -n "$best" ]; then
  echo "== show --node $best"
  "$build/kernelevolve" show "$out/run.db" --node "$best" 2>&1 | grep -iE "diagnos|counters|t0|t1|regs" | head -12
fi
