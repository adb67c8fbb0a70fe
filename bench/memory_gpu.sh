#!/usr/bin/env bash
# What a run holds on the GPU (docs/devices.md, "What a run holds on the device"; issue 27): `kernelevolve run` of
# PyTorch problems of several GB at their own size, with the default jobs, while nvidia-smi is polled; the
# peak device memory over the problem's bytes. Cases (made here, in a temporary directory):
#   relu    out = relu(x): no weights; x and out half each of --gb.
#   weight  out = x * w, w a parameter of x's shape: the bridge holds the module's weight too; thirds.
#   toobig  relu at 90% of the device's memory: must be refused before anything runs (exit 3, the numbers).
# Prints one table; writes memory_gpu.tsv and each run's log under $OUT (or --out DIR) when set.
#
#   bench/memory_gpu.sh [--cli PATH] [--gb 8] [--device cuda:0] [--max-evals 4] [--jobs N] [--timeout 400] [CASE...]
# Needs KE_PYTHON (or a python3 on PATH) that imports torch with CUDA.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cli=$root/build/kernelevolve gb=8 device=cuda:0 max_evals=4 jobs="" out=${OUT:-} limit=400
while [ $# -gt 0 ]; do
  case "$1" in
    --cli) cli=$2; shift 2 ;;
    --gb) gb=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    --max-evals) max_evals=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --timeout) limit=$2; shift 2 ;;
    *) break ;;
  esac
done
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(relu weight toobig)
index=${device#cuda}; index=${index#:}; index=${index:-0}
work=$(mktemp -d /tmp/ke-memory-gpu.XXXXXX)
trap 'rm -rf "$work"' EXIT
[ -n "$out" ] && mkdir -p "$out"
logs=${out:-$work}
total_mib=$(nvidia-smi -i "$index" --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
idle_mib=$(nvidia-smi -i "$index" --query-gpu=memory.used --format=csv,noheader,nounits | head -1)

# Writes a module of KIND (relu or weight), its seed and spec into $work/DIR, sized to hold about BYTES of
# tensors; prints the bytes it holds.
make_case() {
  local dir=$work/$1 name=$2 bytes=$3 tensors elements rows cols=65536
  mkdir -p "$dir"
  tensors=2; [ "$name" = weight ] && tensors=3
  elements=$(( bytes / (4 * tensors) ))
  rows=$(( (elements + cols - 1) / cols ))
  local forward='return torch.relu(x)' init='' entry=relu2d params body
  params='{"name": "x", "dtype": "f32", "shape": ["rows", "cols"], "role": "in"},'
  body='out[i] = x[i] < 0.f ? 0.f : x[i];'
  local kargs='const float* __restrict__ x, float* __restrict__ out'
  if [ "$name" = weight ]; then
    forward='return x * self.w'
    init='self.w = nn.Parameter(torch.randn(rows, cols))'
    entry=scale2d
    params+='{"name": "w", "dtype": "f32", "shape": ["rows", "cols"], "role": "in"},'
    body='out[i] = x[i] * w[i];'
    kargs='const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ out'
  fi
  cat >"$dir/model.py" <<EOF
import torch
import torch.nn as nn

rows = $rows
cols = $cols


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        ${init:-pass}

    def forward(self, x):
        $forward


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
EOF
  cat >"$dir/seed.cu" <<EOF
#ifndef THREADS
#define THREADS 256
#endif
extern "C" __global__ void $entry($kargs, long long rows, long long cols) {
  const long long i = (long long)blockIdx.x * THREADS + threadIdx.x;
  if (i < rows * cols) { $body }
}
EOF
  cat >"$dir/cuda.json" <<EOF
{"name": "memory_$name", "language": "cuda", "entry": "$entry",
 "params": [$params
            {"name": "out", "dtype": "f32", "shape": ["rows", "cols"], "role": "out"},
            {"name": "rows", "dtype": "i64", "role": "size"}, {"name": "cols", "dtype": "i64", "role": "size"}],
 "workloads": [{"rows": $rows, "cols": $cols}],
 "reference": {"pytorch": "model.py"}, "seed": {"file": "seed.cu"},
 "launch": {"grid": ["cdiv(rows * cols, THREADS)", 1, 1], "block": ["THREADS", 1, 1], "shared_bytes": "0"},
 "tunables": {"THREADS": [256, 128, 512, 1024]}}
EOF
  echo $(( rows * cols * 4 * (tensors) ))
}

# Runs CLI on SPEC, polling the device every 100 ms; prints "exit peak_mib apps_peak_mib".
measure() {
  local spec=$1 log=$2 poll=$work/poll.$$ apps=$work/apps.$$ pid code
  : >"$poll"; : >"$apps"
  local args=(run "$spec" --device "$device" --no-db --max-evals "$max_evals")
  [ -n "$jobs" ] && args+=(--jobs "$jobs")
  timeout "$limit" "$cli" "${args[@]}" >"$log.out" 2>"$log" &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    nvidia-smi -i "$index" --query-gpu=memory.used --format=csv,noheader,nounits >>"$poll" 2>/dev/null
    nvidia-smi -i "$index" --query-compute-apps=used_memory --format=csv,noheader,nounits 2>/dev/null |
      awk '{s += $1} END {print s + 0}' >>"$apps"
    sleep 0.1
  done
  wait "$pid"; code=$?
  echo "$code $(sort -n "$poll" | tail -1) $(sort -n "$apps" | tail -1)"
}

bytes_for() { awk -v g="$1" 'BEGIN {printf "%.0f", g * 1e9}'; }
printf 'case\ttensors_gb\tjobs\texit\tpeak_gb\tpeak_over_tensors\tprocesses_peak_gb\tnote\n' >"$work/table.tsv"
for c in "${cases[@]}"; do
  case "$c" in
    relu|weight) want=$(bytes_for "$gb"); kind=$c ;;
    toobig) want=$(( total_mib * 1048576 / 10 * 9 )); kind=relu ;;
    *) echo "memory_gpu: unknown case $c (relu, weight, toobig)" >&2; continue ;;
  esac
  tensors=$(make_case "$c" "$kind" "$want")
  read -r code peak_mib apps_mib < <(measure "$work/$c/cuda.json" "$logs/memory_gpu-$c.log")
  used=$(( ${peak_mib:-0} - idle_mib ))
  lowered=$(grep -o 'jobs lowered from [0-9]* to [0-9]*' "$logs/memory_gpu-$c.log" | head -1 | awk '{print $NF}')
  ran_jobs=${lowered:-${jobs:-3}}
  note=""
  [ "$c" = toobig ] && note=$(grep -o 'does not fit.*' "$logs/memory_gpu-$c.log" | head -1 | cut -c1-160)
  grep -q Traceback "$logs/memory_gpu-$c.log" && note="TRACEBACK in the log; $note"
  awk -v c="$c" -v t="$tensors" -v j="$ran_jobs" -v e="$code" -v u="$used" -v a="${apps_mib:-0}" -v n="$note" 'BEGIN {
    printf "%s\t%.2f\t%s\t%s\t%.2f\t%.2f\t%.2f\t%s\n", c, t / 1e9, j, e, u * 1048576 / 1e9,
      (t > 0 ? u * 1048576 / t : 0), a * 1048576 / 1e9, n }' >>"$work/table.tsv"
done
echo "device: $(nvidia-smi -i "$index" --query-gpu=name --format=csv,noheader | head -1), $total_mib MiB, idle $idle_mib MiB used before the runs"
column -t -s $'\t' "$work/table.tsv"
[ -n "$out" ] && cp "$work/table.tsv" "$out/memory_gpu.tsv"
exit 0
