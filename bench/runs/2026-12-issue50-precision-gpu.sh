#!/usr/bin/env bash
# Issue 50 on one GPU (and issue 49's GPU checks), everything under $OUT as it goes, so a call cut off at its limit
# still returns what it finished:
#   tests   the GPU tests this wave changed: the device core (red zones on the device, the hold before a timed
#           launch), GPU programs (red zones, TF32 library steps), the CUDA device, PyTorch problems on the
#           GPU (red zones in the reference's arena, the Python packages' GPU paths), Triton        -> $OUT/tests.log
#   conv    the three convolutions where as-run's baselines and node 0 went wrong (level 2's 1, level 1's 63 and
#           87), under as-run                                                                     -> $OUT/conv.{md,jsonl}
#   as-run  KernelBench levels 1 and 2, a fixed sample (every EVERY-th file), each run as a user runs it under the
#           default policy, as-run                                                                 -> $OUT/as-run.{md,jsonl}
#   strict  the same sample under --precision strict                                              -> $OUT/strict.{md,jsonl}
#
#   KB=kernelbench/KernelBench KE_BUILD=build-gpu EVERY=8 MAX_EVALS=2 DEADLINE=240 bench/runs/2026-12-issue50-precision-gpu.sh [STAGE...]
#
# KB: a KernelBench checkout (git clone https://github.com/ScalingIntelligence/KernelBench; never committed).
# Each table stage starts no run after DEADLINE seconds and resumes from its .jsonl when called again on the same
# machine (RESULTS, default build-issue50/, is an ignored folder that stays while the machine is warm).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${KE_BUILD:-$root/build-gpu}
kb=${KB:-$root/kernelbench/KernelBench}
every=${EVERY:-8}
evals=${MAX_EVALS:-2}
deadline=${DEADLINE:-240}
results=${RESULTS:-$root/build-issue50}
out=${OUT:-$results}
mkdir -p "$results" "$out"
[ $# -gt 0 ] || set -- tests as-run strict
export PYTHONUNBUFFERED=1
for stage in "$@"; do
  case $stage in
    tests)
      for t in test_gpu_core test_gpu_program test_cuda_device test_vendor_libraries test_program test_callable \
        test_pytorch test_triton; do
        [ -x "$build/tests/$t" ] || { echo "== $t: not built" >>"$out/tests.log"; continue; }
        echo "== $t" >>"$out/tests.log"
        (cd "$build" && timeout 300 "./tests/$t" 2>&1 | tail -n 40) >>"$out/tests.log"
      done
      grep -E "^== |test cases:|Status:" "$out/tests.log"
      ;;
    conv)
      python3 "$root/bench/inductor_first_levels.py" "$kb" --cli "$build/kernelevolve" --levels 1,2 \
        --only '^(level2/1_Conv2D|level1/63_|level1/87_)' --max-evals "$evals" --precision as-run --limit 240 \
        --out "$results/conv.md"
      cp "$results/conv.md" "$results/conv.jsonl" "$out"/ 2>/dev/null
      sed -n '/## Summary/,/^fast_p/p' "$results/conv.md"
      ;;
    as-run | strict)
      python3 "$root/bench/inductor_first_levels.py" "$kb" --cli "$build/kernelevolve" --levels 1,2 --every "$every" \
        --max-evals "$evals" --precision "$stage" --deadline "$deadline" --limit 240 --out "$results/$stage.md"
      cp "$results/$stage.md" "$results/$stage.jsonl" "$out"/ 2>/dev/null
      sed -n '/## Summary/,/^fast_p/p' "$results/$stage.md"
      ;;
    *) echo "2026-12-issue50-precision-gpu.sh: stages are tests, conv, as-run, strict" >&2; exit 2 ;;
  esac
done
