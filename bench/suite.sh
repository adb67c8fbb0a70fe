#!/usr/bin/env bash
# The problem suite on one device: `kernelevolve run SPEC --json` for every problem with a budget per
# problem, then a markdown table and a PNG plot. Per problem: correctness, speedup of the best kernel over
# the seed, its share of the device's roofline, on a GPU its speedup over PyTorch's operator, and for a
# problem whose reference is a PyTorch module (problems/pytorch) its speedup over that module run eagerly
# and under torch.compile (the run's own baselines). Then fast_p at p = 1, 1.5 and 2: the fraction of all
# problems whose best kernel is correct AND faster than the baseline by p: the seed (at least p), on a GPU
# PyTorch (at least p), and for the PyTorch problems eager and torch.compile by KernelBench's definition
# (more than p; every such problem in the denominator, one without a correct kernel or a baseline time not
# fast).
#
#   bench/suite.sh [--device cpu|cuda[:N]] [--max-evals N] [--max-time SEC] [--jobs N] [--policy NAME]
#                  [--only REGEX] [--cli PATH] [--out DIR] [--name NAME] [--torch|--no-torch] [--no-plot]
#                  [--strict] [--timeout SEC] [--runs DIR] [--reuse]
#
#   --device      cpu runs problems/level*/*/cpu.json (and older spec.json) and problems/pytorch/*/cpu.json;
#                 cuda runs .../cuda.json
#   --max-evals   evaluations per problem, the seed included (default 24)
#   --max-time    the search's own time limit per problem, seconds (it stops and reports)
#   --only        run only the problems whose path (level1/softmax, pytorch/relu_nchw) matches this
#                 extended regex, e.g. '^pytorch/' for the PyTorch problems alone
#                 (default $KE_TEST_PROBLEMS: CI's sanitizer stage runs a slice, scripts/ci-extra.sh)
#   --cli         the kernelevolve executable (default: build/kernelevolve under the repository)
#   --out         where NAME.md, NAME.png, NAME.tsv and runs/ go (default bench/results)
#   --name        file stem of the outputs (default cpu_suite or cuda_suite)
#   --torch       time PyTorch's operators first (default on a GPU; bench/suite_torch.py, python3 + torch);
#                 the PyTorch problems need no such step, their runs time eager and torch.compile themselves
#   --strict      exit 1 if any problem has no correct kernel (the CI smoke test)
#   --timeout     hard limit per problem, seconds (default: 3 x --max-time + 120, else 1800)
#   --runs        where each problem's JSON and log go (default OUT/runs/NAME)
#   --reuse       take each problem's result from the runs folder where a previous run left one (and
#                 PyTorch's times likewise): re-makes the table and plot, e.g. from a GPU machine's runs
#                 (runs made before the eager and torch.compile baselines read as having no baseline time)
#
# The PyTorch problems run their reference in a Python that imports torch: the CLI takes $KE_PYTHON, else
# python3 on PATH, else /usr/bin/python3 (Debian's python3-torch). Where none does and KE_PYTHON is unset,
# they are left out, and the table says so. Needs jq; gnuplot (Debian's gnuplot-nox) for the plot. Exit 77
# when jq is missing (ctest: skipped).
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
device=cpu max_evals=24 max_time="" jobs="" policy="" only=${KE_TEST_PROBLEMS:-} cli="" out="" name="" torch="" plot=1 strict=0
hard_limit="" reuse=0 runs=""
command_line="bench/suite.sh $*"
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device=$2; shift 2 ;;
    --max-evals) max_evals=$2; shift 2 ;;
    --max-time) max_time=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --policy) policy=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --cli) cli=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --torch) torch=1; shift ;;
    --no-torch) torch=0; shift ;;
    --no-plot) plot=0; shift ;;
    --strict) strict=1; shift ;;
    --timeout) hard_limit=$2; shift 2 ;;
    --reuse) reuse=1; shift ;;
    --runs) runs=$2; shift 2 ;;
    -h|--help) sed -n '2,38p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "suite.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

command -v jq >/dev/null || { echo "suite.sh: needs jq (apt-get install jq); skipped" >&2; exit 77; }
kind=${device%%:*}
case "$kind" in
  cpu) spec_names=(cpu.json spec.json) ;;
  cuda) spec_names=(cuda.json) ;;
  hip) spec_names=(hip.json) ;;
  *) echo "suite.sh: unknown device '$device'" >&2; exit 2 ;;
