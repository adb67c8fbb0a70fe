#!/usr/bin/env bash
# Issue 32's measurements on one GPU, in order, everything written under $OUT as it goes (a run cut off still
# leaves what it finished, and the summary of it):
#   a. the bf16 problems (triton_bf16.json) against cuBLAS (eager), eager and torch.compile, and attention's fp32
#      CUDA seed (problems/pytorch/README.md, "Measuring them on the GPU")                      -> $OUT/a/
#   b. each backward problem's cuda.json (--max-evals 24): the seed and the best against eager's and
#      torch.compile's backward                                                                   -> $OUT/b/
#   c. RMSNorm's forward run (forward_cuda.json), its backward run (b's database, or a run of its own), and
#      bench/training_gpu.py: a model trained with the two programs as one operator against eager -> $OUT/c/
#   d. $OUT/summary.md: a table of a-c (problem, seed, best, eager, compile, best over each), rebuilt after
#      every run (--stages d alone rebuilds it from what $OUT holds, e.g. the results of separate calls merged)
#
#   KE_BUILD=build-gpu OUT=DIR bench/runs/2026-11-issue32-bf16-backward-training-gpu.sh [--quick] [--stages a,b,c,d] [--device cuda|cpu]
#
# KE_BUILD: the build (default build-gpu: scripts/bundle-gpu.sh, with the ke_python target). OUT: where
# everything goes (required). PYTHON: a Python that imports torch (default python3). --quick: fewer evaluations
# (a 10, b 8, c 4) and shorter time limits. --stages: a subset, e.g. one a call where a call has a time limit;
# a stage skips each run whose JSON is already in $OUT, so calling it again on the same OUT resumes it, and c
# makes its own backward run when b's database is not there. --device cpu checks the script's logic on a
# machine without a GPU: b runs the cpu.json specs, c the CPU forward (the C seed of tests/fixtures) and
# backward, a is skipped (Triton needs the GPU).
#
# On the lent GPU (10 minutes a command), one stage a call, OUT kept on the machine between calls (an ignored
# folder that is not carried, so it stays while the machine is warm) and copied to the tool's $OUT after each:
#   OUT=$PWD/build-issue32 timeout 570 bench/runs/2026-11-issue32-bf16-backward-training-gpu.sh --quick --stages b; cp -r build-issue32/. "$OUT"/
# A stage cut off by the timeout resumes where it stopped when called again.
#
# Each run is `kernelevolve run SPEC --device D --db $OUT/db/NAME.db --max-evals N --max-time T --json`; its
# JSON is NAME.json, its progress NAME.log. A run whose tool fails keeps its log and the next run goes on; the
# script exits 1 if any run or the training check failed.
#
# What the baselines are for a backward problem (src/pytorch/ke_bridge/server.py, run_backward): eager is the module in
# the problem's dtype with its forward run untimed and `torch.autograd.grad` of the outputs timed (what
# loss.backward() runs for it; the sparse bag's includes coalescing its gradient), and torch.compile the same
# through the torch.compile'd module (AOTAutograd's compiled backward). Each is judged against float64 autograd
# as a kernel is.
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
quick=0
stages=a,b,c,d
device=cuda
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=1 ;;
    --stages) stages=$2; shift ;;
    --stages=*) stages=${1#--stages=} ;;
    --device) device=$2; shift ;;
    --device=*) device=${1#--device=} ;;
    -h | --help) sed -n '2,36p' "$0"; exit 0 ;;
    *) echo "issue32_gpu: unknown argument $1 (--quick, --stages a,b,c,d, --device cuda|cpu)" >&2; exit 2 ;;
  esac
  shift
