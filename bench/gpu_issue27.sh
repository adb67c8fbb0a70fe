#!/usr/bin/env bash
# Issue 27 on a lent GPU machine, in one call: the GPU tests of the PyTorch path and memory, the memory
# benchmark (peak device memory over the problem's bytes), and the KernelBench census (imports, then
# eager and torch.compile at each problem's own size) on every GPU of the machine. Carry build-gpu
# (scripts/bundle-gpu.sh) and a KernelBench checkout (kernelbench/, git-ignored). Writes under $OUT.
#
#   bench/gpu_issue27.sh [tests] [memory] [census] [--deadline SEC]
set -uo pipefail
export KE_PYTHON=${KE_PYTHON:-/opt/torch/.venv/bin/python3} PYTHONUNBUFFERED=1
out=${OUT:-/tmp/ke-issue27}; mkdir -p "$out"
deadline=420 steps=()
while [ $# -gt 0 ]; do case "$1" in --deadline) deadline=$2; shift 2 ;; *) steps+=("$1"); shift ;; esac; done
[ ${#steps[@]} -gt 0 ] || steps=(tests memory census)
nvidia-smi --query-gpu=index,name,memory.total,memory.used --format=csv | tee "$out/gpus.csv"
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | sed 's/^/cuda:/' | paste -sd,)
for step in "${steps[@]}"; do
  case $step in
    tests)
      for t in test_memory test_pytorch test_baseline; do
        s=$(date +%s); timeout 300 build-gpu/tests/$t >"/tmp/$t.log" 2>&1; rc=$?
        echo "$t rc=$rc $(( $(date +%s) - s ))s: $(grep -E '^\[doctest\] (test cases|assertions)' /tmp/$t.log | tr '\n' ' ')"
        [ $rc -eq 0 ] || grep -B2 -A12 -E 'ERROR|FATAL' "/tmp/$t.log" | head -60
      done 2>&1 | tee "$out/tests.txt" ;;
    memory)
      bench/memory_gpu.sh --cli build-gpu/kernelevolve --gb 8 --out /tmp/mem 2>&1 | tail -20 | tee "$out/memory.txt" ;;
    census)
      mkdir -p /tmp/census
      cp kernelbench/census/* /tmp/census/ 2>/dev/null
      bench/kernelbench.sh kernelbench --device "$gpus" --cli build-gpu/kernelevolve --jobs 12 \
        --out /tmp/census/kernelbench.md --limit 240 --deadline "$deadline" 2>&1 | tail -15 ;;
  esac
done
