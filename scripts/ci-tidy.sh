#!/bin/sh
# CI stage: clang-tidy (the root's .clang-tidy) and clang-format (scripts/format.sh --check) on the C and
# C++ files changed since a base commit, so that a change is judged on what it touched: the files of the last
# five commits (4 .cpp, 2 headers: 5 units) took 32 to 63 s on the 2-core VM; all 74 of src/ and capi/, 28 minutes
# (beside a build).
#
#   base      KE_TIDY_BASE if set (a commit, a branch, HEAD~5); else `git merge-base HEAD origin/main` if
#             origin/main exists and is not HEAD itself; else HEAD~1. With no base (a clone of a single
#             commit) nothing is linted, and the stage says so and passes. Changed means: differs between
#             the base and the work tree.
#   format    scripts/format.sh --check on the changed files that are ours (it holds the list of data files
#             it leaves alone: the kernels under problems/ and tests/fixtures/).
#   tidy      clang-tidy-14 on the changed .c/.cpp files of src/, capi/, include/ and tools/ that the build compiles,
#             with build/compile_commands.json (KE_TIDY_BUILD names another build folder; one that has none
#             is configured, not built). A changed header is checked through one .cpp file that includes
#             it, its warnings being reported through HeaderFilterRegex. Every kept check is an error
#             (WarningsAsErrors), and the whole of src/, capi/, include/ and tools/ passes them.
#             KE_TIDY_JOBS files at a time (default 2), by run-clang-tidy-14 where there is one. Changed
#             files of tests/, bench/ and examples/ are format-checked, not linted (nobody has run the
#             checks over them yet).
#
#   scripts/ci-tidy.sh
#
# Like scripts/ci-extra.sh's stages, it prints what it ran, how long it took, and PASSED or FAILED.
set -eu
cd "$(dirname "$0")/.."
root=$(pwd)
build=${KE_TIDY_BUILD:-build}
jobs=${KE_TIDY_JOBS:-2}

banner() { printf '\n==== %s ====\n' "$*"; }
now() { date +%s; }

pick() {
  for candidate in "$@"; do
    if command -v "$candidate" >/dev/null 2>&1; then echo "$candidate"; return 0; fi
  done
  return 1
}

start=$(now)
if [ -n "${KE_TIDY_BASE:-}" ]; then
  base=$(git rev-parse --verify -q "${KE_TIDY_BASE}^{commit}") ||
    { echo "tidy: FAILED: KE_TIDY_BASE=$KE_TIDY_BASE is not a commit here"; exit 1; }
  from="KE_TIDY_BASE=$KE_TIDY_BASE"
elif git rev-parse --verify -q origin/main >/dev/null && base=$(git merge-base HEAD origin/main 2>/dev/null) &&
  [ "$base" != "$(git rev-parse HEAD)" ]; then
  from="merge-base HEAD origin/main"
elif base=$(git rev-parse --verify -q 'HEAD~1^{commit}'); then
  from="HEAD~1"  # also on main itself, where the merge-base is HEAD: its last commit is what changed
else
  banner "tidy: clang-tidy and clang-format on the changed C/C++ files"
  echo "tidy: no base commit (no origin/main, no HEAD~1: a clone of one commit?), so nothing to lint; set KE_TIDY_BASE"
  echo "tidy: PASSED in $(($(now) - start)) s (nothing linted)"
  exit 0
