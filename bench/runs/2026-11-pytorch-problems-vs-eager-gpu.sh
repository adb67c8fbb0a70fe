#!/usr/bin/env bash
# The H200 table of docs/pytorch.md ("Baselines in every run"): each problems/pytorch problem's CUDA seed, a
# parameter search of at most 40 evaluations or 45 s, with PyTorch eager and torch.compile measured in the
# same run. Writes one JSON (and log) per problem under OUT (default bench/results/runs/pytorch_h200), named
# as bench/suite.sh names its runs, so `bench/suite.sh --device cuda --only '^pytorch/' --reuse --runs OUT`
# makes the table from them.
#
#   bench/runs/2026-11-pytorch-problems-vs-eager-gpu.sh [--cli PATH] [--out DIR] [--deadline SEC] [PROBLEM...]
# --deadline: start no problem after this many seconds (the device tool's calls are 10 minutes).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cli=$root/build/kernelevolve out=$root/bench/results/runs/pytorch_h200 deadline=0
while [ $# -gt 0 ]; do
  case "$1" in
    --cli) cli=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --deadline) deadline=$2; shift 2 ;;
    *) break ;;
  esac
done
problems=("$@")
[ ${#problems[@]} -gt 0 ] || for d in "$root"/problems/pytorch/*/; do problems+=("$(basename "$d")"); done
mkdir -p "$out"
start=$(date +%s)
for p in "${problems[@]}"; do
  if [ "$deadline" -gt 0 ] && [ $(( $(date +%s) - start )) -gt "$deadline" ]; then echo "pytorch_h200: deadline, stopped before $p" >&2; break; fi
  timeout 300 "$cli" run "$root/problems/pytorch/$p/cuda.json" --device cuda --no-db --max-evals 40 --max-time 45 --json \
    >"$out/pytorch-$p.json" 2>"$out/pytorch-$p.log"
  echo "pytorch_h200: $p exit $? after $(( $(date +%s) - start )) s" >&2
done
