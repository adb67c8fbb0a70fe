#!/usr/bin/env bash
# Scaling over the GPUs of one host (issue 9): the same search, the same number of evaluations, first on
# one GPU and then on every GPU (`--device cuda:all`), and the candidates evaluated per second of each.
#
#   bench/multi_gpu.sh [problem ...]      problems as folders under problems/ (default: level1/row_sum
#                                         level2/elementwise_chain level1/matmul; the first two spaces
#                                         hold 288 points each, so at most 288 evaluations there)
#
# Environment: KE_BUILD (default build-gpu: see scripts/bundle-gpu.sh), KE_OUT (default $OUT, else
# /tmp/ke-multi-gpu) for the runs' JSON and logs, EVALS (evaluations per run, default 200), JOBS (workers
# per device, default 3, the CLI's default on a GPU), REPEATS (runs of each setting, default 1).
# Both settings use the same jobs per device, so a run on N GPUs has N times the workers: the question is
# whether the host keeps them all fed (compilation, verification and the search itself are host work).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KE_BUILD:-$root/build-gpu}
out=${KE_OUT:-${OUT:-/tmp/ke-multi-gpu}}
mkdir -p "$out"
problems=("$@")
[ ${#problems[@]} -gt 0 ] || problems=(level1/row_sum level2/elementwise_chain level1/matmul)
evals=${EVALS:-200}
jobs=${JOBS:-3}
repeats=${REPEATS:-1}

gpus=$("$build/kernelevolve" devices 2>/dev/null | grep -c '^cuda:')
echo "multi_gpu: $gpus CUDA devices; $evals evaluations a run, $jobs workers per device" >&2
[ "$gpus" -ge 2 ] || { echo "multi_gpu: needs two GPUs or more" >&2; exit 3; }

# Ceilings are measured once per device and cached: do it before any run is timed.
"$build/kernelevolve" run "$root/problems/${problems[0]}/cuda.json" --device cuda:all --max-evals 2 --no-db \
  >/dev/null 2>&1

printf 'problem\tdevices\trepeat\tevaluations\tseconds\tper_second\tbest_speedup\tper_device\n' >"$out/scaling.tsv"
for p in "${problems[@]}"; do
  name=$(basename "$p")
  for r in $(seq 1 "$repeats"); do
    for devices in cuda:0 cuda:all; do
      tag="$name.${devices/:/_}.$r"
      "$build/kernelevolve" run "$root/problems/$p/cuda.json" --device "$devices" --jobs "$jobs" --no-db \
        --max-evals "$evals" --json >"$out/$tag.json" 2>"$out/$tag.log"
      per_device=$(sed -n 's/^evaluations per device: //p' "$out/$tag.log" | tr ' ' '_')
      python3 - "$out/$tag.json" "$name" "$devices" "$r" "${per_device:-?}" >>"$out/scaling.tsv" <<'PY'
import json, sys
path, name, devices, r, per = sys.argv[1:]
try:
    d = json.load(open(path))
except Exception as e:
    print(f"{name}\t{devices}\t{r}\tfailed\t\t\t\t{e}")
    sys.exit(0)
n, s = d["evaluations"], d["elapsed_s"]
best = d.get("best", {}) or {}
print(f"{name}\t{devices}\t{r}\t{n}\t{s:.1f}\t{n / s:.2f}\t{best.get('speedup', 0):.2f}\t{per}")
PY
    done
  done
done

python3 - "$out/scaling.tsv" <<'PY' | tee "$out/scaling.md"
import csv, sys
from collections import defaultdict
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
rate = defaultdict(list)
for row in rows:
    try:
        rate[(row["problem"], row["devices"])].append(float(row["per_second"]))
    except ValueError:
        pass
print("| problem | evaluations/s on cuda:0 | on cuda:all | scaling |")
print("| --- | --: | --: | --: |")
for problem in dict.fromkeys(r["problem"] for r in rows):
    one = rate.get((problem, "cuda:0"), [])
    all_ = rate.get((problem, "cuda:all"), [])
    if one and all_:
        a, b = sum(one) / len(one), sum(all_) / len(all_)
        print(f"| {problem} | {a:.2f} | {b:.2f} | {b / a:.2f}x |")
print()
for row in rows:
    print("   ", "  ".join(f"{k}={v}" for k, v in row.items()))
PY
