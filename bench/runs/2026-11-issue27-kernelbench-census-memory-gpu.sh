#!/usr/bin/env bash
# Issue 27 on a lent GPU machine, in one call: the KernelBench census's imports, the GPU tests of the
# PyTorch path and of memory, the memory benchmark (peak device memory over the problem's bytes), then the
# census's baselines (eager and torch.compile at each problem's own size) until the call's budget is spent.
# Carry build-gpu (scripts/bundle-gpu.sh) and a KernelBench checkout's levels (kernelbench/, git-ignored).
#
#   bench/runs/2026-11-issue27-kernelbench-census-memory-gpu.sh [--budget SEC] [STEP...]     steps: imports tests memory baselines (default: all),
#                                                     and retry (the imports that failed, imported again)
set -uo pipefail
cd "$(dirname "$0")/../.."  # the repository root: every path below is relative to it
export KE_PYTHON=${KE_PYTHON:-/opt/torch/.venv/bin/python3} PYTHONUNBUFFERED=1
out=${OUT:-/tmp/ke-issue27}; mkdir -p "$out"
budget=540 steps=() start=$(date +%s)
while [ $# -gt 0 ]; do case "$1" in --budget) budget=$2; shift 2 ;; *) steps+=("$1"); shift ;; esac; done
[ ${#steps[@]} -gt 0 ] || steps=(imports tests memory baselines)
left() { echo $(( budget - ($(date +%s) - start) )); }
nvidia-smi --query-gpu=index,name,memory.total,memory.used --format=csv,noheader | tee "$out/gpus.csv"
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | sed 's/^/cuda:/' | paste -sd,)
mkdir -p /tmp/census; cp kernelbench/census/* /tmp/census/ 2>/dev/null
census() {  # deadline limit [more arguments]
  local deadline=$1 limit=$2; shift 2
  bench/kernelbench.sh kernelbench --device "$gpus" --cli build-gpu/kernelevolve --jobs 14 \
    --out /tmp/census/kernelbench.md --limit "$limit" --deadline "$deadline" "$@" 2>&1 | tail -12
}
for step in "${steps[@]}"; do
  echo "== $step ($(left) s left)"
  case $step in
    imports) census 1 240 ;;  # a deadline of 1 s: imports only (0 would be none)
    retry) census 1 240 --retry --only 'level3/' ;;
    tests)
      for t in "test_memory -tc=*GPU*" "test_pytorch -tc=*CUDA*" "test_baseline" "test_cuda_device" ; do
        set -- $t; s=$(date +%s); timeout 150 build-gpu/tests/$t >"/tmp/$1.log" 2>&1; rc=$?
        echo "$1 rc=$rc $(( $(date +%s) - s ))s: $(grep -E '^\[doctest\] (test cases|assertions)' /tmp/$1.log | tr '\n' ' ')"
        [ $rc -eq 0 ] || grep -B2 -A10 -E 'ERROR|FATAL' "/tmp/$1.log" | head -40
      done 2>&1 | tee "$out/tests.txt" ;;
    memory)
      timeout $(( $(left) - 60 )) bench/memory_gpu.sh --cli build-gpu/kernelevolve --gb 8 --out /tmp/mem relu toobig weight 2>&1 | tail -8 | tee "$out/memory.txt"
      cp /tmp/mem/memory_gpu.tsv "$out/" 2>/dev/null ;;
    baselines)
      l=$(( $(left) - 20 )); [ $l -gt 60 ] && census $(( l - 90 > 0 ? l - 90 : 1 )) 90 ;;
  esac
done
echo "== done ($(left) s left)"
