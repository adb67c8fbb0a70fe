#!/bin/sh
# Issue 29 on a GPU machine with PyTorch 2.4 or later: the operator tests and measurements, each output in OUT.
#  1. the CPU operator tests (tests/python/test_torch_operator.py) under this PyTorch, where the operator goes
#     through torch.library.custom_op: opcheck, torch.compile(fullgraph=True), torch.export;
#  2. a CUDA run of problems/pytorch/dlrm_interaction (its seed and parameter search), then the GPU operator
#     tests (tests/python/test_torch_operator_gpu.py: opcheck, the current stream, a CUDA graph, a DLRM-style
#     model end to end under torch.compile, a Triton program) and the model's interleaved A/B (bench/operator/operator_ab.py), then
#     the same search from a better first kernel (bench/operator/dlrm_interaction_fast.cu) and its A/B;
#  3. the operator's overhead over the library's launch on y = 2x at 4 KB and 64 MB
#     (bench/operator/operator_overhead.py).
#   bench/operator_device.sh BUILD OUT       (KE_PYTHON: a Python with torch, default python3)
set -u
build=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
cd "$(dirname "$0")/.."
py=${KE_PYTHON:-python3}
export KE_PYTHON=$py
export PYTHONPATH=$build/python:$(pwd)/bench/operator
cli=$build/kernelevolve
step() { echo "== $* ($(date +%T))"; }

step "CPU runs and the CPU operator tests"
$cli run tests/fixtures/e2e/colsum.json --device cpu --db "$out/colsum.db" --max-evals 3 --seed 7 >"$out/colsum_run.txt" 2>&1
$cli run problems/pytorch/linear_relu/cpu.json --device cpu --db "$out/linear.db" --max-evals 3 --seed 7 \
  >"$out/linear_run.txt" 2>&1
$cli export "$out/linear.db" --format torch -o "$out/linear_op.py"
KE_TEST_LINEAR_DB=$out/linear.db KE_TEST_LINEAR_MODEL=$(pwd)/problems/pytorch/linear_relu/model.py \
  KE_TEST_COLSUM_DB=$out/colsum.db KE_TEST_EXPORTED=$out/linear_op.py \
  $py tests/python/test_torch_operator.py -v >"$out/cpu_operator_tests.txt" 2>&1
tail -n 3 "$out/cpu_operator_tests.txt"

step "the DLRM interaction on the GPU"
$cli run problems/pytorch/dlrm_interaction/cuda.json --device cuda --db "$out/dlrm.db" --max-evals 12 --seed 7 \
  >"$out/dlrm_run.txt" 2>&1
tail -n 8 "$out/dlrm_run.txt"
$cli run problems/level1/cumsum/triton.json --device cuda --db "$out/cumsum_triton.db" --max-evals 3 --seed 7 \
  >"$out/cumsum_triton_run.txt" 2>&1
KE_TEST_DLRM_DB=$out/dlrm.db KE_TEST_TRITON_DB=$out/cumsum_triton.db $py tests/python/test_torch_operator_gpu.py -v \
  >"$out/gpu_operator_tests.txt" 2>&1
tail -n 3 "$out/gpu_operator_tests.txt"
$py bench/operator/operator_ab.py "$out/dlrm.db" 20 20 >"$out/ab.md" 2>&1
cat "$out/ab.md"
# The same search from a better first kernel (bench/operator/dlrm_interaction_fast.cu, written by hand as a model
# would rewrite the seed), and its A/B.
$cli run problems/pytorch/dlrm_interaction/cuda.json --device cuda --db "$out/dlrm_fast.db" --max-evals 12 --seed 7 \
  --seed-kernel bench/operator/dlrm_interaction_fast.cu >"$out/dlrm_fast_run.txt" 2>&1
tail -n 8 "$out/dlrm_fast_run.txt"
$py bench/operator/operator_ab.py "$out/dlrm_fast.db" 20 20 >"$out/ab_fast.md" 2>&1
cat "$out/ab_fast.md"

step "the operator's overhead"
$cli run bench/operator/scale.py --device cuda --language cuda --seed-kernel bench/operator/scale.cu \
  --db "$out/scale.db" --max-evals 1 >"$out/scale_run.txt" 2>&1
tail -n 3 "$out/scale_run.txt"
$py bench/operator/operator_overhead.py "$out/scale.db" 15 >"$out/overhead.md" 2>&1
cat "$out/overhead.md"
step done
