"""How often torch.compile's output translates into a first program, and why not (issue 31): each captured output code
(scripts/capture-inductor.py, OUT/<name>.dynamic.py and OUT/index.tsv) translated against its problem's derived
spec (`kernelevolve import FILE -o SPECS/<name> --device cuda --language triton`), without a GPU. Prints a
markdown table of the outcomes and the reasons, grouped by the part that did not translate, and with --list a line
per problem.

    python3 bench/inductor_translate_census.py CAPTURES SPECS [--list]
"""
import collections
import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "pytorch"))
from ke_inductor import Untranslatable, translate  # noqa: E402


def level_of(name, index):
    return index.get(name, "")


def main():
    captures, specs = sys.argv[1], sys.argv[2]
    listing = "--list" in sys.argv
    failed_capture = {}
    index_path = os.path.join(captures, "index.tsv")
    if os.path.exists(index_path):
        for line in open(index_path):
            fields = line.rstrip("\n").split("\t")
            if len(fields) == 5 and fields[2] == "FAILED":
                failed_capture[fields[0]] = fields[3]
    outcomes = {}
    for path in sorted(glob.glob(os.path.join(captures, "*.dynamic.py"))):
        name = os.path.basename(path)[:-len(".dynamic.py")]
        spec_files = glob.glob(os.path.join(specs, name, "*.json"))
        if not spec_files:
            outcomes[name] = ("no spec", "the problem's spec was not derived")
            continue
        with open(spec_files[0]) as f:
            spec = json.load(f)
        code = open(path).read()
        if "\n# ---- next module ----\n" in code:
            outcomes[name] = ("graph break", f"{code.count('# ---- next module ----') + 1} graphs")
            continue
        try:
            result = translate(code, spec)
            kernels = len(set(re.findall(r'"kernel": "([^"]+)"', result["source"])))  # not the helpers
            libraries = re.findall(r'"library": "([^"]+)"', result["source"])
            outcomes[name] = ("translated", f"{kernels} kernel(s)" + (f", {', '.join(libraries)}" if libraries else ""))
        except Untranslatable as e:
            outcomes[name] = ("untranslatable", str(e))
        except Exception as e:  # a translator bug is counted and named, not hidden
            outcomes[name] = ("translator error", f"{type(e).__name__}: {e}")
    for name, why in failed_capture.items():
        outcomes.setdefault(name, ("capture failed", why))
    counts = collections.Counter(kind for kind, _ in outcomes.values())
    print(f"{len(outcomes)} problems: " + ", ".join(f"{n} {k}" for k, n in counts.most_common()) + "\n")
    reasons = collections.Counter()
    for kind, why in outcomes.values():
        if kind != "translated":
            # The reason without the kernel's or buffer's own name, so that alike cases group.
            reasons[(kind, re.sub(r"\b(triton_\w+|buf\d+|arg\d+_\d+|s\d+)\b", "…", why)[:200])] += 1
    print("| outcome | why | problems |\n| --- | --- | --- |")
    for (kind, why), n in reasons.most_common():
        print(f"| {kind} | {why.replace('|', '/')} | {n} |")
    if listing:
        print()
        for name, (kind, why) in sorted(outcomes.items()):
            print(f"{name}\t{kind}\t{why}")


if __name__ == "__main__":
    main()
