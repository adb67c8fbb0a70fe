#!/usr/bin/env bash
# The CUDA problem suite on a GPU: for each problem, the parameter search from its seed
# (`kernelevolve run <cuda.json> --device cuda --json --max-evals N`), PyTorch's operator on the same
# shapes, and a table: seed and best times, speedup, PyTorch's time, achieved GB/s or TFLOP/s and their
# share of the device's measured ceiling (copy bandwidth; FMA rate for the matrix product).
#
#   bench/gpu_suite.sh [problem ...]       problems as folders under problems/ (default: all five)
#
# Environment: KE_BUILD (default build-gpu: see scripts/bundle-gpu.sh), KE_OUT (default $OUT, else
# /tmp/ke-gpu-suite) for the runs' JSON, logs and databases, MAX_EVALS (default 24) and MAX_EVALS_<name>
# per problem (e.g. MAX_EVALS_matmul=40), MAX_TIME and MAX_TIME_<name> (the search's own time limit, seconds:
# it stops and reports), KE_TIME_LIMIT (a hard limit per run, default 600), KE_DB=0 not to keep
# each run's database in KE_OUT (for `kernelevolve show`), DEVICE (default cuda; e.g. cuda:all for every GPU).
# Targets (issue 4): memory-bound problems reach 80% of the measured copy bandwidth and beat PyTorch;
# the fp32 matrix product reaches 70% of cuBLAS fp32 (PyTorch with TF32 off).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KE_BUILD:-$root/build-gpu}
out=${KE_OUT:-${OUT:-/tmp/ke-gpu-suite}}
mkdir -p "$out"
problems=("$@")
[ ${#problems[@]} -gt 0 ] || problems=(level1/row_sum level1/softmax level1/layernorm level2/elementwise_chain level1/matmul)

specs=()
for p in "${problems[@]}"; do specs+=("$root/problems/$p/cuda.json"); done

# PyTorch first, alone on the GPU, so that nothing else runs while either is timed.
python3 "$root/bench/gpu_baselines.py" torch "${specs[@]}" --out "$out/torch.json" 2>"$out/torch.log" ||
  { echo "gpu_suite: PyTorch baselines failed:"; tail -5 "$out/torch.log"; }

runs=()
for p in "${problems[@]}"; do
  name=$(basename "$p")
  var="MAX_EVALS_$name"
  evals=${!var:-${MAX_EVALS:-24}}
  cp "$root/problems/$p/cuda.json" "$out/$name.spec.json"
  rm -f "$out/$name.db"*
  args=(--no-db)
  [ "${KE_DB:-1}" = 1 ] && args=(--db "$out/$name.db")
  var="MAX_TIME_$name"
  limit=${!var:-${MAX_TIME:-}}
  [ -n "$limit" ] && args+=(--max-time "$limit")
  start=$(date +%s)
  timeout "${KE_TIME_LIMIT:-600}" "$build/kernelevolve" run "$root/problems/$p/cuda.json" --device "${DEVICE:-cuda}" --json \
    --max-evals "$evals" "${args[@]}" >"$out/$name.json" 2>"$out/$name.log"
  rc=$?
  echo "gpu_suite: $name: $evals evaluations at most, exit $rc, $(( $(date +%s) - start )) s" >&2
  runs+=("$out/$name.json")
done

python3 "$root/bench/gpu_baselines.py" table --torch "$out/torch.json" "${runs[@]}" | tee "$out/table.txt"