esac
[ -n "$torch" ] || { [ "$kind" = cuda ] && torch=1 || torch=0; }
cli=${cli:-$root/build/kernelevolve}
[ -x "$cli" ] || { echo "suite.sh: no kernelevolve at $cli (build it, or pass --cli)" >&2; exit 2; }
out=${out:-$root/bench/results}
name=${name:-${kind}_suite}
if [ -z "$hard_limit" ]; then
  if [ -n "$max_time" ]; then hard_limit=$(awk -v t="$max_time" 'BEGIN { printf "%d", 3 * t + 120 }'); else hard_limit=1800; fi
fi
runs=${runs:-$out/runs/$name}
mkdir -p "$runs" "$out"

# A PyTorch problem's reference runs in Python: the CLI takes $KE_PYTHON (and says so if it lacks torch),
# else the first of python3 on PATH and /usr/bin/python3 that imports torch. Where none does, the PyTorch
# problems are left out rather than failed, as test_pytorch skips: the machine cannot run them at all.
torch_python_found() {
  [ -n "${KE_PYTHON:-}" ] && return 0
  local python
  for python in python3 /usr/bin/python3; do "$python" -c 'import torch' >/dev/null 2>&1 && return 0; done
  return 1
}

# The problems, level by level, in folder order, then the PyTorch problems (level "pytorch").
specs=() pytorch_left_out=0
for level_dir in "$root"/problems/level*/ "$root"/problems/pytorch/; do
  for dir in "$level_dir"*/; do
    for file in "${spec_names[@]}"; do
      if [ -f "$dir$file" ]; then
        key=$(basename "$level_dir")/$(basename "$dir")
        if [ -z "$only" ] || printf '%s\n' "$key" | grep -Eq -- "$only"; then specs+=("$dir$file"); fi
        break
      fi
    done
  done
done
is_pytorch_spec() { jq -e '(.reference | objects | .pytorch) != null' "$1" >/dev/null 2>&1; }
# --reuse re-makes tables from runs made elsewhere, so it needs no torch here.
if [ "$reuse" = 0 ] && ! torch_python_found; then
  kept=()
  for spec in "${specs[@]}"; do
    if is_pytorch_spec "$spec"; then pytorch_left_out=$((pytorch_left_out + 1)); else kept+=("$spec"); fi
  done
  if [ $pytorch_left_out -gt 0 ]; then
    echo "suite.sh: no Python imports torch (tried python3 and /usr/bin/python3; set KE_PYTHON): $pytorch_left_out PyTorch problems left out" >&2
  fi
  specs=(${kept[@]+"${kept[@]}"})
