#!/usr/bin/env bash
# The KernelBench census (issue 27, docs/kernelbench.md): every problem file of a KernelBench
# checkout imported (or refused, and why), its derived signature and bytes, and PyTorch eager's and
# torch.compile's times under our protocol (`kernelevolve baseline --json`), with the run's peak device
# memory on a GPU. KernelBench is not part of this repository: git clone https://github.com/ScalingIntelligence/KernelBench
#
#   bench/kernelbench.sh DIR [--device cpu|cuda[:N]|cuda:0,cuda:1|cuda:all] [--levels 1,2,3] [--out FILE.md]
#       [--jobs N] [--only REGEX] [--cli PATH] [--limit SEC] [--deadline SEC] [--sandbox strict|basic|off] [--retry]
#
# DIR: the checkout's root or its KernelBench/ folder. --only: files whose "levelL/NAME.py" matches (grep -E).
# --jobs: imports at once (default 4). Baselines run one at a time on their device, so that its peak memory
# and the times are one problem's; a list of GPUs shares the files out, one at a time on each.
# --limit: seconds per import and per baseline (default 300), so one problem cannot eat the budget.
# --deadline: start no baseline after this many seconds (the device tool's calls are 10 minutes).
# Writes FILE.md (default kernelbench_census.md), the raw FILE.tsv beside it, the import results
# FILE.imports.tsv, and each problem's outputs under FILE.work/. Resumable: a file with a row in FILE.tsv
# is not measured again, nor one in FILE.imports.tsv imported again; --retry measures again the rows that
# ended otherwise than measured or refused (a timeout, a crash, a missing binary), and imports again the
# imports that failed. Every row is written as it is made, and the three files are copied to $OUT too
# when it is set (the lent GPU's output folder).
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
helper=$root/bench/kernelbench_census.py
python=${KE_CENSUS_PYTHON:-python3}  # json only: any python3 will do

usage() {
  sed -n '7,8p' "$0" | sed 's/^# \{0,1\}//' >&2
  [ $# -gt 0 ] && echo "kernelbench.sh: $*" >&2
  exit 2
}

# One import, run by xargs in parallel: a row of FILE.imports.tsv (level, name, exit code,
# imported|refused|failed, reason, signature, bytes), its outputs under WORK/levelL/NAME/.
if [ "${1:-}" = "--import-one" ]; then
  level=${2%%$'\t'*} file=${2#*$'\t'}
  name=$(basename "$file" .py)
  d=$KB_WORK/level$level/$name
  rm -rf "$d" && mkdir -p "$d"
  start=$(date +%s)
  timeout -k 10 "$KB_LIMIT" "$KB_CLI" import "$file" -o "$d/spec" --device "$KB_IMPORT_DEVICE" >"$d/import.out" 2>"$d/import.err"
  rc=$?
  sig="" bytes="-" reason=""
  why=$(grep -v '^\s*$' "$d/import.err" | head -1 | sed 's/^kernelevolve: //' | tr '\t' ' ')
  case $rc in
    0) what=imported
       IFS=$'\x1f' read -r sig bytes < <("$python" "$helper" signature "$(ls "$d"/spec/*.json | head -1)" | tr '\t' '\037') ;;
    2) what=refused reason=$why ;;
    124|137) what=failed reason="import took more than $KB_LIMIT s" ;;
    *) what=failed reason="exit $rc: $why" ;;
  esac
  # Appended as soon as known (one locked write each), so that a call cut off keeps the imports it made.
  {
    flock 9
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$level" "$name" "$rc" "$what" "$reason" "$sig" "$bytes" >>"$KB_IMPORTS"
    if [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then cp "$KB_IMPORTS" "$OUT/.imports.tmp" && mv "$OUT/.imports.tmp" "$OUT/$(basename "$KB_IMPORTS")"; fi
  } 9>"$KB_IMPORTS.lock"
  echo "census: import level$level/$name: $what${reason:+ ($reason)} in $(( $(date +%s) - start )) s" >&2
  exit 0
fi

dir="" device=cpu levels=1,2,3 out=$PWD/kernelbench_census.md jobs=4 only="" cli=$root/build/kernelevolve limit=300 deadline=0 sandbox=strict retry=0
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device=${2:-}; shift 2 || usage "--device needs a value" ;;
    --levels) levels=${2:-}; shift 2 || usage "--levels needs a value" ;;
    --out) out=${2:-}; shift 2 || usage "--out needs a value" ;;
    --jobs) jobs=${2:-}; shift 2 || usage "--jobs needs a value" ;;
    --only) only=${2:-}; shift 2 || usage "--only needs a value" ;;
    --cli) cli=${2:-}; shift 2 || usage "--cli needs a value" ;;
    --limit) limit=${2:-}; shift 2 || usage "--limit needs a value" ;;
    --deadline) deadline=${2:-}; shift 2 || usage "--deadline needs a value" ;;
    --sandbox) sandbox=${2:-}; shift 2 || usage "--sandbox needs a value" ;;
    --retry) retry=1; shift ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) usage "unknown option $1" ;;
    *) [ -z "$dir" ] || usage "one DIR only"; dir=$1; shift ;;
  esac
