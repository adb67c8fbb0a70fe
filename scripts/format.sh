#!/bin/sh
# Formats the project's own C and C++ code with clang-format and the root's .clang-format.
#
#   scripts/format.sh                   format every tracked C/C++ file of ours, in place
#   scripts/format.sh FILES...          format just FILES (those of them that are ours and C/C++)
#   scripts/format.sh --check [FILES...]  change nothing: list the files that formatting would change, and
#                                       exit 1 if there is any (CI: scripts/ci-tidy.sh runs it on what changed)
#   scripts/format.sh --list [FILES...]   print the files it would format, one a line (ci-tidy.sh's filter)
#
# clang-format 14 is the version the style was measured with (Debian 12's clang-format); another version
# formats some lines differently, so the script says so when it finds one. CLANG_FORMAT overrides the binary.
#
# Not formatted (data, not our code): the kernels the library compiles at run time.
#   problems/         the problems' seeds and references (.c, .cu, ...): the text a model is shown and
#                     edits, kept as their authors wrote them, in a C and CUDA style of their own.
#   tests/fixtures/   kernels the tests feed to the library (hostile ones, seeds, references, the memo
#                     cache's sources): inputs of the tests, kept byte for byte as the tests were written.
# (tests/fuzz/corpus/ and the examples in Rust and Go hold no C/C++ files; clang-format 14 reads no
# .clang-format-ignore, so the list lives here.)
set -eu
cd "$(dirname "$0")/.."

excluded='^(problems|tests/fixtures|bench/level2_programs)/'
sources='\.(c|h|cc|cpp|cxx|hpp|hxx|cu|cuh)$'

mode=format
case "${1:-}" in
  --check) mode=check; shift ;;
  --list) mode=list; shift ;;
esac
case "${1:-}" in
  -h | --help) sed -n '4,8s/^# \{0,1\}//p' "$0"; exit 0 ;;
  -*) echo "usage: scripts/format.sh [--check | --list] [FILES...]" >&2; exit 2 ;;
esac

# The files: the arguments (as given, relative to the repository root) or every tracked file; either way
# only C/C++ sources outside the excluded folders, and only those that exist (a changed-file list may name
# a deleted one).
if [ "$mode" = list ]; then
  list=/dev/stdout
else
  list=$(mktemp)
  trap 'rm -f "$list"' EXIT
fi
if [ $# -gt 0 ]; then
  printf '%s\n' "$@"
else
  git ls-files
fi | sed 's|^\./||' | grep -E "$sources" | grep -Ev "$excluded" | while IFS= read -r file; do
  [ -f "$file" ] && printf '%s\n' "$file"
done >"$list" || true
[ "$mode" != list ] || exit 0

clang_format=${CLANG_FORMAT:-}
if [ -z "$clang_format" ]; then
  for candidate in clang-format-14 clang-format; do
    if command -v "$candidate" >/dev/null 2>&1; then clang_format=$candidate; break; fi
  done
fi
[ -n "$clang_format" ] || { echo "format.sh: no clang-format (apt-get install clang-format)" >&2; exit 2; }
case $("$clang_format" --version) in
  *"version 14."*) ;;
  *) echo "format.sh: note: $("$clang_format" --version | head -n 1), the style was made for 14" >&2 ;;
esac

if [ "$mode" = format ]; then
  # Batches of 50 keep the command line short; two at a time.
  [ -s "$list" ] && xargs -P 2 -n 50 "$clang_format" -i --style=file <"$list"
  echo "format.sh: formatted $(wc -l <"$list") files"
  exit 0
fi

changed=0
while IFS= read -r file; do
  if ! "$clang_format" --style=file "$file" | cmp -s - "$file"; then
    echo "$file"
    changed=$((changed + 1))
  fi
done <"$list"
if [ "$changed" -gt 0 ]; then
  echo "format.sh: $changed of $(wc -l <"$list") files would change (scripts/format.sh FILES... formats them)" >&2
  exit 1
fi
echo "format.sh: $(wc -l <"$list") files checked, all formatted" >&2
