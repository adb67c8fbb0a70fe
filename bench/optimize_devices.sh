#!/usr/bin/env bash
# Issue 30's scale, for the lent two-GPU machine (first run there 2026-11-27, one and mpi:
# bench/results/optimize_l3_h200.md; on a CPU machine the runs share two cores and say nothing of the speedup): the
# regions of one model evolved on one GPU, then over
# both GPUs three ways, each from an empty folder with the same model, the same evaluations per region and the same
# search seed:
#   one        optimize --device cuda:0                                         regions one after another
#   devices    optimize --devices cuda:0,cuda:1                                 two regions at once, one per GPU
#   spread     optimize --evolve-device cuda:0,cuda:1                           each region's run over both GPUs
#              (kernelevolve run's multi-device evaluator), regions one after another
#   mpi        mpirun -np 2 optimize --mpi --devices cuda:0,cuda:1              each rank evolves the regions it
#              claims first, on its own GPU; rank 0 puts back and proves
# and prints, per way: step 4's wall time, its ratio to `one`'s, the regions evolved, the model's speedup over eager
# and over torch.compile (with their spread), and whether every region reached the same best time as `one` within
# 10% (the same result, sooner) - the whole output is also OUT/summary.tsv.
#
#   bench/optimize_devices.sh [MODEL.py] [-- extra optimize args]
#       MODEL: default a KernelBench level-3 model (kernelbench/KernelBench[/KernelBench]/level3/1_MLP.py) or
#       tests/fixtures/optimize/mlp.py where no checkout is present
#   KE_BUILD (default build-gpu), OUT (default /tmp/ke-optimize-devices), EVALS (per region, default 16), WAYS (which
#   of "one devices spread mpi" to run, default all: a way not run is "failed" in the summary), BUDGET
#   (optimize's --budget, default 2),
#   KE_PYTHON (a torch with CUDA; 2.x for torch.compile), MPIRUN (default: the bundle's KE_BUILD/mpirun where it carries
#   one, else mpirun from PATH). The GPU machine has no Open MPI, and build-gpu is built without it: for `mpi`, carry
#   build-gpu-mpi (scripts/bundle-mpi.sh: KE_WITH_MPI=ON, Open MPI 4.1 relocated beside it, its wrapper `mpirun`) and
#   run every way from it: KE_BUILD=$PWD/build-gpu-mpi bench/optimize_devices.sh MODEL.py
#   ONE (default cuda:0) and TWO (default cuda:0,cuda:1): the devices (ONE=cpu TWO=cpu,cpu checks the script on a
#   CPU; there `spread` is refused, since run's multi-device evaluator takes a device once)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KE_BUILD:-$root/build-gpu}
out=${OUT:-/tmp/ke-optimize-devices}
evals=${EVALS:-16}
mpirun=${MPIRUN:-mpirun}
[ -z "${MPIRUN:-}" ] && [ -x "$build/mpirun" ] && mpirun=$build/mpirun  # scripts/bundle-mpi.sh's wrapper
one=${ONE:-cuda:0}
two=${TWO:-cuda:0,cuda:1}
model=${1:-}
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
if [ -z "$model" ]; then
  for model in "$root"/kernelbench/KernelBench/KernelBench/level3/1_MLP.py "$root"/kernelbench/KernelBench/level3/1_MLP.py \
    "$root"/tests/fixtures/optimize/mlp.py; do
    [ -f "$model" ] && break
  done
fi
mkdir -p "$out"
nvidia-smi -L 2>/dev/null | head -4
common=(--device "$one" --max-evals "$evals" --budget "${BUDGET:-2}" --json "$@")

run_way() {  # name, then the command's words up to `optimize`'s own arguments
  local name=$1; shift
  rm -rf "${out:?}/$name"
  local start=$(date +%s.%N)
  "$@" "$model" --out "$out/$name" "${common[@]}" >"$out/$name.json" 2>"$out/$name.err"
  local rc=$?
  echo "$name: exit $rc, $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s in all" >&2
  [ $rc -eq 0 ] || tail -5 "$out/$name.err" >&2
}

ways=" ${WAYS:-one devices spread mpi} "
[[ $ways == *" one "* ]] && run_way one "$build/kernelevolve" optimize
[[ $ways == *" devices "* ]] && run_way devices "$build/kernelevolve" optimize --devices "$two"
[[ $ways == *" spread "* ]] && run_way spread "$build/kernelevolve" optimize --evolve-device "$two"
# --bind-to none: Open MPI binds each of two ranks to one core by default, and each rank's whole process tree (the
# optimizer, each region's run, its workers and compilers) with it, which the other ways are not.
[[ $ways == *" mpi "* ]] && run_way mpi "$mpirun" --allow-run-as-root --bind-to none -np 2 "$build/kernelevolve" optimize \
  --mpi --devices "$two"

python3 - "$out" "$ways" <<'EOF' | tee "$out/summary.tsv"
import glob, json, os, sys
out, ways = sys.argv[1], sys.argv[2].split()
reports = {}
for way in ("one", "devices", "spread", "mpi"):
    try:
        with open(os.path.join(out, way + ".json")) as f:
            reports[way] = json.load(f)
    except (OSError, ValueError):
        reports[way] = None
one = reports["one"]
base = one["steps_s"]["evolve"] if one else None
best_one = {r["hash"]: (r["evolve"] or {}).get("best_us") for r in one["regions"]} if one else {}
print("way\tevolve_s\tvs_one\tregions_evolved\tmodel_vs_eager\tspread\tcompile_of_optimized\tsame_result")
for way, r in reports.items():
    if r is None and way not in ways:
        print(f"{way}\tnot run (WAYS)")
        continue
    if r is None:
        # No report (the way failed, or was stopped in steps 5-6): step 4 as its regions' records tell it, from the
        # first run's start to the last one's end.
        records = []
        for path in glob.glob(os.path.join(out, way, "evolve_*.json")):
            with open(path) as f:
                records.append(json.load(f))
        done = [e for e in records if e.get("status") == "evolved"]
        if not done:
            print(f"{way}\tfailed (see {way}.err)")
            continue
        wall = max(e["finished_at"] for e in done) - min(e["started_at"] for e in done)
        ratio = f"{base / wall:.2f}x" if base else "-"
        print(f"{way}\t{wall:.1f} (its regions' records; no report: see {way}.err)\t{ratio}\t{len(done)}\t-\t-\t-\t-")
        continue
    evolve_s = r["steps_s"].get("evolve", 0.0)
    regions = sum(1 for g in r["regions"] if g["evolve"] and g["evolve"]["status"] in ("evolved", "resumed"))
    proof = r.get("put_back") or {}
    ab, abc = proof.get("ab_eager") or {}, proof.get("ab_compile") or {}
    same = all(g["evolve"] and best_one.get(g["hash"]) and g["evolve"].get("best_us")
               and g["evolve"]["best_us"] <= 1.1 * best_one[g["hash"]] for g in r["regions"] if g["kept"])
    ratio = f"{base / evolve_s:.2f}x" if base and evolve_s and regions else "-"  # nothing evolved: no speed to compare
    print(f"{way}\t{evolve_s:.1f}\t{ratio}\t{regions}\t{ab.get('speedup', '-')}\t{ab.get('spread', '-')}\t"
          f"{abc.get('speedup', abc.get('reason', '-'))}\t{'yes' if same else 'no'}")
EOF