done
[ -n "$dir" ] || usage "give the KernelBench checkout (git clone https://github.com/ScalingIntelligence/KernelBench)"
if [ -d "$dir/KernelBench" ]; then kb=$dir/KernelBench; else kb=$dir; fi
ls -d "$kb"/level[0-9]* >/dev/null 2>&1 || usage "$dir has no level1/, level2/ ... folders (nor KernelBench/ with them)"
[ -x "$cli" ] || usage "no kernelevolve at $cli (build it, or give --cli PATH)"
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || usage "--jobs is a positive integer, not '$jobs'"
[[ "$limit" =~ ^[1-9][0-9]*$ ]] || usage "--limit is seconds, not '$limit'"
[[ "$deadline" =~ ^[0-9]+$ ]] || usage "--deadline is seconds, not '$deadline'"
smi=$(command -v nvidia-smi || true)
if [ "$device" = cuda:all ]; then
  [ -n "$smi" ] || usage "cuda:all counts the GPUs with nvidia-smi, and there is none"
  device=$(nvidia-smi -L | awk '/^GPU [0-9]+:/ { sub(":", "", $2); printf "%scuda:%s", sep, $2; sep = "," }')
fi
IFS=',' read -r -a devices <<<"$device"
for dev in "${devices[@]}"; do
  case "$dev" in
    cpu) [ ${#devices[@]} -eq 1 ] || usage "cpu is one device: not in a list" ;;
    cuda|cuda:[0-9]|cuda:[0-9][0-9]) ;;
    *) usage "--device is cpu, cuda[:N], a list cuda:0,cuda:1 or cuda:all, not '$dev'" ;;
  esac
done
if [ "${devices[0]}" = cpu ]; then import_device=cpu; else import_device=cuda; fi
# nvidia-smi numbers GPUs by PCI bus; CUDA, unless told, fastest first: make cuda:N the GPU whose memory is read.
export CUDA_DEVICE_ORDER=${CUDA_DEVICE_ORDER:-PCI_BUS_ID}
if [ "$import_device" = cuda ] && [ -z "$smi" ]; then
  echo "census: no nvidia-smi: the peak device memory is not measured" >&2
fi
case "$out" in *.md) ;; *) usage "--out names a .md file, not '$out'" ;; esac
mkdir -p "$(dirname "$out")"
base=${out%.md} tsv=${out%.md}.tsv imports=${out%.md}.imports.tsv work=${out%.md}.work
mkdir -p "$work"
export KB_WORK=$work KB_LIMIT=$limit KB_CLI=$cli KB_IMPORT_DEVICE=$import_device KB_IMPORTS=$imports
start=$(date +%s)

