#!/usr/bin/env python3
"""Regenerates tests/fuzz/corpus/spec/problem_*.json from problems/*/*/*.json.

Each seed is the problem's spec with its "file" references replaced by a short inline "source": the
loader treats a source as opaque text, so the fuzzer needs no files, and short seeds keep its inputs
small. Run from anywhere; it rewrites only the problem_* seeds (the hand-written ones stay).
"""
import json
import pathlib

root = pathlib.Path(__file__).resolve().parents[2]
out = root / "tests" / "fuzz" / "corpus" / "spec"
out.mkdir(parents=True, exist_ok=True)
for old in out.glob("problem_*.json"):
    old.unlink()
for path in sorted(root.glob("problems/*/*/*.json")):
    spec = json.loads(path.read_text())
    for key in ("reference", "seed"):
        ref = spec.get(key)
        if isinstance(ref, dict) and "file" in ref:
            del ref["file"]
            ref["source"] = f"/* {key} of {spec.get('name', '?')} */"
    spec.pop("notes", None)  # prose: nothing for the loader to parse
    level, problem = path.parts[-3], path.parts[-2]
    name = f"problem_{level}_{problem}_{path.stem}.json"
    (out / name).write_text(json.dumps(spec, separators=(",", ":")) + "\n")
