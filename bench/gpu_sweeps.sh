#!/bin/sh
# Recorded sweeps of the large GPU spaces (issue 19) into bench/sweeps/NAME_TAG.tsv, within one device
# call: each sweep resumes its file, and the whole stops starting points after KE_SWEEP_SECONDS (default
# 540, inside a 10-minute call). Run it again, with the same TAG, until every line says "complete".
#
#   bench/gpu_sweeps.sh [TAG]        TAG names the device in the file names (default: h200)
#   KE_CLI=build-gpu/kernelevolve KE_SWEEP_SECONDS=540 KE_SWEEP_COMMIT=$(git describe --always) bench/gpu_sweeps.sh h100
#
# KE_SWEEP_COMMIT names what measured in a new file's header where the checkout has no .git (a copy on the
# GPU machine); by default the sweep asks git, else gives the library's version.
#
# The spaces, largest first among each kind: the matrix products (matmul 864 points, matmul_rect, bmm,
# softmax_matmul 618 each), swiglu (612), conv2d (154), and the two largest memory-bound ones
# (gather_rows_max 432, jagged_segment_sum 288). `kernelevolve sweep SPEC --out FILE --count` says how
# many points a space has and a file holds, without a device.
set -eu
cd "$(dirname "$0")/.."
tag=${1:-h200}
cli=${KE_CLI:-build/kernelevolve}
budget=${KE_SWEEP_SECONDS:-540}
start=$(date +%s)
mkdir -p bench/sweeps
for spec in level1/matmul level1/matmul_rect level1/bmm level2/softmax_matmul level2/swiglu level1/conv2d \
            level3_recsys/gather_rows_max level3_recsys/jagged_segment_sum level1/row_sum; do
  name=$(basename "$spec")
  out="bench/sweeps/${name}_${tag}.tsv"
  rest=$((budget - ($(date +%s) - start)))
  if [ "$rest" -lt 30 ]; then
    echo "$name: not started, the time is spent: run again to go on"
    continue
  fi
  # Relative paths, so that the header names the spec as the repository does.
  "$cli" sweep "problems/$spec/cuda.json" --device cuda:0 --out "$out" --time-limit $((rest - 20)) \
    ${KE_SWEEP_COMMIT:+--commit "$KE_SWEEP_COMMIT"} || echo "$name: the sweep failed (above); the points written stay"
done