header=$'level\tproblem\timport\treason\tsignature\tbytes\tpeak_mb\teager_us\tcompile_us\tstatus\teager_reason\tcompile_reason\tseconds\tcard'
[ -s "$tsv" ] || echo "$header" >"$tsv"
[ -s "$imports" ] || printf 'level\tproblem\trc\timport\treason\tsignature\tbytes\n' >"$imports"

if [ "$retry" = 1 ]; then
  # Only what a later call could change is measured again: a measured or refused row stands.
  awk -F'\t' 'NR == 1 || $10 == "ok" || $10 == "eager only" || $3 == "refused"' "$tsv" >"$tsv.tmp" && mv "$tsv.tmp" "$tsv"
  awk -F'\t' 'NR == 1 || $4 != "failed"' "$imports" >"$imports.tmp" && mv "$imports.tmp" "$imports"
fi

# Every problem file of the levels asked for, in KernelBench's order (by number).
files=()
IFS=',' read -r -a level_list <<<"$levels"
for level in "${level_list[@]}"; do
  [ -d "$kb/level$level" ] || { echo "census: no $kb/level$level, skipped" >&2; continue; }
  while IFS= read -r f; do
    [ -n "$only" ] && ! grep -Eq -- "$only" <<<"level$level/$(basename "$f")" && continue
    files+=("$level"$'\t'"$f")
  done < <(ls "$kb/level$level"/*.py 2>/dev/null | sort -V)
done
[ ${#files[@]} -gt 0 ] || usage "no problem file in $kb for levels $levels${only:+ matching $only}"

has_row() { awk -F'\t' -v l="$1" -v n="$2" '$1 == l && $2 == n { found = 1 } END { exit !found }' "$3"; }

todo=()
for entry in "${files[@]}"; do
  level=${entry%%$'\t'*} f=${entry#*$'\t'}
  has_row "$level" "$(basename "$f" .py)" "$tsv" || todo+=("$entry")
done
echo "census: ${#files[@]} files; $(( ${#files[@]} - ${#todo[@]} )) of ${#files[@]} files already in $tsv" >&2

publish() {
  "$python" "$helper" report "$tsv" "$out" "$device" || echo "census: the report failed (the TSV is intact)" >&2
  if [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then
    for f in "$tsv" "$out" "$imports"; do cp "$f" "$OUT/.$(basename "$f").tmp" && mv "$OUT/.$(basename "$f").tmp" "$OUT/$(basename "$f")"; done
  fi
}

# Imports first, in parallel: the derivation is host work (and, until import derives on the meta device,
# a few calls of the module). Those already in FILE.imports.tsv are not imported again.
pending=()
for entry in "${todo[@]}"; do
  level=${entry%%$'\t'*} f=${entry#*$'\t'}
  has_row "$level" "$(basename "$f" .py)" "$imports" || pending+=("$entry")
done
if [ ${#pending[@]} -gt 0 ]; then
  echo "census: importing ${#pending[@]} files, $jobs at a time" >&2
  printf '%s\0' "${pending[@]}" | xargs -0 -n 1 -P "$jobs" bash "$0" --import-one
  publish
fi

import_row() { awk -F'\t' -v l="$1" -v n="$2" '$1 == l && $2 == n { row = $0 } END { print row }' "$imports"; }

# One problem's baselines on one device, alone there; its row appended to the TSV.
measure() {
  local level=$1 f=$2 dev=$3 gpu=$4 lane=$5
  local name rc what reason sig bytes t0 peak eager compiled status eager_why compile_why d poller idle brc why b card
  name=$(basename "$f" .py)
  # Split at \x1f, not at tabs: IFS's whitespace would merge an empty field (no reason) with the next.
  IFS=$'\x1f' read -r _ _ rc what reason sig bytes < <(import_row "$level" "$name" | tr '\t' '\037')
  if [ -z "${what:-}" ]; then
    echo "census: level$level/$name has no import result; left for the next call" >&2
    return
  fi
  t0=$(date +%s)
  peak="-" eager="-" compiled="-" status="" eager_why="" compile_why=""
  # The card's name: a census made over several calls of the device tool may mix H100 and H200 rows.
  card=$(nvidia-smi --query-gpu=name --format=csv,noheader -i "${gpu:-0}" 2>/dev/null | head -1)
  [ -n "$gpu" ] && [ -n "$card" ] || card=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
  if [ "$what" != imported ]; then
    status=$what
  else
    d=$work/level$level/$name
    mkdir -p "$d"
    poller=""
    if [ -n "$gpu" ]; then
      idle=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i "$gpu" | head -1)
      nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i "$gpu" -lms 200 >"$d/memory.log" 2>/dev/null &
      poller=$!
    fi
    timeout -k 10 "$limit" "$cli" baseline "$f" --device "$dev" --json --timeout "$limit" --sandbox "$sandbox" \
      >"$d/baseline.json" 2>"$d/baseline.err"
    brc=$?
    if [ -n "$poller" ]; then
      kill "$poller" 2>/dev/null
      wait "$poller" 2>/dev/null
      peak=$(awk -v idle="$idle" '$1 + 0 > max { max = $1 + 0 } END { printf "%d", (max > idle ? max - idle : 0) }' "$d/memory.log")
    fi
    # The error main() printed, not a note (the sandbox off) nor a worker's line.
    why=$(grep '^kernelevolve: ' "$d/baseline.err" | grep -v 'sandbox is off' | tail -1 | sed 's/^kernelevolve: //' | tr '\t' ' ' | cut -c1-300)
    [ -n "$why" ] || why=$(grep -v '^\s*$' "$d/baseline.err" | tail -1 | tr '\t' ' ' | cut -c1-300)
    if [ $brc -eq 0 ] || { [ $brc -eq 1 ] && [ -s "$d/baseline.json" ]; }; then
      IFS=$'\x1f' read -r b eager compiled status eager_why compile_why < <("$python" "$helper" baseline "$d/baseline.json" | tr '\t' '\037')
      [ "$b" != "-" ] && bytes=$b
    elif [ $brc -eq 124 ] || [ $brc -eq 137 ]; then
      status="timeout" eager_why="the baselines took more than $limit s"
    else
      status="exit $brc" eager_why=$why
    fi
  fi
  {
    flock 9
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$level" "$name" "$what" "$reason" "$sig" "$bytes" "$peak" \
      "$eager" "$compiled" "$status" "$eager_why" "$compile_why" "$(( $(date +%s) - t0 ))" "${card:--}" >>"$tsv"
    echo "census: [$(( $(wc -l <"$tsv") - 1 ))/${#files[@]}]${lane:+ $lane:} level$level/$name: $status; eager $eager us," \
      "compile $compiled us, peak $peak MiB, $(( $(date +%s) - t0 )) s" >&2
    publish
  } 9>"$tsv.lock"
}

# Then each problem's baselines: one device per lane, one problem at a time on each, so that a device's
# peak memory and its timings are one problem's. Several GPUs (--device cuda:0,cuda:1 or cuda:all) share
# the files out.
lanes=${#devices[@]}
for (( k = 0; k < lanes; k++ )); do
  (
    dev=${devices[$k]} gpu=""
    [ "$dev" != cpu ] && [ -n "$smi" ] && gpu=${dev#cuda:} && [ "$gpu" = cuda ] && gpu=0
    lane=""
    [ "$lanes" -gt 1 ] && lane=$dev
    for (( i = k; i < ${#todo[@]}; i += lanes )); do
      if [ "$deadline" -gt 0 ] && [ $(( $(date +%s) - start )) -ge "$deadline" ]; then
        echo "census:${lane:+ $lane:} deadline of $deadline s reached; the files left are for the next call" >&2
        break
      fi
      entry=${todo[$i]}
      measure "${entry%%$'\t'*}" "${entry#*$'\t'}" "$dev" "$gpu" "$lane"
    done
  ) &
done
wait
publish
echo "census: $(( $(wc -l <"$tsv") - 1 )) rows in $tsv; table in $out" >&2
