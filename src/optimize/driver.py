# The model optimizer's driver (after capture.py, cut.py and profile.py, in one script: kOptimizeScript), run by
# src/optimize/optimize.cpp with the interpreter that imports torch:
#   python3 -c SCRIPT --model MODEL.py --device cpu|cuda[:N] --out DIR [--min-share F] [--budget SEC]
# Steps 1-3 of issue 30 (profile, cut, rank); it writes each region as a problem file, its weights beside it, and
# manifest.json under DIR, and prints that manifest as one JSON object on stdout: the report. Or
# {"error": ..., "kind": ...} naming why the model cannot be optimized. What the model prints goes to stderr.
import argparse
import json
import os
import sys

import torch

MANIFEST = "manifest.json"
TOOL = "kernelevolve optimize"
NEXT = ("Steps 4-6 of issue 30 come next and are not built yet: evolve each kept region (each is a problem: "
        "kernelevolve run DIR/region_HASH.py), put back only the winners over eager and torch.compile, and prove "
        "the model's speedup end to end (parity, engagement, an interleaved A/B). The manifest holds what they "
        "need: each region's file, hash, count, share, and every occurrence's inputs, outputs and weights by "
        "their names in the model's graph.")


def prepare_out(directory, new_files):
    """The output folder: made if absent; an earlier optimize's (its manifest names it ours) has its own files
    replaced and its stale regions removed; anything else in it is the user's and is never overwritten."""
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise Refusal("out_dir", f"--out {directory} is a file, not a folder")
    os.makedirs(directory, exist_ok=True)
    ours = set()
    manifest = os.path.join(directory, MANIFEST)
    if os.path.exists(manifest):
        try:
            with open(manifest) as f:
                earlier = json.load(f)
        except (OSError, ValueError):
            earlier = {}
        if not isinstance(earlier, dict) or earlier.get("tool") != TOOL:
            raise Refusal("out_dir", f"{manifest} exists and is not an earlier optimize's: not overwriting it "
                                     "(choose another --out)")
        ours = {MANIFEST}
        for r in earlier.get("regions", []):
            ours |= {r.get("file"), r.get("weights_file")}
    foreign = sorted(set(os.listdir(directory)) - ours)
    if foreign:
        raise Refusal("out_dir", f"{directory} holds {', '.join(foreign[:5])}{' ...' if len(foreign) > 5 else ''}, "
                                 "which an earlier optimize did not write: not overwriting it (choose another --out)")
    for name in sorted(ours - set(new_files) - {MANIFEST, None}):
        os.remove(os.path.join(directory, name))


def occurrence_json(problem, occ, capture):
    return {"inputs": [a.name for a in occ.inputs], "outputs": [o.name for o in occ.outputs],
            "weights": occurrence_weights(problem, occ, capture), "nodes": [n.name for n in occ.nodes]}


def weights_json(problem, occ, capture):
    """The region's state dict: each key, its kind (parameter, buffer, constant: a tensor the forward made, its value
    the file's own), its shape and dtype, and its key in the model (the first occurrence's; none for a constant)."""
    out = []
    for name, w in zip(problem.weight_names, occ.weights):
        t, kind = attribute(capture, w.target), capture.kind.get(w.target, "buffer")
        out.append({"name": name, "kind": kind, "model_name": None if kind == "constant" else capture.fqn.get(w.target),
                    "shape": list(t.shape), "dtype": dtype_name(t.dtype)})
    for name, i, _ in problem.modules:
        target = occ.nodes[i].target
        module = capture.gm.get_submodule(target)
        parameters = dict(module.named_parameters())
        for key, t in module.state_dict().items():
            out.append({"name": f"{name}.{key}", "kind": "parameter" if key in parameters else "buffer",
                        "model_name": f"{target}.{key}", "shape": list(t.shape), "dtype": dtype_name(t.dtype)})
    return out


def tensor_json(name, meta):
    return {"name": name, "shape": meta["shape"], "dtype": meta["dtype"]}


