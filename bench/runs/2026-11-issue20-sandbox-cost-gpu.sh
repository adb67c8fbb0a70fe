#!/usr/bin/env bash
# The sandbox's cost on a GPU worker (issue 20): start, start plus first evaluation, a cached candidate,
# with the sandbox off, basic and strict; then the GPU sandbox tests with a cold NVRTC cache.
#   bash bench/runs/2026-11-issue20-sandbox-cost-gpu.sh      (on the lent GPU, with build-gpu carried)
set -u
cd "$(dirname "$0")/../.."  # the repository root, where build-gpu is carried
B=./build-gpu
export LD_LIBRARY_PATH=$B:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export CUDA_CACHE_PATH=/tmp/ke-nvrtc-cache-$$
echo "== GPU tests, NVRTC's cache empty at the start ($CUDA_CACHE_PATH)"
for t in test_cuda_isolation test_cuda_device; do $B/tests/$t 2>&1 | tail -3; done
echo "== bench_isolation, GPU rows, 3 repetitions"
$B/bench/bench_isolation --benchmark_filter='BM_Gpu' --benchmark_repetitions=3 --benchmark_report_aggregates_only=true 2>&1 | grep -E "_median" 
