#!/bin/sh
# Issue 31 on a GPU with PyTorch 2.x: for each PyTorch problem, capture what torch.compile generates (sizes
# dynamic), translate it into a program (src/pytorch/ke_inductor), and run the search from it: node 0 is
# the translated program, verified and timed by the protocol, then the parameter search. Prints each run's
# summary (node 0's status, the best, eager and torch.compile) into OUT/NAME/run.txt and a table at the end.
#   bench/inductor_first_program.sh BUILD OUT [NAME...]     (KE_PYTHON: a Python with torch 2.x; MAX_EVALS, default 8)
set -u
build=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
shift 2
cd "$(dirname "$0")/.."
py=${KE_PYTHON:-python3}
export KE_PYTHON=$py
names=${*:-relu_nchw gelu_tanh softmax_last_dim mean_middle_dim layer_norm_affine linear_relu linear_gelu_scale linear_residual_layernorm matmul_ab conv3x3_bias_relu}
for name in $names; do
  dir=$out/$name
  mkdir -p "$dir"
  echo "== $name ($(date +%T))"
  $py scripts/capture-inductor.py "$dir" "problems/pytorch/$name/model.py" >"$dir/capture.txt" 2>&1
  $build/kernelevolve import "problems/pytorch/$name/model.py" -o "$dir/spec" --device cuda --language triton \
    >"$dir/import.txt" 2>&1 || { echo "$name: import failed"; continue; }
  $py bench/inductor_first_program.py "$dir"/spec/*.json "$dir/$name.dynamic.py" "$dir/first.json" \
    || { echo "$name: not translated"; continue; }
  $build/kernelevolve run "$dir/first.json" --device cuda --db "$dir/run.db" --max-evals "${MAX_EVALS:-8}" --seed 7 \
    >"$dir/run.txt" 2>&1
  grep -E "^  (statuses|best|PyTorch eager|torch.compile|confirmed)|node 0|^kernelevolve:" "$dir/run.txt" | head -8
done