def optimize(args, steps):
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise Refusal("device", f"--device {args.device}: this PyTorch ({torch.__version__}) sees no CUDA GPU")
    if device.type not in ("cpu", "cuda"):
        raise Refusal("device", f"--device {args.device}: the optimizer runs on cpu or cuda[:N]")
    module = load_model_file(args.model)
    size_note = check_size(module, device)
    model, inputs = build(module, device)

    with timed(steps, "profile"):
        profile = profile_model(model, inputs, device, args.budget)

    with timed(steps, "cut"):
        capture = capture_model(model, inputs)
        occurrences, problems = cut(capture)
        for p in problems:  # the forward first: it names the weights the files and the manifest use
            p.source = forward_source(p, capture)
        prepare_out(args.out, [n for p in problems for n in (p.file, p.weights_file)])
        for p in problems:
            if not write_problem(p, capture, args.model, args.out):
                p.weights_file = None

    with timed(steps, "rank"):
        ranking = rank(problems, args.out, device, args.min_share, args.budget, model, inputs)

    index = {id(occ): (p, k) for p in problems for k, occ in enumerate(p.occurrences)}
    placeholders = [n for n in capture.gm.graph.nodes if n.op == "placeholder"]
    regions = []
    for p in sorted(problems, key=lambda p: -p.share):
        first = p.first
        regions.append({
            "name": p.name, "hash": p.hash, "file": p.file, "weights_file": p.weights_file, "ops": p.ops,
            "anchor": p.anchor, "count": len(p.occurrences), "time_us": p.time_us, "spread_us": p.spread_us,
            "share": p.share, "kept": p.kept, "reason": p.reason,
            "inputs": [tensor_json(n, capture.meta[a.name]) for n, a in zip(p.input_names, first.inputs)],
            "outputs": [tensor_json(o.name, capture.meta[o.name]) for o in first.outputs],
            "weights": weights_json(p, first, capture),
            "occurrences": [occurrence_json(p, occ, capture) for occ in p.occurrences],
        })
    notes = [n for n in [size_note] if n] + capture.notes
    return {
        "tool": TOOL, "version": 1, "model": os.path.abspath(args.model), "device": str(device),
        "torch": torch.__version__, "out_dir": os.path.abspath(args.out),
        "manifest": os.path.abspath(os.path.join(args.out, MANIFEST)),
        "seeds": {"model": MODEL_SEED, "inputs": INPUTS_SEED}, "min_share": args.min_share,
        "capture": capture.method,
        "graph": {"operators": sum(1 for n in capture.gm.graph.nodes
                                   if n.op in ("call_function", "call_method", "call_module")),
                  "inputs": [tensor_json(n.name, capture.meta[n.name]) for n in placeholders],
                  "outputs": capture.output_names, "output_is_tuple": capture.output_is_tuple},
        "profile": profile,
        "rank": ranking,
        "regions": regions,
        "order": [{"region": index[id(occ)][0].name, "occurrence": index[id(occ)][1]} for occ in occurrences],
        "steps_s": steps,
        "notes": notes,
        "next": NEXT.replace("DIR", os.path.abspath(args.out)),
    }


def main():
    parser = argparse.ArgumentParser(prog="kernelevolve-optimize")
    parser.add_argument("--model", required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", required=True)
    parser.add_argument("--min-share", type=float, default=0.01)
    parser.add_argument("--budget", type=float, default=2.0, help="seconds of timing for the model, and for the regions")
    args = parser.parse_args()
    # The report is the only thing on stdout: what the model or PyTorch prints goes to stderr.
    report_out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    steps = {}
    try:
        with torch.no_grad():
            report = optimize(args, steps)
        text = json.dumps(report, indent=1)
        with open(report["manifest"], "w") as f:
            f.write(text + "\n")
    except Refusal as e:
        text = json.dumps({"error": str(e), "kind": e.kind, "steps_s": steps})
    except Exception as e:  # a bug of the optimizer's, not the model's: said as one, with where it happened
        import traceback
        where = traceback.extract_tb(e.__traceback__)[-1]
        traceback.print_exc()
        text = json.dumps({"error": f"the optimizer failed (a bug: please report it): {type(e).__name__}: {e} "
                                    f"(line {where.lineno}, in {where.name})", "kind": "internal", "steps_s": steps})
    report_out.write(text + "\n")
    report_out.flush()


main()