done
case $device in cuda | cuda:* | cpu) ;; *) echo "issue32_gpu: --device cuda or cpu, not $device" >&2; exit 2 ;; esac
[ -n "${OUT:-}" ] || { echo "issue32_gpu: set OUT to the folder for the results" >&2; exit 2; }
build=${KE_BUILD:-build-gpu}
case $build in /*) ;; *) build=$root/$build ;; esac
ke=$build/kernelevolve
runs=0  # whether a stage that runs something was asked for (d alone rebuilds the table from $OUT)
case ",$stages," in *,a,* | *,b,* | *,c,*) runs=1 ;; esac
[ $runs = 0 ] || [ -x "$ke" ] || { echo "issue32_gpu: no $ke (KE_BUILD: the build folder)" >&2; exit 2; }
python=${PYTHON:-python3}
mkdir -p "$OUT/a" "$OUT/b" "$OUT/c" "$OUT/db"
OUT=$(cd "$OUT" && pwd)
export PYTHONPATH=$build/python${PYTHONPATH:+:$PYTHONPATH}
problems=$root/problems/pytorch
on_cpu=0
[ "$device" = cpu ] && on_cpu=1

if [ $quick = 1 ]; then
  evals_a=10 evals_b=8 evals_c=4 max_time=60
else
  evals_a=40 evals_b=24 evals_c=12 max_time=300
fi
# A run's hard limit: its search stops at max_time, then confirms its best; anything stuck beyond this is killed.
kill_after=$((max_time + 240))
failures=0

has_stage() { case ",$stages," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
log() { echo "[$(date -u +%H:%M:%S)] issue32_gpu: $*" | tee -a "$OUT/issue32_gpu.log" >&2; }
# Whether FILE holds one JSON object (a finished run's --json).
complete_json() { [ -s "$1" ] && "$python" -c 'import json, sys; json.load(open(sys.argv[1]))' "$1" 2>/dev/null; }

# ke_run STAGE NAME SPEC EVALS [more kernelevolve arguments]: one run, skipped if its JSON is there already.
ke_run() {
  local stage=$1 name=$2 spec=$3 evals=$4
  shift 4
  local json=$OUT/$stage/$name.json
  if complete_json "$json"; then
    log "$stage: $name: done already ($json)"
    return 0
  fi
  log "$stage: $name: kernelevolve run ${spec#"$root"/} --max-evals $evals"
  local rc=0
  timeout "$kill_after" "$ke" run "$spec" --device "$device" --db "$OUT/db/$name.db" --max-evals "$evals" \
    --max-time "$max_time" --json "$@" >"$json.part" 2>"$OUT/$stage/$name.log" || rc=$?
  if [ $rc = 0 ] && complete_json "$json.part"; then
    mv "$json.part" "$json"
    log "$stage: $name: done"
  else
    log "$stage: $name: FAILED (exit $rc; $OUT/$stage/$name.log)"
    failures=$((failures + 1))
  fi
  summarize
  return $rc
}

# d: the summary table from every run's JSON there is, and the training result.
summarize() {
  "$python" - "$OUT" "$device" >"$OUT/summary.md.part" 2>>"$OUT/issue32_gpu.log" <<'PY' && mv "$OUT/summary.md.part" "$OUT/summary.md"
import glob, json, os, sys

out, device = sys.argv[1], sys.argv[2]
sections = {"a": "bf16 problems (Triton) and attention's fp32 seed", "b": "backward problems",
            "c": "RMSNorm's forward and backward, for the training operator"}


def us(times):
    return " / ".join(f"{t:,.1f}" for t in times) if times else "-"


def ratio(x):
    return f"{x:.2f}x" if isinstance(x, (int, float)) else "-"


devices = set()
for path in glob.glob(os.path.join(out, "[abc]", "*.json")):
    try:
        devices.add(json.load(open(path)).get("device"))
    except (OSError, ValueError, AttributeError):
        pass
print("# Issue 32 on the GPU\n")
print(f"Device: {', '.join(sorted(d for d in devices if d)) or device}. Times in microseconds per workload (w0 / w1: the spec's GPU-filling and odd shapes); "
      "the best's ratios over eager and torch.compile are the run's own (geometric mean over the workloads). "
      "For a backward problem, eager and compile are the module's backward: its forward untimed, "
      "torch.autograd.grad timed, through the module or its torch.compile'd form.\n")
for stage, title in sections.items():
    rows = []
    for path in sorted(glob.glob(os.path.join(out, stage, "*.json"))):
        name = os.path.basename(path)[:-5]
        try:
            r = json.load(open(path))
        except (OSError, ValueError):
            continue
        if not isinstance(r, dict) or "spec" not in r:
            continue
        seed, best = r.get("seed") or {}, r.get("best") or {}
        base = r.get("baselines") or {}
        eager, comp = base.get("eager") or {}, base.get("compile") or {}

        def baseline(b):
            return us(b.get("time_us")) if b.get("status") == "ok" else f"- ({b.get('status', 'none')})"

        status = seed.get("status", "?")
        if seed.get("status") != "ok" and seed.get("message"):
            status += ": " + seed["message"].splitlines()[0][:80]
        rows.append(f"| {name} | {r['spec']} | {status} | {us(seed.get('time_us'))} | {us(best.get('time_us'))} "
                    f"| {ratio(best.get('speedup'))} | {baseline(eager)} | {baseline(comp)} "
                    f"| {ratio(best.get('speedup_vs_eager'))} | {ratio(best.get('speedup_vs_compile'))} "
                    f"| {r.get('evaluations', '-')} |")
    if not rows:
        continue
    print(f"## {stage}. {title}\n")
    print("| run | spec | seed | seed us | best us | best over seed | eager us | compile us | best over eager "
          "| best over compile | evals |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    print("\n".join(rows) + "\n")

training = os.path.join(out, "c", "training", "training.json")
if os.path.exists(training):
    t = json.load(open(training))
    print("## c. Training with the two programs in place\n")
    print(f"{t['norms_replaced']} RMSNorms of a {t['layers']}-block MLP replaced by one operator (forward "
          f"{os.path.basename(t['forward']['database'])} node {t['forward']['node']}, backward "
          f"{os.path.basename(t['backward']['database'])} node "
          f"{t['backward']['node']}), batch {t['shape']}, {t['steps']} SGD steps on {t['device']} (torch "
          f"{t['torch']}): loss {t['eager_loss'][0]:.6g} -> {t['eager_loss'][-1]:.6g} in eager, "
          f"{t['kernelevolve_loss'][0]:.6g} -> {t['kernelevolve_loss'][-1]:.6g} with the programs; worst step "
          f"difference {t['worst_loss_rel_diff']:.2g} (tolerance rtol {t['rtol']:g}, atol {t['atol']:g}), weights "
          f"{t['worst_weight_rel_diff']:.2g} apart after; forward calls {t['forward_calls']}, backward calls "
          f"{t['backward_calls']}, fallbacks {t['fallbacks']}; median step {t['eager_step_ms_median']:.2f} ms eager, "
          f"{t['kernelevolve_step_ms_median']:.2f} ms with the programs. **{'ok' if t['ok'] else 'FAILED'}**"
          + ("" if t["ok"] else ": " + "; ".join(t["problems"])) + ". Curves: c/training/training_loss.tsv"
          + (", c/training/training_loss.png." if t.get("picture") else "."))
PY
}

log "start: device $device, build $build, stages $stages, quick $quick, OUT $OUT"
if [ $runs = 1 ]; then
  [ $on_cpu = 1 ] || nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$OUT/gpu.txt" 2>&1 || true
  "$ke" devices >"$OUT/devices.txt" 2>&1 || true
fi

if has_stage a; then
  if [ $on_cpu = 1 ]; then
    log "a: skipped on the CPU (the bf16 problems are Triton, for a GPU)"
  else
    for p in matmul_ab linear_relu linear_gelu_scale linear_residual_layernorm attention; do
      ke_run a "$p.bf16" "$problems/$p/triton_bf16.json" "$evals_a"
    done
    ke_run a attention.fp32 "$problems/attention/cuda.json" "$evals_a"
  fi
fi

backward_problems=(rms_norm_backward layer_norm_backward softmax_cross_entropy_backward embedding_bag_backward
  dlrm_interaction_backward embedding_bag_sparse_backward)
spec_file=cuda.json
[ $on_cpu = 1 ] && spec_file=cpu.json
if has_stage b; then
  for p in "${backward_problems[@]}"; do
    ke_run b "$p" "$problems/$p/$spec_file" "$evals_b"
  done
fi

if has_stage c; then
  rms=$problems/rms_norm_backward
  if [ $on_cpu = 1 ]; then
    # The module's forward in C, at its default size (cpu.json's first workload), as tests/test_program_use.cmake.
    cp "$rms/model.py" "$OUT/c/rms_norm.py"
    ke_run c rms_norm_forward "$OUT/c/rms_norm.py" "$evals_c" --language c \
      --seed-kernel "$root/tests/fixtures/pytorch/rms_norm_forward_seed.c"
  else
    ke_run c rms_norm_forward "$rms/forward_cuda.json" "$evals_c"
  fi
  # b's backward run, or one of its own where b has not run (another call, or it failed): the same database.
  backward_db=$OUT/db/rms_norm_backward.db
  complete_json "$OUT/b/rms_norm_backward.json" || ke_run c rms_norm_backward "$rms/$spec_file" "$evals_c"
  if [ -f "$OUT/db/rms_norm_forward.db" ] && [ -f "$backward_db" ]; then
    log "c: training: bench/training_gpu.py"
    rc=0
    timeout 900 "$python" "$root/bench/training_gpu.py" --forward-db "$OUT/db/rms_norm_forward.db" \
      --backward-db "$backward_db" --model "$rms/model.py" --out "$OUT/c/training" \
      >"$OUT/c/training.json.log" 2>&1 || rc=$?
    tail -n 3 "$OUT/c/training.json.log" | tee -a "$OUT/issue32_gpu.log" >&2
    if [ $rc != 0 ]; then
      log "c: training: FAILED (exit $rc; $OUT/c/training.json.log)"
      failures=$((failures + 1))
    fi
  else
    log "c: training: skipped (no forward or backward database)"
    failures=$((failures + 1))
  fi
fi

summarize
log "done: $failures failures; the table is $OUT/summary.md"
[ $failures = 0 ]
