#!/bin/bash
# Derives the signature of every problem of a KernelBench checkout, as `kernelevolve import` does, and says
# how each went: derived (on the meta device, or by a real call and why) or refused and why, the seconds it
# took, and the signature. Nothing runs at the problems' size unless the meta device cannot run a module.
#
#   bench/kernelbench_import.sh KERNELBENCH_DIR [JOBS]     (KERNELBENCH_DIR holds level1/, level2/, level3/)
#
# Python is $KE_PYTHON, else /usr/bin/python3. Writes one line per problem and a summary on stdout; the
# describe outputs are kept in $KE_IMPORT_OUT (default: a temporary folder, named at the end).
set -u
dir=${1:?usage: bench/kernelbench_import.sh KERNELBENCH_DIR [JOBS]}
jobs=${2:-2}
here=$(cd "$(dirname "$0")/.." && pwd)
python=${KE_PYTHON:-/usr/bin/python3}
out=${KE_IMPORT_OUT:-$(mktemp -d /tmp/kernelbench_import.XXXXXX)}
mkdir -p "$out"
export here python out
one() {
  f=$1
  name=$(basename "$(dirname "$f")")_$(basename "$f" .py)
  start=$(date +%s%N)
  PYTHONPATH="$here/src/pytorch" timeout 600 "$python" -m ke_bridge describe --module "$f" --device cpu >"$out/$name.json" 2>"$out/$name.err"
  echo "$? $(( ($(date +%s%N) - start) / 1000000 ))" >"$out/$name.time"
}
export -f one
ls "$dir"/level1/*.py "$dir"/level2/*.py "$dir"/level3/*.py | xargs -P "$jobs" -I{} bash -c 'one {}'
"$python" - "$out" <<'PY'
import glob, json, os, statistics, sys
out = sys.argv[1]
rows = []
for t in sorted(glob.glob(os.path.join(out, "*.time"))):
    base = t[:-5]
    rc, ms = open(t).read().split()
    try:
        d = json.load(open(base + ".json"))
    except Exception:
        d = {"error": f"no answer (exit {rc}): " + open(base + ".err").read().strip()[-200:]}
    rows.append((os.path.basename(base), int(ms) / 1000, d))
for name, s, d in rows:
    if "error" in d:
        print(f"{name}\trefused\t{s:.1f}s\t{d['error'][:300]}")
    else:
        sig = "; ".join(f"{p['name']}{p['shape']}" for p in d["params"] if p["role"] in ("in", "out") and "state" not in p)
        weights = sum(1 for p in d["params"] if "state" in p)
        print(f"{name}\t{d['derivation'][:120]}\t{s:.1f}s\t{sig}\t+{weights} weights")
ok = [r for r in rows if "error" not in r[2]]
print(f"\n{len(ok)} of {len(rows)} derived, {sum(1 for r in ok if r[2]['derivation'] == 'meta')} on the meta device; "
      f"{len(rows) - len(ok)} refused")
for level in ("level1", "level2", "level3"):
    ts = [s for n, s, _ in rows if n.startswith(level)]
    if ts:
        print(f"{level}: median {statistics.median(ts):.1f} s, max {max(ts):.1f} s")
print(f"outputs in {out}")
PY