fi
[ ${#specs[@]} -gt 0 ] || { echo "suite.sh: no $kind problems found under $root/problems" >&2; exit 2; }

# PyTorch's times first, alone on the device: for the spec problems only, as a PyTorch problem's run times
# its own module (eager and torch.compile).
torch_json=""
torch_specs=()
for spec in "${specs[@]}"; do is_pytorch_spec "$spec" || torch_specs+=("$spec"); done
if [ "$torch" = 1 ] && [ ${#torch_specs[@]} -gt 0 ]; then
  torch_json=$runs/torch.json
  if [ "$reuse" = 1 ] && jq -e .problems "$torch_json" >/dev/null 2>&1; then
    echo "suite.sh: PyTorch's times from $torch_json" >&2
  elif ! python3 "$root/bench/suite_torch.py" "${torch_specs[@]}" --out "$torch_json" 2>"$runs/torch.log"; then
    echo "suite.sh: PyTorch baselines failed (see $runs/torch.log); the table has no PyTorch column" >&2
    tail -3 "$runs/torch.log" >&2
    torch_json=""
  fi
fi

tsv=$out/$name.tsv
# Columns 14 on are the PyTorch problems' (added after the others, so a reader of the older columns by
# position still works): whether the reference is a PyTorch module, the speedups over it run eagerly and
# under torch.compile (the run's best.speedup_vs_eager and _vs_compile), both baselines' first-workload
# times, and why a baseline has no time.
printf 'level\tproblem\tcorrect\tspeedup\troofline\tvs_torch\tevals\tseed_us\tbest_us\ttorch_us\tseconds\ttunables\tnote\tpytorch_ref\tvs_eager\tvs_compile\teager_us\tcompile_us\tbaseline_note\n' >"$tsv"
device_name=""
started=$(date +%s)
# A run's eager and torch.compile baselines as three strings: each one's first-workload time ("nan" without
# one) and why a baseline has no time ("" when both have one, or the problem has no PyTorch reference; a
# PyTorch problem's run made before the baselines existed reports none).
# shellcheck disable=SC2016  # jq's variables, not the shell's
baseline_columns='def first_us(b): if (b.status == "ok" and (b.time_us | length) > 0) then (b.time_us[0] | tostring) else "nan" end;
  def why(what; b): if b == null or b.status == "ok" then empty
                     else "\(what) \(b.status): \(b.reason // "" | gsub("[\t\n|]+"; " ") | sub(" +$"; ""))" end;
  (.baselines // {}) as $b
  | [first_us($b.eager // {}), first_us($b.compile // {}),
     if $pytorch_ref == "1" and .baselines == null then "eager and torch.compile: the run reported no baselines"
     else [why("eager"; $b.eager), why("torch.compile"; $b.compile)] | join("; ") end]'
for spec in "${specs[@]}"; do
  dir=$(dirname "$spec")
  problem=$(basename "$dir")
  level=$(basename "$(dirname "$dir")")
  stem=$runs/$level-$problem
  pytorch_ref=0
  is_pytorch_spec "$spec" && pytorch_ref=1
  args=(run "$spec" --device "$device" --no-db --max-evals "$max_evals" --json)
  [ -n "$max_time" ] && args+=(--max-time "$max_time")
  [ -n "$jobs" ] && args+=(--jobs "$jobs")
  [ -n "$policy" ] && args+=(--policy "$policy")
  if [ "$reuse" = 1 ] && tail -n 1 "$stem.json" 2>/dev/null | jq -e .spec >/dev/null 2>&1; then
    rc=0  # a previous run's result
  else
    timeout "$hard_limit" "$cli" "${args[@]}" >"$stem.json" 2>"$stem.log"
    rc=$?
  fi
  json=$(tail -n 1 "$stem.json")
  seconds=$(printf '%s' "$json" | jq -r '.elapsed_s // empty' 2>/dev/null | awk '{ printf "%.1f", $1 }')
  seconds=${seconds:-?}
  if [ $rc -ne 0 ] || ! printf '%s' "$json" | jq -e . >/dev/null 2>&1; then
    why="exit $rc"
    [ $rc -eq 124 ] && why="ran past $hard_limit s"
    # The seed's own verdict when the run got that far (its status and why), else the log's last word.
    note=$(printf '%s' "$json" | jq -r 'select(.seed.status != null and .seed.status != "ok")
                                        | "seed \(.seed.status): \(.seed.message)"' 2>/dev/null)
    [ -n "$note" ] || note=$(grep -v '^node \|^evolving ' "$stem.log" | grep . | tail -n 1)
    note=$(printf '%s' "$note" | tr '\t|\n' '   ' | cut -c1-160)
    evals=$(printf '%s' "$json" | jq -r '.evaluations // 0' 2>/dev/null)
    # A baseline timed before the run failed still shows; the speedups over it are nan (no kernel).
    baselines=$(printf '%s' "$json" | jq -r --arg pytorch_ref "$pytorch_ref" "$baseline_columns"' | "nan\tnan\t\(.[0])\t\(.[1])\t\(.[2])"' 2>/dev/null)
    [ -n "$baselines" ] || baselines=$(printf 'nan\tnan\tnan\tnan\t')
    printf '%s\t%s\t0\tnan\tnan\tnan\t%s\tnan\tnan\tnan\t%s\t\t%s\t%s\t%s\n' "$level" "$problem" "${evals:-0}" "$seconds" \
      "$why: $note" "$pytorch_ref" "$baselines" >>"$tsv"
    echo "suite: $level/$problem: no result ($why), $seconds s" >&2
    continue
  fi
  [ -n "$device_name" ] || device_name=$(printf '%s' "$json" | jq -r '.device')
  spec_name=$(printf '%s' "$json" | jq -r '.spec')
  torch_times="null"
  [ -n "$torch_json" ] && torch_times=$(jq -c --arg n "$spec_name" '.problems[$n] // null | if . == null then null else map(.time_us) end' "$torch_json")
  # One row: correctness, geometric-mean speedup over the seed (the search's own figure), mean roofline
  # share over workloads, geometric-mean speedup over PyTorch, and the first workload's times.
  printf '%s' "$json" | jq -r --arg level "$level" --arg problem "$problem" --arg seconds "$seconds" \
    --arg pytorch_ref "$pytorch_ref" --argjson torch "$torch_times" '
    def geomean(xs): if (xs | length) == 0 then null else (xs | map(log) | add / length | exp) end;
    def num(x): if x == null then "nan" else (x | tostring) end;
    '"$baseline_columns"' as $baselines
    | (.best != null and .seed.status == "ok") as $ok
    | [ $level, $problem, (if $ok then "1" else "0" end),
        num(.best.speedup),
        num(if .best then (.best.roofline_share | add / length) else null end),
        num(if $ok and $torch != null and (($torch | length) == (.best.time_us | length))
            then geomean([range(0; $torch | length) as $i | $torch[$i] / .best.time_us[$i]]) else null end),
        (.evaluations | tostring),
        num(.seed.time_us[0]), num(.best.time_us[0]), num(if $torch then $torch[0] else null end),
        $seconds,
        (if .best then (.best.tunables | to_entries | map("\(.key)=\(.value)") | join(" ")) else "" end),
        (if $ok then (.status_counts | to_entries | map("\(.key) \(.value)") | join(", "))
         else "seed: \(.seed.status) \(.seed.message)" end),
        $pytorch_ref,
        num(if $ok then .best.speedup_vs_eager else null end),
        num(if $ok then .best.speedup_vs_compile else null end) ] + $baselines
    | @tsv' >>"$tsv"
  echo "suite: $level/$problem: $(tail -n 1 "$tsv" | awk -F'\t' '{ printf "%s, %.2fx over the seed, %.1f%% of the roofline", ($3 == 1 ? "correct" : "NOT correct"), $4, 100 * $5
    if ($14 == 1) for (b = 15; b <= 16; b++) printf ", %s over %s", ($b == "nan" ? "no speedup" : sprintf("%.2fx", $b)), (b == 15 ? "eager" : "torch.compile") }'), $seconds s" >&2
done
elapsed=$(( $(date +%s) - started ))
device_name=${device_name:-$device}

# The table and the summary, in markdown.
md=$out/$name.md
{
  echo "## The $kind suite: $device_name"
  echo
  echo "Made by \`$command_line\` on $(date -u "+%Y-%m-%d %H:%M UTC"), $(nproc) cores visible, ${elapsed} s in all;"
  [ "$reuse" = 1 ] && echo "Results reused where $runs held them (the runs' own device and times; the command that made them is given beside the table)."
  echo "budget: ${max_evals} evaluations per problem${max_time:+, at most ${max_time} s}, the parameter search from the seed$( [ -n "$policy" ] && echo " (policy $policy)")."
  echo
  [ "$pytorch_left_out" -gt 0 ] && echo "$pytorch_left_out PyTorch problems left out: no Python here imports torch (set KE_PYTHON)." && echo
  awk -F'\t' -v torch="$([ -n "$torch_json" ] && echo 1 || echo 0)" '
    function none(v) { return v == "nan" || v == "" }  # a row of an older TSV has no such column
    function fmt_x(v) { return none(v) ? "–" : sprintf("%.2fx", v) }
    function fmt_p(v) { return none(v) ? "–" : sprintf("%.1f%%", 100 * v) }
    function fmt_us(v) { return none(v) ? "–" : (v >= 1000 ? sprintf("%.0f", v) : sprintf("%.1f", v)) }
    NR == 1 { next }
    {
      n++; lv[n] = $1; pr[n] = $2; ok[n] = $3; sp[n] = $4; rf[n] = $5; vt[n] = $6; ev[n] = $7
      su[n] = $8; bu[n] = $9; tu[n] = $10; tn[n] = $12; nt[n] = $13
      pt[n] = ($14 == 1); ve[n] = $15; vc[n] = $16; eu[n] = $17; bn[n] = $19
      if (pt[n]) pytorch++
      if (!($1 in seen)) { seen[$1] = 1; levels = levels " " $1 }  # the levels present, in folder order
    }
    END {
      head = "| level | problem | correct | speedup over seed | roofline share | "
      rule = "| --- | --- | :-: | --: | --: | "
      if (torch) { head = head "vs PyTorch | PyTorch µs | "; rule = rule "--: | --: | " }
      if (pytorch) { head = head "vs eager | vs torch.compile | eager µs | "; rule = rule "--: | --: | --: | " }
      print head "seed µs | best µs | evals | best tunables |"
      print rule "--: | --: | --: | --- |"
      for (i = 1; i <= n; i++) {
        line = "| " lv[i] " | " pr[i] " | " (ok[i] == 1 ? "yes" : "**no**") " | " (ok[i] == 1 ? fmt_x(sp[i]) : "–") " | " \
               (ok[i] == 1 ? fmt_p(rf[i]) : "–") " | "
        if (torch) line = line fmt_x(vt[i]) " | " fmt_us(tu[i]) " | "
        if (pytorch) line = line fmt_x(ve[i]) " | " fmt_x(vc[i]) " | " fmt_us(eu[i]) " | "
        line = line fmt_us(su[i]) " | " fmt_us(bu[i]) " | " ev[i] " | " (ok[i] == 1 ? tn[i] : nt[i]) " |"
        print line
      }
      print ""
      print "Times are the first workload'"'"'s medians; speedups are geometric means over all workloads; the roofline share is the"
      print "best kernel'"'"'s achieved rate (bytes or flops, whichever is closer to its ceiling) over the device'"'"'s measured peak,"
      print "averaged over workloads. On the CPU the CI shapes fit in the caches, so a share above 100% of the measured memory"
      print "copy rate is possible there."
      if (pytorch) {
        print ""
        print "The PyTorch problems (reference: the module in model.py) are timed against that module run eagerly and under"
        print "torch.compile by the run itself, on the same device and workloads. Their fast_p rows follow KernelBench'"'"'s"
        print "definition: the fraction of all " pytorch " such problems whose best kernel is correct and more than p times faster"
        print "than the baseline (here the geometric mean over workloads); the denominator is every such problem, and one"
        print "without a correct kernel, without a result, or whose baseline has no time counts as not fast."
        # Why baselines have no time, once per reason (a reason naming its problem reads … there).
        for (i = 1; i <= n; i++) {
          if (!pt[i] || bn[i] == "") continue
          c = split(bn[i], parts, "; ")
          for (k = 1; k <= c; k++) {
            r = ""; rest = parts[k]
            while ((at = index(rest, pr[i])) > 0) { r = r substr(rest, 1, at - 1) "…"; rest = substr(rest, at + length(pr[i])) }
            r = r rest
            if (!(r in who)) { order[++nwhy] = r; who[r] = pr[i] } else who[r] = who[r] ", " pr[i]
            count[r]++
          }
        }
        if (nwhy) { print ""; print "Baselines without a time, and why:" }
        for (k = 1; k <= nwhy; k++)
          print "- " order[k] " (" (count[order[k]] == pytorch && pytorch > 1 ? "all " pytorch : who[order[k]]) ")"
      }
      print ""
      split("1 1.5 2", ps, " ")
      head = "| fast_p | problems |"; rule = "| --- | --: |"
      for (j = 1; j <= 3; j++) { head = head " p = " ps[j] " |"; rule = rule " --: |" }
      print head; print rule
      nl = split("all" levels, L, " ")
      for (b = 1; b <= (torch ? 2 : 1); b++) {
        for (l = 1; l <= nl; l++) {
          total = 0
          for (j = 1; j <= 3; j++) hit[j] = 0
          for (i = 1; i <= n; i++) {
            if (L[l] != "all" && lv[i] != L[l]) continue
            total++
            v = (b == 1) ? sp[i] : vt[i]
            if (ok[i] != 1 || none(v)) continue
            for (j = 1; j <= 3; j++) if (v + 0 >= ps[j] + 0) hit[j]++
          }
          if (total == 0) continue
          line = "| vs " (b == 1 ? "seed" : "PyTorch") ", " L[l] " | " total " |"
          for (j = 1; j <= 3; j++) line = line sprintf(" %.2f |", hit[j] / total)
          print line
        }
      }
      # KernelBench: more than p (not at least), over every problem with a PyTorch reference.
      for (b = 1; b <= (pytorch ? 2 : 0); b++) {
        for (j = 1; j <= 3; j++) hit[j] = 0
        for (i = 1; i <= n; i++) {
          if (!pt[i]) continue
          v = (b == 1) ? ve[i] : vc[i]
          if (ok[i] != 1 || none(v)) continue
          for (j = 1; j <= 3; j++) if (v + 0 > ps[j] + 0) hit[j]++
        }
        line = "| vs " (b == 1 ? "eager" : "torch.compile") ", PyTorch problems | " pytorch " |"
        for (j = 1; j <= 3; j++) line = line sprintf(" %.2f |", hit[j] / pytorch)
        print line
      }
      correct = 0; logsum = 0
      for (i = 1; i <= n; i++) if (ok[i] == 1) { correct++; logsum += log(sp[i]) }
      print ""
      printf "%d of %d problems correct; geometric-mean speedup over the seed %.2fx (correct problems).\n", correct, n, \
             correct ? exp(logsum / correct) : 0
      if (pytorch) {
        for (b = 1; b <= 2; b++) {
          timed = 0; logsum = 0
          for (i = 1; i <= n; i++) {
            v = (b == 1) ? ve[i] : vc[i]
            if (pt[i] && ok[i] == 1 && !none(v)) { timed++; logsum += log(v) }
          }
          label = (b == 1) ? "eager" : "torch.compile"
          if (timed) printf "PyTorch problems: geometric-mean speedup over %s %.2fx (the %d of %d correct with a baseline time).\n", label, exp(logsum / timed), timed, pytorch
          else printf "PyTorch problems: no speedup over %s (no correct problem with a baseline time).\n", label
        }
      }
    }' "$tsv"
} >"$md"

# The plot: speedup over the seed (and over PyTorch, and over eager) per problem, log scale; the roofline
# share below.
png=$out/$name.png
if [ "$plot" = 1 ] && command -v gnuplot >/dev/null; then
  data=$runs/plot.dat
  awk -F'\t' 'NR > 1 {
      sp = ($3 == 1 && $4 != "nan") ? $4 : "NaN"; rf = ($3 == 1 && $5 != "nan") ? 100 * $5 : "NaN"
      vt = ($3 == 1 && $6 != "nan") ? $6 : "NaN"
      ve = ($3 == 1 && $15 != "nan" && $15 != "") ? $15 : "NaN"
      lv = $1; if (match(lv, /^level[0-9]+/)) lv = "L" substr(lv, 6, RLENGTH - 5)  # level3_recsys: L3
      printf "%s/%s\t%s\t%s\t%s\t%s\n", lv, $2, sp, rf, vt, ve }' "$tsv" >"$data"
  count=$(wc -l <"$data")
  # The speedup axis starts at 0.5, or a power of two below the slowest bar (a kernel slower than eager).
  y_min=$(awk -F'\t' '{ for (c = 2; c <= NF; c++) if (c != 3 && $c != "NaN" && $c > 0 && (m == "" || $c + 0 < m)) m = $c + 0 }
                      END { y = 0.5; while (m != "" && y > m) y /= 2; print y }' "$data")
  width=$(( 300 + 34 * count ))
  [ $width -lt 900 ] && width=900
  torch_plot=""
  [ -n "$torch_json" ] && torch_plot=", '' using 4 title 'over PyTorch' lc rgb '#e6550d'"
  awk -F'\t' 'NR > 1 && $14 == 1 { found = 1 } END { exit !found }' "$tsv" &&
    torch_plot="$torch_plot, '' using 5 title 'over PyTorch eager (PyTorch problems)' lc rgb '#756bb1'"
  gnuplot <<EOF 2>"$runs/gnuplot.log" || echo "suite.sh: gnuplot failed (see $runs/gnuplot.log)" >&2
set terminal pngcairo size $width,900 font 'sans,10' noenhanced
set output '$png'
set datafile separator '\t'
set datafile missing 'NaN'
set multiplot layout 2,1 title "KernelEvolve suite on $(printf '%s' "$device_name" | sed "s/'//g; s/\"//g"): $max_evals evaluations per problem${max_time:+, at most $max_time s}"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set grid ytics
set xtics rotate by -50 scale 0 font ',9'
set key top left opaque
set logscale y 2
set yrange [$y_min:*]
set ylabel 'speedup of the best kernel (x)'
plot '$data' using 2:xtic(1) title 'over the seed' lc rgb '#3182bd'$torch_plot, 1 notitle lc rgb '#888888' dt 2
unset logscale y
set yrange [0:*]
set key top left opaque
set ylabel 'share of the roofline (%)'
plot '$data' using 3:xtic(1) title 'best kernel (over 100%: the working set fits in a cache)' lc rgb '#31a354', 100 notitle lc rgb '#888888' dt 2
unset multiplot
EOF
fi

cat "$md"
[ "$plot" = 1 ] && [ -f "$png" ] && echo && echo "plot: $png" && echo "table: $md"
if [ "$strict" = 1 ] && awk -F'\t' 'NR > 1 && $3 != 1 { bad = 1 } END { exit !bad }' "$tsv"; then
  echo "suite.sh: some problems have no correct kernel" >&2
  exit 1
fi
exit 0
