#!/usr/bin/env bash
# Issue 15 ("trust under attack") on a lent GPU, in one call: the GPU hostile suite (a memoizing kernel
# that keeps answers in __device__ globals, an illegal address, a hang, a trap, the sandbox), `check` of
# every CUDA problem, a seed that poisons its context (the reference must still be judged, in a new
# worker), and the recommendation-model level's suite rows.
#
#   bench/runs/2026-11-issue15-trust-under-attack-gpu.sh              (KE_BUILD: default build-gpu, from scripts/bundle-gpu.sh; OUT: where to write)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${KE_BUILD:-$root/build-gpu}
out=${OUT:-/tmp/ke-trust-gpu}
mkdir -p "$out/check"
cd "$root"
nvidia-smi -L 2>/dev/null | head -2

echo "== GPU tests"
"$build/tests/test_cuda_device" 2>&1 | tail -3
"$build/tests/test_cuda_isolation" -s 2>&1 | grep -E "MESSAGE|honest .* us|ERROR|test cases|assertions|Status" | head -40

echo "== a seed that poisons its context: exit 1, the seed crashed, the reference judged ok"
"$build/kernelevolve" check tests/fixtures/ranges/illegal_seed_cuda.json --device cuda --json >"$out/illegal.json" 2>"$out/illegal.err"
echo "exit $? $(cat "$out/illegal.json")" | cut -c1-400

echo "== check of every CUDA problem"
pass=0 fail=0
for spec in problems/*/*/cuda.json; do
  name=$(echo "$spec" | cut -d/ -f2-3)
  timeout 120 "$build/kernelevolve" check "$spec" --device cuda --json >"$out/check/${name//\//_}.json" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "  FAIL $name (exit $rc): $(head -c 300 "$out/check/${name//\//_}.json")"; fi
done
echo "check: $pass passed, $fail failed"

echo "== the recommendation-model level, parameter search from each seed"
bench/suite.sh --device cuda --only level3_recsys --max-evals "${MAX_EVALS:-24}" --max-time "${MAX_TIME:-30}" \
  --cli "$build/kernelevolve" --out "$out" --name cuda_recsys --runs "$out/runs" --no-plot 2>&1 | tail -30
