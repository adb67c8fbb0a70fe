#!/usr/bin/env bash
# Triton next to CUDA next to PyTorch eager, on one GPU (made for an H200). For each problem with a
# triton.json (problems/README.md, "Triton versions"): the parameter search from the Triton seed and, with
# the same budget, from the CUDA seed of the same problem (same params, workloads, inputs, tolerance and
# cost), and PyTorch's operator on the same shapes (bench/gpu_baselines.py torch, timed first and alone on
# the GPU, as bench/gpu_suite.sh does). Then one row per problem (gpu_baselines.py triton-table): Triton's
# seed and best times, CUDA's best, PyTorch eager's, the ratios Triton/CUDA and eager/Triton, and the
# Triton best's achieved GB/s or TFLOP/s; last, their geometric means and how many problems Triton's best
# wins against eager and against CUDA's best. Times are medians of single launches with the L2 flushed.
#
#   KE_PYTHON=/opt/torch/.venv/bin/python3 bench/runs/2026-11-triton-vs-cuda-vs-eager-gpu.sh [problem ...]
#
# Problems are folders under problems/ (level1/relu, or just relu); default: every one with a triton.json
# (21). KernelEvolve finds Triton through KE_PYTHON, which also runs gpu_baselines.py (default python3).
# Budget: 42 searches of at most 16 evaluations (0.3 to 1 s each, 8 in flight) and 20 s, each starting 8
# workers (about 2 s): an estimated 6 to 8 minutes on an H200 with the defaults; DEADLINE keeps it under 9.
#
# Environment: KE_BUILD (default build-gpu), KE_OUT (default $OUT, else /tmp/ke-triton-h200) for each
# run's JSON, log, exit status (PROBLEM.LANG.json/.log/.rc), torch.json and the table (triton_table.txt,
# triton_suite.md, triton_suite.tsv); MAX_EVALS (default 16) evaluations per search, the seed included;
# JOBS (default 8) worker processes per search; LANGS (default "triton cuda") the languages searched;
# MAX_TIME (default 20) the search's own limit in seconds (it stops and reports); KE_TIME_LIMIT (default
# 300) a hard limit per run; DEADLINE (default 480; 0: none) start no search after this many seconds (those
# left show as "not run" in the table); TORCH=0 not to time PyTorch (the table shows no eager column
# values); KE_DB=1 to keep each run's database in KE_OUT (for `kernelevolve show`; default none); DEVICE
# (default cuda).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${KE_BUILD:-$root/build-gpu}
out=${KE_OUT:-${OUT:-/tmp/ke-triton-h200}}
python=${KE_PYTHON:-python3}
evals=${MAX_EVALS:-16}
max_time=${MAX_TIME:-20}
deadline=${DEADLINE:-480}
read -r -a langs <<<"${LANGS:-triton cuda}"
for lang in "${langs[@]}"; do
  case "$lang" in triton|cuda) ;; *) echo "triton_h200: LANGS: unknown language '$lang' (triton, cuda)" >&2; exit 2 ;; esac
done
[ -x "$build/kernelevolve" ] || { echo "triton_h200: no kernelevolve at $build (set KE_BUILD)" >&2; exit 2; }
mkdir -p "$out"

# The problems: folders relative to problems/, each with a triton.json.
problems=()
if [ $# -eq 0 ]; then
  for f in "$root"/problems/level*/*/triton.json; do d=${f%/triton.json}; problems+=("${d#"$root"/problems/}"); done
fi
for p in "$@"; do
  p=${p%/}; p=${p#"$root"/problems/}; p=${p#problems/}
  if [ ! -d "$root/problems/$p" ]; then
    found=("$root"/problems/level*/"$p")
    [ -d "${found[0]}" ] && p=${found[0]#"$root"/problems/}
  fi
  if [ ! -f "$root/problems/$p/triton.json" ]; then
    echo "triton_h200: $p: no problems/$p/triton.json, left out" >&2
    continue
  fi
  problems+=("$p")
done
[ ${#problems[@]} -gt 0 ] || { echo "triton_h200: no problems" >&2; exit 2; }

started=$(date +%s)
# PyTorch first, alone on the GPU, so that nothing else runs while either is timed.
if [ "${TORCH:-1}" = 1 ]; then
  specs=()
  for p in "${problems[@]}"; do specs+=("$root/problems/$p/triton.json"); done
  "$python" "$root/bench/gpu_baselines.py" torch "${specs[@]}" --device "${DEVICE:-cuda}" --out "$out/torch.json" \
    2>"$out/torch.log"
  rc=$?
  echo "triton_h200: PyTorch eager: exit $rc, $(( $(date +%s) - started )) s" >&2
  if [ $rc -ne 0 ]; then
    echo "triton_h200: PyTorch baselines failed for some problems (see $out/torch.log):" >&2
    grep -i 'fail\|error' "$out/torch.log" | tail -5 >&2
  fi
else
  rm -f "$out/torch.json"
fi

# The searches, problem by problem (Triton then CUDA), so that a deadline leaves whole pairs.
triton_runs=() cuda_runs=()
for p in "${problems[@]}"; do
  name=$(basename "$p")
  for lang in "${langs[@]}"; do
    stem=$out/$name.$lang
    [ "$lang" = triton ] && triton_runs+=("$stem.json") || cuda_runs+=("$stem.json")
    rm -f "$stem.json" "$stem.log" "$stem.rc" "$stem.db"*
    cp "$root/problems/$p/$lang.json" "$stem.spec.json"
    if [ "$deadline" -gt 0 ] && [ $(( $(date +%s) - started )) -ge "$deadline" ]; then
      echo "not run: past DEADLINE=$deadline s" >"$stem.rc"
      : >"$stem.json"
      echo "triton_h200: $p $lang: not run (past DEADLINE=$deadline s)" >&2
      continue
    fi
    args=(run "$root/problems/$p/$lang.json" --device "${DEVICE:-cuda}" --json --max-evals "$evals"
          --jobs "${JOBS:-8}")
    [ "$max_time" != 0 ] && args+=(--max-time "$max_time")
    if [ "${KE_DB:-0}" = 1 ]; then args+=(--db "$stem.db"); else args+=(--no-db); fi
    start=$(date +%s)
    timeout "${KE_TIME_LIMIT:-300}" "$build/kernelevolve" "${args[@]}" >"$stem.json" 2>"$stem.log"
    rc=$?
    echo "$rc" >"$stem.rc"
    echo "triton_h200: $p $lang: exit $rc, $(( $(date +%s) - start )) s ($(( $(date +%s) - started )) s in all)" >&2
  done
done

commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
made_by="Made by \`MAX_EVALS=$evals JOBS=${JOBS:-8} MAX_TIME=$max_time LANGS=\"${langs[*]}\" bench/runs/2026-11-triton-vs-cuda-vs-eager-gpu.sh${*:+ $*}\`"
made_by+=" at $commit on $(date -u '+%Y-%m-%d %H:%M UTC'), $(( $(date +%s) - started )) s in all (PyTorch and the searches)."
table_args=(triton-table --out "$out/triton_suite" --made-by "$made_by")
[ "${TORCH:-1}" = 1 ] && table_args+=(--torch "$out/torch.json")
table_args+=(--triton ${triton_runs[@]+"${triton_runs[@]}"} --cuda ${cuda_runs[@]+"${cuda_runs[@]}"})
"$python" "$root/bench/gpu_baselines.py" "${table_args[@]}" | tee "$out/triton_table.txt"
echo "triton_h200: $(( $(date +%s) - started )) s in all; table: $out/triton_table.txt, $out/triton_suite.md, $out/triton_suite.tsv" >&2