fi
short=$(git rev-parse --short "$base")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Ours and C/C++ (format.sh's filter), changed, not deleted.
git diff --name-only --diff-filter=d "$base" -- | xargs -r scripts/format.sh --list >"$work/changed"
# What clang-tidy reads: the library's own code and the command-line tool's.
grep -E '^(src|capi|include|tools)/' "$work/changed" >"$work/lintable" || true

banner "tidy: clang-tidy and clang-format on the $(wc -l <"$work/changed") C/C++ files changed since $short ($from)"
sed 's/^/  /' "$work/changed"
if [ ! -s "$work/changed" ]; then
  echo "tidy: PASSED in $(($(now) - start)) s (no C/C++ file of ours changed)"
  exit 0
fi

failed=0
echo "---- scripts/format.sh --check"
xargs scripts/format.sh --check <"$work/changed" 2>&1 ||
  { failed=1; echo "format: the files above are not formatted: scripts/format.sh FILES... formats them"; }
formatted=$(now)

tidy=$(pick clang-tidy-14 clang-tidy) || { echo "tidy: FAILED: no clang-tidy (apt-get install clang-tidy)"; exit 1; }
if [ ! -f "$build/compile_commands.json" ]; then
  echo "---- no $build/compile_commands.json: configuring $build (cmake -S . -B $build -G Ninja)"
  mkdir -p "$build"
  cmake -S . -B "$build" -G Ninja >"$work/configure.log" 2>&1 ||
    { cat "$work/configure.log"; echo "tidy: FAILED to configure $build"; exit 1; }
fi
# The translation units the build compiles (CMake writes one "file" line per entry).
sed -n 's/^ *"file": "\(.*\)",\{0,1\}$/\1/p' "$build/compile_commands.json" | sort -u >"$work/units"
: >"$work/lint"
while IFS= read -r file; do
  case $file in
    *.c | *.cc | *.cpp | *.cxx)
      grep -qxF "$root/$file" "$work/units" && echo "$root/$file" >>"$work/lint" ||
        echo "  ($file: not compiled by $build, not linted)" ;;
    *)
      # A header: the first compiled unit of ours that includes it by its name.
      name=$(basename "$file")
      unit=$(grep -E "^$root/(src|capi|tools)/" "$work/units" | while IFS= read -r u; do
        if grep -qE "#include [<\"]([^\">]*/)?${name}[\">]" "$u" 2>/dev/null; then echo "$u"; break; fi
      done)
      if [ -n "$unit" ]; then
        echo "  ($file: checked through ${unit#"$root"/})"
        echo "$unit" >>"$work/lint"
      else
        echo "  ($file: no compiled file of src/, capi/ or tools/ includes it, not linted)"
      fi ;;
  esac
done <"$work/lintable"
sort -u "$work/lint" -o "$work/lint"
units=$(wc -l <"$work/lint")
# Warnings from our headers, not from system or third-party ones (anchored here, where .clang-tidy cannot be).
filter="^$root/(include|src|capi|tools)/"

if [ "$units" -gt 0 ]; then
  runner=$(pick run-clang-tidy-14 run-clang-tidy) || runner=
  if [ -n "$runner" ]; then
    echo "---- $runner -clang-tidy-binary $tidy -p $build -j $jobs -quiet (header filter $filter), $units files"
    # Its arguments are patterns: each file's path, escaped and anchored.
    sed -e 's/[][\.*^$+?(){}|]/\\&/g' -e 's/^/^/' -e 's/$/$/' "$work/lint" >"$work/patterns"
    xargs "$runner" -clang-tidy-binary "$(command -v "$tidy")" -p "$build" -j "$jobs" -quiet \
      -header-filter="$filter" <"$work/patterns" >"$work/tidy.log" 2>&1 || failed=1
    # It prints each file's command line, then its findings; its counts ("N warnings generated") and the
    # colours it asks clang-tidy for are left out of the log.
    sed 's/\x1b\[[0-9;]*m//g' "$work/tidy.log" | grep -vE '^[0-9]+ warnings? (and [0-9]+ errors? )?generated' || true
  else
    echo "---- $tidy -p $build --quiet (header filter $filter), $units files, $jobs at a time"
    mkdir -p "$work/out"
    # Each file's findings go to a file of their own, printed after, so two at a time do not interleave.
    i=0
    # shellcheck disable=SC2016 # the inner shell expands them
    while IFS= read -r unit; do
      i=$((i + 1))
      printf '%s %s\n' "$unit" "$i"
    done <"$work/lint" | xargs -P "$jobs" -L 1 sh -c \
      '"$0" -p "$1" --quiet --header-filter="$2" "$4" >"$3/$5.log" 2>&1 || echo "$4" >"$3/$5.failed"' \
      "$tidy" "$build" "$filter" "$work/out" || true
    for log in "$work"/out/*.log; do grep -vE '^[0-9]+ warnings? (and [0-9]+ errors? )?generated' "$log" || true; done
    ! ls "$work"/out/*.failed >/dev/null 2>&1 || failed=1
  fi
fi

took="$(($(now) - start)) s (format $((formatted - start)) s, clang-tidy $(($(now) - formatted)) s on $units files)"
[ "$failed" -eq 0 ] || { echo "tidy: FAILED in $took: see the findings above"; exit 1; }
echo "tidy: PASSED in $took"
