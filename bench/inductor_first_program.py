"""Makes a spec whose seed is the program translated from Inductor's output code (issue 31's first program,
src/pytorch/ke_inductor): the spec `kernelevolve import` derived, with the translation's source as its
seed, its tunables, and its constraints. Prints what was translated, or why not (exit 3).

    python3 bench/inductor_first_program.py SPEC.json OUTPUT_CODE.py OUT.json
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "pytorch"))
import ke_inductor  # noqa: E402


def main():
    spec_path, code_path, out_path = sys.argv[1:4]
    with open(spec_path) as f:
        spec = json.load(f)
    with open(code_path) as f:
        code = f.read()
    try:
        result = ke_inductor.translate(code, spec)
    except ke_inductor.Untranslatable as e:
        print(f"untranslatable: {e}")
        sys.exit(3)
    source_path = os.path.splitext(out_path)[0] + "_program.py"
    with open(source_path, "w") as f:
        f.write(result["source"])
    spec["seed"] = {"file": os.path.basename(source_path)}
    spec["tunables"] = result["tunables"]
    spec["constraints"] = spec.get("constraints", []) + result.get("constraints", [])
    # The derived one-kernel launch reads its own BLOCK, which the translation's tunables replace; every step of
    # the plan gives its grid, so the spec's launch is only the (unused) default.
    spec["launch"] = {"grid": ["1", "1", "1"], "block": ["1", "1", "1"], "shared_bytes": "0"}
    # The reference module's path is relative to the derived spec's folder.
    ref = spec.get("reference", {})
    if "pytorch" in ref and not os.path.isabs(ref["pytorch"]):
        ref["pytorch"] = os.path.relpath(os.path.join(os.path.dirname(os.path.abspath(spec_path)), ref["pytorch"]),
                                         os.path.dirname(os.path.abspath(out_path)))
    with open(out_path, "w") as f:
        json.dump(spec, f, indent=1)
    print(f"translated: {result['notes']}; tunables {result['tunables']}")


if __name__ == "__main__":
    main()
