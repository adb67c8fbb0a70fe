#!/bin/sh
# Checks that the includes of the library follow the layering that src/CMakeLists.txt states on its
# `# layers:` line: the parts (folders of src/) from the lowest to the highest, `<-` between layers, `,` between
# the parts of one layer. A file of a part includes headers of its own layer and of lower ones, never of a
# higher one. It reads the #include lines of src/ and of include/kernelevolve/:
#   "part/x.hpp"          a header of src/part/ belongs to that part;
#   "kernelevolve/x.hpp"  a public header belongs to the part of the one src/PART/.../x.cpp that defines what
#                         it declares (report.hpp: src/search/report.cpp, so search); a public header with no
#                         such file declares interfaces and data that every part shares (device.hpp,
#                         fitness.hpp, mutator.hpp), which any part may include; kernelevolve.hpp (all of
#                         them) is for hosts, the C API and the tool, not for the library.
# Each offending include is printed as FILE:LINE with the parts and layers involved; it exits 1 if there is one.
# Cheap (grep, awk): scripts/ci-extra.sh runs it first.
#
#   scripts/check-layering.sh
set -eu
cd "$(dirname "$0")/.."

layers=$(sed -n 's/^# layers: *//p' src/CMakeLists.txt)
if [ -z "$layers" ]; then
  echo "layering: FAILED: src/CMakeLists.txt has no '# layers:' line to check against"
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The parts and their layers, one "part layer" a line (0: the lowest).
echo "$layers" | awk -F'<-' '{ for (i = 1; i <= NF; ++i) { n = split($i, p, ","); for (j = 1; j <= n; ++j) {
  gsub(/[ \t]/, "", p[j]); if (p[j] != "") print p[j], i - 1 } } }' >"$work/layers"

# Every folder of src/ has its layer.
failed=0
for dir in src/*/; do
  part=$(basename "$dir")
  if ! grep -q "^$part " "$work/layers"; then
    echo "layering: src/$part/ is in no layer of src/CMakeLists.txt's '# layers:' line: add it there"
    failed=1
  fi
done

# The public headers that belong to a part: "x.hpp part", from the one src/PART/.../x.cpp.
for header in include/kernelevolve/*.hpp; do
  name=$(basename "$header" .hpp)
  defined=$(find src -name "$name.cpp" | sort)
  case $(printf '%s' "$defined" | grep -c '^') in
    0) ;;
    1) echo "$name.hpp $(echo "$defined" | cut -d/ -f2)" >>"$work/public" ;;
    *)
      echo "layering: include/kernelevolve/$name.hpp: more than one src/ file is named $name.cpp ($(echo "$defined" | tr '\n' ' ')): its part is not clear"
      failed=1 ;;
  esac
done
touch "$work/public"

# The include lines: "file:line:text".
find src include/kernelevolve -name '*.hpp' -o -name '*.cpp' -o -name '*.h' | sort |
  xargs grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*["<]' >"$work/includes" || true

awk -v layers="$work/layers" -v public="$work/public" '
  BEGIN {
    while ((getline line < layers) > 0) { split(line, f, " "); layer[f[1]] = f[2] }
    while ((getline line < public) > 0) { split(line, f, " "); owner[f[1]] = f[2] }
    bad = 0
  }
  function part_of_file(path,   f, n, name) {
    n = split(path, f, "/")
    if (f[1] == "src") return f[2]
    name = f[n]
    return (name in owner) ? owner[name] : ""
  }
  {
    # file:line:#include "target"
    first = index($0, ":"); file = substr($0, 1, first - 1); rest = substr($0, first + 1)
    second = index(rest, ":"); lineno = substr(rest, 1, second - 1); text = substr(rest, second + 1)
    if (!match(text, /["<][^">]+[">]/)) next
    target = substr(text, RSTART + 1, RLENGTH - 2)
    from = part_of_file(file)
    n = split(target, t, "/")
    if (n < 2) next  # a header beside the file, or the system
    if (t[1] == "kernelevolve") {
      if (t[2] == "kernelevolve.hpp" && (file ~ /^src\// || file ~ /^include\//) && file != "include/kernelevolve/kernelevolve.hpp") {
        printf "%s:%s: includes <%s>, every public header at once: include the ones it uses\n", file, lineno, target
        bad = 1
        next
      }
      if (!(t[2] in owner)) next  # an interface every part may include
      to = owner[t[2]]
    } else if (t[1] in layer) {
      to = t[1]
    } else {
      next  # a third party header (simdjson, sqlite3, llvm/...)
    }
    if (from == "" || !(from in layer)) next
    if (layer[to] > layer[from]) {
      printf "%s:%s: includes %s of part %s (layer %d) from part %s (layer %d), a lower layer\n", file, lineno, \
        target, to, layer[to], from, layer[from]
      bad = 1
    }
  }
  END { exit bad }
' "$work/includes" || failed=1

files=$(cut -d: -f1 "$work/includes" | sort -u | wc -l)
if [ "$failed" -ne 0 ]; then
  echo "layering: FAILED: the includes above run against src/CMakeLists.txt's layers: $layers"
  exit 1
fi
echo "layering: PASSED: the includes of $files files follow src/CMakeLists.txt's layers: $layers"
