# The model optimizer's driver (after capture.py, cut.py and profile.py), run by src/optimize/optimize.cpp with the
# interpreter that imports torch, as `python -m ke_optimize` would run it (the package is built into the library:
# src/core/python_package.hpp):
#   python3 -m ke_optimize --model MODEL.py --device cpu|cuda[:N] --out DIR [--min-share F] [--budget SEC]
#                          [--cli KERNELEVOLVE] [--package-dir DIR] [--no-evolve] [--max-evals N] [--total-evals N]
#                          [--run-option ARG]... [--timeout SEC] [--devices D1,D2,...]
#                          [--stage all|evolve|finish --session ID [--rank R]]
# The six steps of issue 30: profile, cut, rank (each region written as a problem file, its weights beside it, and
# manifest.json under DIR); evolve each kept region (`kernelevolve run` on its file, every run in DIR/optimize.db,
# a region's run found again there by its hash); put back the winners (DIR/optimized.py); prove the model's speedup
# (parity, engagement, an interleaved A/B whose control, the rebuilt graph with nothing put back, tells what the
# kernels give from what the rebuild gives). It prints the manifest as one JSON object on stdout: the report. Or
# {"error": ..., "kind": ...} naming why the model cannot be optimized. What the model prints goes to stderr.
# Step 4 runs as many regions at once as --devices names devices (one region per device at a time; a device named
# twice takes two). Under MPI (optimize.cpp) the steps are split over processes that share DIR: rank 0 runs steps
# 1-3 (--no-evolve); then every rank runs --stage evolve, each region evolved by the rank that claims it first
# (DIR/evolve_HASH.SESSION.claim.json, made exclusively); then rank 0 runs --stage finish: step 4's results are the
# session's records, and steps 5-6 follow. Both later stages take steps 1 and 3 from the manifest (the cut is
# redone: it is what the hashes name, and gives the same regions), so that every rank works on the same ranking.
import argparse
import contextlib
import hashlib
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import threading
import time
import types

import torch

from .capture import (AUTOCAST_DTYPES, INPUTS_SEED, MODEL_SEED, Refusal, autocast_state, build, capture_model,
                      check_size, dtype_name, exit_call, first_line, load_model_file, tensors_in, timed)
from .cut import (OPTIMIZED, OPTIMIZED_WEIGHTS, attribute, cut, forward_source, occurrence_weights, optimized_source,
                  region_function, region_weights, write_optimized, write_problem)
from .profile import interleaved, load_region, profile_model, rank, ratio, verdict

MANIFEST = "manifest.json"
TOOL = "kernelevolve optimize"
DATABASE = "optimize.db"  # every region's run: what a later optimize resumes from
CHART = "time_by_region.svg"
STARTED = time.monotonic()  # --timeout is for the whole process: steps 1-3 spend of it too
MIN_RUN_S = 30.0  # a region's run given less than this would be killed in its first evaluation
# What optimize writes beside the regions: never the user's files, and kept from one optimize to the next (the
# database above all), where the regions' own files are replaced.
OWN_FILES = {DATABASE, DATABASE + "-wal", DATABASE + "-shm", DATABASE + "-journal", OPTIMIZED, OPTIMIZED_WEIGHTS,
             "optimized.pt2", CHART, "__pycache__"}
NO_EVOLVE_NEXT = ("Steps 4-6 were not run (--no-evolve): evolve each kept region (each is a problem: "
                  "kernelevolve run DIR/region_HASH.py), put back only the winners over eager and torch.compile, and "
                  "prove the model's speedup end to end (parity, engagement, an interleaved A/B); optimize without "
                  "--no-evolve does all three.")


def evolve_file(directory, problem):
    return os.path.join(directory, f"evolve_{problem.hash}.json")


REGION_FILE = re.compile(r"region_[0-9a-f]{16}\.(py|pt)")  # what step 2 writes: a region's file and its weights


def model_digest(path):
    """The model file's SHA-256: with its path, what names the model whose output a folder holds (manifest.json)."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def same_model(earlier, model_path, digest):
    """Whether an earlier optimize's manifest is this model's: the same file (the model, edited or not), or the same
    text at another path (its folder moved). A manifest from before the digest was kept is judged by its path."""
    path = earlier.get("model")
    if isinstance(path, str) and os.path.realpath(path) == os.path.realpath(model_path):
        return True
    return earlier.get("model_sha256") is not None and earlier.get("model_sha256") == digest


def prepare_out(directory, new_files, model_path, digest):
    """The output folder: made if absent. An earlier optimize's of this model (same_model) has its stale region files
    removed (those its manifest names that this run does not write; nothing else), the rest of its own kept for this
    run to replace or resume from. A folder of another model's optimize is refused, as is one holding anything an
    optimize did not write: optimize never deletes or overwrites what is not its own output for this model."""
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
        if not same_model(earlier, model_path, digest):
            raise Refusal("out_dir", (
                f"--out {directory} holds the optimize output of another model, {earlier.get('model') or 'unnamed'} "
                f"(its manifest.json, region files and optimized model): not replacing it with {model_path}'s "
                f"(choose another --out; the default is {os.path.splitext(os.path.basename(model_path))[0]}"
                ".optimize beside the model)"))
        ours = {MANIFEST}
        for r in earlier.get("regions", []):
            # Only a name step 2 writes, in this folder: a manifest edited by hand (or another tool's) cannot make
            # optimize delete a file of the user's.
            ours |= {name for name in (r.get("file"), r.get("weights_file"))
                     if isinstance(name, str) and REGION_FILE.fullmatch(name)}
    listed = set(os.listdir(directory))
    own = OWN_FILES | {n for n in listed if n.startswith("evolve_") and n.endswith(".json")} if ours else set()
    foreign = sorted(listed - ours - own)
    if foreign:
        raise Refusal("out_dir", f"{directory} holds {', '.join(foreign[:5])}{' ...' if len(foreign) > 5 else ''}, "
                                 "which an earlier optimize did not write: not overwriting it (choose another --out)")
    for name in sorted(ours - set(new_files) - {MANIFEST}):
        path = os.path.join(directory, name)
        if os.path.isfile(path) or os.path.islink(path):
            os.remove(path)


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


def region_evals(args, problems):
    """Each kept region's evaluations: --max-evals each, or --total-evals split by expected gain (the region's share
    of the model's time), at least two each."""
    kept = [p for p in problems if p.kept]
    if args.total_evals > 0:
        total_share = sum(p.share for p in kept) or 1.0
        return {p.hash: max(2, int(round(args.total_evals * p.share / total_share))) for p in kept}
    return {p.hash: args.max_evals for p in kept}


def run_in_database(cli, database, run, name):
    """Whether the database holds run `run` of the problem `name`, finished. Asked of `kernelevolve show --runs`:
    the database's schema is the store's (src/store/), not ours to read."""
    if not os.path.exists(database):
        return False
    try:
        done = subprocess.run([cli, "show", database, "--runs"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    if done.returncode != 0:
        return False
    for line in done.stdout.splitlines():
        try:
            info = json.loads(line)
        except ValueError:
            continue
        if info.get("id") == run and info.get("problem") == name:
            return info.get("finished_at") is not None
    return False


def last_lines(text, n=3):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " / ".join(lines[-n:])[-600:]


def devices_of(args):
    """The devices step 4 evolves on, one region each at a time: --devices, else the one --evolve-device or
    --device. A device named twice takes two regions at once."""
    if args.devices:
        devices = []
        for d in (d.strip() for d in args.devices.split(",")):
            if not d:
                raise Refusal("device", f"--devices {args.devices}: an empty item")
            # cuda:all: each GPU this PyTorch sees, a region on each at a time
            devices += [f"cuda:{i}" for i in range(torch.cuda.device_count())] if d == "cuda:all" else [d]
        if not devices:
            raise Refusal("device", f"--devices {args.devices}: this PyTorch ({torch.__version__}) sees no CUDA GPU")
        return devices
    return [args.evolve_device or args.device]


def resumed(args, p):
    """The record of an earlier optimize's run of this region, marked resumed, where the database holds that run
    finished; else None."""
    record = evolve_file(args.out, p)
    if not os.path.exists(record):
        return None
    with open(record) as f:
        earlier = json.load(f)
    name = os.path.splitext(p.file)[0]
    if earlier.get("status") != "evolved" or not run_in_database(args.cli, os.path.join(args.out, DATABASE),
                                                                    earlier["run"], name):
        return None
    return dict(earlier, status="resumed", seconds=0.0,
                note=f"evolved by an earlier optimize (run {earlier['run']} of {DATABASE}): not again")


def claim_file(directory, problem, session):
    return os.path.join(directory, f"evolve_{problem.hash}.{session}.claim.json")


def claim(args, p):
    """Whether this process takes region `p` in its session: the first to create its claim file does (O_EXCL, so
    that two ranks never evolve one region, and none is left out while a rank lives)."""
    try:
        fd = os.open(claim_file(args.out, p, args.session), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        json.dump({"rank": args.rank, "pid": os.getpid()}, f)
    return True


def evolve(args, problems, deadline):
    """Step 4: `kernelevolve run` on each kept region's file, largest share first, every run in DIR/optimize.db, as
    many at once as there are devices (devices_of), each run on its own device. A region whose run an earlier
    optimize recorded (evolve_HASH.json, the run found in the database) is not evolved again. A run that fails or
    is refused is recorded with why; the next region goes on. Under --stage evolve a region is this process's only
    where it claims it when it is ready for the next one (the others are left as None: other ranks')."""
    evals = region_evals(args, problems)
    for p in problems:
        p.evolve = None
    # Largest share first: what a region can give the model is bounded by its share, and a --timeout that ends the
    # step early should have spent it where the most was to gain. The graph's order is no measure of that.
    queue = sorted((p for p in problems if p.kept), key=lambda p: -p.share)
    lock = threading.Lock()

    def next_region():
        while True:
            with lock:
                if not queue:
                    return None
                p = queue.pop(0)
            if args.stage == "evolve" and not claim(args, p):
                continue
            earlier = resumed(args, p)
            if earlier is None:
                return p
            p.evolve = earlier

    def serve(device):
        while (p := next_region()) is not None:
            evolve_region(args, p, evals[p.hash], device, deadline)

    devices = devices_of(args)
    if len(devices) == 1:
        serve(devices[0])
        return
    # A thread per device, each taking the next region in order of share: a child process does the work.
    threads = [threading.Thread(target=serve, args=(d,)) for d in devices]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def collect(args, problems):
    """Step 4 under MPI, on rank 0 after every rank's --stage evolve: each kept region's result is what the rank that
    claimed it in this session found: its record of this session, or an earlier optimize's run, resumed."""
    for p in problems:
        p.evolve = None
        if not p.kept:
            continue
        claimed = claim_file(args.out, p, args.session)
        if not os.path.exists(claimed):
            p.evolve = {"status": "failed", "reason": "not evolved: no rank claimed it (did every rank run?)"}
            continue
        with open(claimed) as f:
            rank = json.load(f).get("rank")
        os.remove(claimed)
        record = evolve_file(args.out, p)
        earlier = None
        if os.path.exists(record):
            with open(record) as f:
                earlier = json.load(f)
        if earlier is not None and earlier.get("session") == args.session:
            p.evolve = earlier
        else:
            p.evolve = resumed(args, p) or {"status": "failed", "rank": rank, "reason": (
                f"not evolved: rank {rank} claimed it and wrote no result (did the rank die?)")}


def prove_reserve(timeout):
    """The part of --timeout kept from step 4 for steps 5-6: a fifth, between 60 s and 10 minutes."""
    return min(600.0, max(60.0, timeout / 5))


def evolve_region(args, p, evaluations, device, deadline):
    """One region's `kernelevolve run` on `device`, its result recorded in evolve_HASH.json and on p.evolve."""
    database = os.path.join(args.out, DATABASE)
    record = evolve_file(args.out, p)
    command = [args.cli, "run", os.path.join(args.out, p.file), "--device", device, "--db", database,
               "--max-evals", str(evaluations), "--json"] + list(args.run_option)
    start, started_at = time.perf_counter(), time.time()
    left = deadline - time.monotonic()
    if left < MIN_RUN_S:
        return recorded(args, p, record, {
            "status": "failed", "device": device, "evaluations": evaluations, "seconds": 0.0, "reason": (
                f"not evolved: --timeout {args.timeout:.0f} s left {max(0.0, left):.0f} s for step 4 when its turn "
                f"came (steps 5-6 keep {prove_reserve(args.timeout):.0f} s); the next optimize evolves it")})
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=left)
        out, err, rc = done.stdout, done.stderr, done.returncode
    except subprocess.TimeoutExpired as e:
        out, err, rc = e.stdout or "", f"the run took longer than the optimizer's time left ({left:.0f} s)", -1
        out = out.decode() if isinstance(out, bytes) else out
    except OSError as e:
        out, err, rc = "", f"cannot start {args.cli}: {e}", -1
    seconds = round(time.perf_counter() - start, 3)
    try:
        report = json.loads(out) if out.strip() else None
    except ValueError:
        report = None
    # When, by the clock: runs on several devices or ranks overlap, which these show.
    result = {"command": shlex.join(["kernelevolve"] + command[1:]), "rc": rc, "device": device,
              "evaluations": evaluations, "seconds": seconds, "started_at": round(started_at, 3),
              "finished_at": round(time.time(), 3)}
    if rc == 0 and report and report.get("best"):
        best = report["best"]
        baselines = report.get("baselines") or {}
        eager, compiled = baselines.get("eager") or {}, baselines.get("compile") or {}
        result.update({
            "status": "evolved", "run": report["run"], "node": best["node"],
            "evaluated": report.get("evaluations"), "stop_reason": report.get("stop_reason"),
            "tokens": report.get("tokens", 0), "cost_usd": report.get("cost_usd", 0.0),
            "best_us": first(best.get("time_us")), "eager_us": first(eager.get("time_us")),
            "compile_us": first(compiled.get("time_us")),
            "speedup_vs_eager": best.get("speedup_vs_eager"), "speedup_vs_compile": best.get("speedup_vs_compile"),
            "speedup_vs_best_baseline": best.get("speedup_vs_best_baseline"),
            "precision": (report.get("precision") or {}).get("policy"),
            "eager_reason": eager.get("reason"),
            "compile_reason": compiled.get("reason") or ("" if compiled else "the run measured no torch.compile"),
            # where the run's time went: its problem described and captured, its start, node 0, baselines, search
            "steps_s": report.get("steps_s"),
        })
    else:
        why = (report or {}).get("stop_reason") or last_lines(err) or f"exit {rc}"
        result.update({"status": "failed", "reason": f"not evolved: `kernelevolve run` exited {rc}: {why}"})
    recorded(args, p, record, result)


def recorded(args, p, record, result):
    """`result` as region p's evolve record: on p.evolve and in evolve_HASH.json (under MPI rank 0 reads it there),
    with this process's session and rank where it has them."""
    if args.session:
        result.update(session=args.session, rank=args.rank)
    with open(record, "w") as f:
        json.dump(result, f, indent=1)
    p.evolve = result


def first(values):
    return values[0] if isinstance(values, list) and values else None


def judge(p):
    """Step 5's rule: a region is put back only where its best beat eager and torch.compile on that region (eager
    alone where torch.compile was not measured, said so)."""
    e = p.evolve
    if e is None:
        return False, "not evolved: " + p.reason
    if e["status"] not in ("evolved", "resumed"):
        return False, e["reason"]
    vs_eager, vs_compile = e.get("speedup_vs_eager"), e.get("speedup_vs_compile")
    if vs_eager is None:
        return False, f"eager was not measured on the region ({e.get('eager_reason') or 'no reason given'})"
    if vs_eager <= 1:
        return False, f"its best is {vs_eager:.3f}x eager's speed on the region: not faster"
    if vs_compile is None:
        return True, (f"{vs_eager:.3f}x over eager on the region; torch.compile not measured "
                      f"({e.get('compile_reason') or 'no reason given'}): judged against eager alone")
    if vs_compile <= 1:
        return False, f"{vs_eager:.3f}x over eager but {vs_compile:.3f}x torch.compile's speed: not faster than compile"
    # The mark (issue 50): the faster of eager and compile on each workload, under the run's precision policy.
    vs_mark = e.get("speedup_vs_best_baseline")
    if vs_mark is not None and vs_mark <= 1:
        return False, (f"{vs_eager:.3f}x over eager and {vs_compile:.3f}x over torch.compile, but {vs_mark:.3f}x the "
                       "faster of the two on each workload: not faster than the mark")
    return True, f"{vs_eager:.3f}x over eager and {vs_compile:.3f}x over torch.compile on the region" + (
        "" if vs_mark is None else f", {vs_mark:.3f}x over the faster of the two per workload")


def matches(expected, got, precision=None):
    """Whether the optimized model's output `got` is the model's `expected` within the tolerance of the dtypes the
    model computes in (`precision`; without one, the output's own dtype's)."""
    atol, rtol = (precision["atol"], precision["rtol"]) if precision else tolerance(expected.dtype)
    return expected.shape == got.shape and expected.dtype == got.dtype and \
        bool(torch.allclose(got.float(), expected.float(), atol=atol, rtol=rtol))


def tolerance(dtype):
    """The model's dtype's tolerance, KernelBench's: 1e-4 for fp32 (and wider), 1e-2 for fp16 and bf16."""
    return (1e-2, 1e-2) if dtype in (torch.float16, torch.bfloat16) else (1e-4, 1e-4)


FLOATS = ("f16", "bf16", "f32", "f64")


def precision_of(capture, args):
    """The dtypes the model computes in (every floating-point value of its graph: inputs, weights, intermediates), and
    the tolerance its parity is proved at: KernelBench's for the narrowest of them (1e-2 where any value is bf16 or
    fp16: a model under autocast whose output is f32 computed through bf16 is checked at bf16's), with how autocast
    came in."""
    dtypes = sorted({m["dtype"] for m in capture.meta.values() if m.get("dtype") in FLOATS}, key=FLOATS.index)
    narrow = [d for d in dtypes if d in ("f16", "bf16")]
    atol, rtol = tolerance(torch.bfloat16 if narrow else torch.float32)
    autocast = None
    if args.autocast:
        autocast = f"the model called under torch.autocast({autocast_device(args)!r}, dtype={args.autocast}) " \
                   "(--autocast), its casts written into the graph"
    elif any(n.startswith("torch.autocast written out") for n in capture.notes):
        autocast = "torch.autocast in the model's forward, its casts written into the graph"
    text = (f"the model computes in {', '.join(dtypes) or 'no floating-point dtype'}"
            + (f" ({autocast})" if autocast else "")
            + f"; parity at atol {atol:g}, rtol {rtol:g} (KernelBench's for {narrow[0] if narrow else 'f32'}); "
            "each region's run checks at its outputs' dtype's tolerance")
    return {"dtypes": dtypes, "atol": atol, "rtol": rtol, "autocast": args.autocast or None, "text": text}


def region_dtypes(p, capture):
    """The dtypes of a region's inputs, outputs and weights, in that order of first appearance."""
    seen = []
    values = [capture.meta[a.name]["dtype"] for a in p.first.inputs] + \
        [capture.meta[o.name]["dtype"] for o in p.first.outputs] + [w["dtype"] for w in weights_json(p, p.first, capture)]
    for d in values:
        if d not in seen:
            seen.append(d)
    return seen


def autocast_device(args):
    return "cuda" if args.device.startswith("cuda") else "cpu"


@contextlib.contextmanager
def autocast_of(args):
    """optimize's --autocast: everything the optimizer runs of the model (its profile, capture, the regions' ranking,
    the proof) runs under torch.autocast on the model's device type, as the user's call of the model does. Refused
    where this PyTorch's autocast does not take the dtype on that device (torch 1.13's CPU autocast: bf16 alone; it
    would warn and compute in f32)."""
    if not args.autocast:
        yield
        return
    if args.autocast not in AUTOCAST_DTYPES:
        raise Refusal("device", f"--autocast {args.autocast}: bf16 or fp16")
    device_type, dtype = autocast_device(args), AUTOCAST_DTYPES[args.autocast]
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "CPU Autocast only supports dtype of torch.bfloat16"
        try:
            context = torch.autocast(device_type, dtype=dtype)
            context.__enter__()
        except RuntimeError as e:  # torch 1.13's CPU autocast refuses any dtype but bf16
            raise Refusal("device", f"--autocast {args.autocast}: this PyTorch's ({torch.__version__}) autocast on "
                                    f"{device_type} does not take {args.autocast}: {first_line(e)}")
        try:
            if autocast_state() != (device_type, dtype):
                raise Refusal("device", f"--autocast {args.autocast}: this PyTorch's ({torch.__version__}) autocast "
                                        f"on {device_type} does not take {args.autocast} (it would compute in f32); "
                                        + ("CPU autocast takes bf16" if device_type == "cpu" else ""))
            yield
        finally:
            context.__exit__(None, None, None)


def put_back_and_prove(args, module, model, inputs, capture, occurrences, problems, device, steps):
    """Steps 5 and 6: the winners' operators put back in the captured graph (DIR/optimized.py), those slower than
    their own code in this process taken out again (in_model), then the optimized model imported as a user would and
    checked: parity with eager on fresh inputs, every operator engaged, an interleaved A/B against eager (and
    torch.compile against compile of the optimized where it exists, its guards stepping aside under compile where
    that is faster)."""
    def unavailable(why):
        steps.setdefault("put_back", 0.0)
        steps.setdefault("prove", 0.0)
        for p in problems:
            if p.put_back:
                p.put_back, p.put_back_reason = False, f"a winner, not put back: {why}"
        return {"status": "unavailable", "reason": why, "regions": []}

    if args.no_put_back:
        return unavailable(args.no_put_back)
    with timed(steps, "put_back"):
        try:
            if args.package_dir and args.package_dir not in sys.path:
                sys.path.insert(0, args.package_dir)
            import kernelevolve.torch as ket
            ket.Guarded  # an older package has no guard
        except Exception as e:
            return unavailable(f"kernelevolve.torch does not load in this Python ({type(e).__name__}: "
                               f"{first_line(e)})")
        winners = []
        database = os.path.join(args.out, DATABASE)
        for p in problems:
            if not p.put_back:
                continue
            try:
                op = ket.load(database, run=p.evolve["run"], node=p.evolve["node"], device=str(device))
            except Exception as e:
                p.put_back, p.put_back_reason = False, f"a winner whose operator does not load: {first_line(e)}"
                continue
            function, why = region_function(p, op.signature, f"{p.name}_original")
            if function is None:
                p.put_back, p.put_back_reason = False, f"a winner, not put back: {why}"
                continue
            p.operator = op
            winners.append((p, {"signature": op.signature, "database": DATABASE, "run": p.evolve["run"],
                                "node": p.evolve["node"], "device_kind": op.program.device_kind,
                                "function": function}))
        path, optimized, guards = optimized_model(args, capture, occurrences, winners, device)
        # A region's run times its kernel alone; called from the model's Python its operator costs a call more, and
        # the region's own code may cost less than the run timed it. A winner slower here than its own code (the
        # median of interleaved rounds, on the region file's inputs) would make the model slower: taken out.
        in_model(args, winners, guards, capture, device)
        slower = [p for p, _ in winners if p.after["speedup"] < 1]
        for p in slower:
            lo, hi = p.after["spread"]
            p.put_back, p.put_back_reason = False, (
                f"a winner on the region ({p.put_back_reason}), but called in the model's process its operator is "
                f"{p.after['speedup']:.3f}x its own code (rounds {lo:.3f}x to {hi:.3f}x; "
                f"{p.after['operator_us']:.1f} us against {p.after['original_us']:.1f} us): not put back")
        if slower:
            winners = [(p, r) for p, r in winners if p.put_back]
            path, optimized, guards = optimized_model(args, capture, occurrences, winners, device)
    result = {"status": "done", "module": os.path.abspath(path), "weights": os.path.abspath(
              os.path.join(args.out, OPTIMIZED_WEIGHTS)), "regions": [p.name for p, _ in winners],
              "guards": sorted(guards)}
    with timed(steps, "prove"):
        result.update(prove(args, module, model, optimized, guards, inputs, device, capture, occurrences))
        result["under_compile"] = "operator"
        if guards and result["ab_compile"].get("status") == "done" and result["ab_compile"]["speedup"] < 1:
            again = stepping_aside(model, optimized, guards, inputs, device, args.budget, result["ab_compile"])
            if again is not None:
                result["ab_compile"], result["under_compile"] = again, "original"
                write_optimized(args.out, capture, occurrences, winners, args.model, args.package_dir,
                                under_compile="original", weights=False)
        if guards and torch.device(device).type == "cuda":
            result["ab_compile_graphs"] = compile_graphs(model, optimized, guards, inputs, device, args.budget,
                                                         result["under_compile"])
    for g in guards.values():
        g.compiled = "operator"  # torch.export's program keeps the operators as its nodes
    result["export"] = export(optimized, inputs, args.out)
    return result


def stepping_aside(model, optimized, guards, inputs, device, budget, compiled):
    """Each operator is a wall Inductor cannot fuse across, and a call: where torch.compile of the optimized model was
    slower (`compiled`, its A/B), the A/B again with its guards stepping aside under compile (each region's own code,
    compiled with its neighbours; eager calls keep the operators). That A/B where it measures better, else None."""
    for g in guards.values():
        g.compiled = "original"
    again = ab_compile(model, optimized, inputs, device, budget)
    if again.get("status") != "done" or again["speedup"] <= compiled["speedup"]:
        return None
    again["verdict"] += (f"; its guards step aside under torch.compile, since with its operators compiled in it was "
                         f"{compiled['verdict']}")
    again["with_operators"] = compiled
    return again


def compile_graphs(model, optimized, guards, inputs, device, budget, under_compile):
    """torch.compile's reduce-overhead mode (its CUDA graphs) of the model against that of the optimized model, its
    guards as they stand under compile (`under_compile`), and with the operators where they step aside: the
    launches a CPU-bound model pays are gone there too, so the operators' kernels may pay where they did not."""
    first = ab_compile(model, optimized, inputs, device, budget, mode="reduce-overhead")
    if under_compile != "original" or first.get("status") != "done":
        return first
    for g in guards.values():
        g.compiled = "operator"
    second = ab_compile(model, optimized, inputs, device, budget, mode="reduce-overhead")
    for g in guards.values():
        g.compiled = under_compile
    first["with_operators"] = second
    return first


def export(optimized, inputs, directory):
    """The optimized model through torch.export where this PyTorch has it (saved as optimized.pt2), else why not."""
    if not (hasattr(torch, "export") and hasattr(torch.export, "export")):
        return {"status": "unavailable", "reason": f"torch {torch.__version__} has no torch.export (PyTorch 2.1 added "
                                                   "it): the optimized model is an nn.Module over a torch.fx graph"}
    # Non-strict first (PyTorch 2.3 and later): a guard's own Python (which shapes its operator was verified on)
    # runs as written, on fake tensors, and the operator is one node of the program. Strict export traces that
    # Python with Dynamo, which cannot follow all of it: it is the fallback where non-strict fails or is absent.
    import inspect
    modes = [False, True] if "strict" in inspect.signature(torch.export.export).parameters else [None]
    failures = []
    for strict in modes:
        try:
            program = torch.export.export(optimized, tuple(inputs), **({} if strict is None else {"strict": strict}))
            path = os.path.join(directory, "optimized.pt2")
            torch.export.save(program, path)
            operators = sorted({str(n.target) for n in program.graph.nodes
                                if n.op == "call_function" and str(n.target).startswith("kernelevolve.")})
            return {"status": "done", "file": os.path.abspath(path), "strict": strict, "operators": operators}
        except Exception as e:
            failures.append(f"{'strict' if strict else 'non-strict'}: {type(e).__name__}: {first_line(e)}")
    return {"status": "failed", "reason": "; ".join(failures)}


def prove(args, module, model, optimized, guards, inputs, device, capture, occurrences):
    out = {}
    # Parity on fresh inputs (another seed than the one the regions were cut and verified at).
    torch.manual_seed(INPUTS_SEED + 1)
    fresh = [x.to(device) if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
    calls_before = {name: (g.calls, g.op.calls) for name, g in guards.items()}
    with torch.no_grad():
        expected = list(tensors_in(model(*fresh)))
        got = list(tensors_in(optimized(*fresh)))
    worst, ok = 0.0, len(expected) == len(got)
    precision = precision_of(capture, args)
    for a, b in zip(expected, got):
        ok = ok and matches(a, b, precision)
        if a.shape == b.shape and a.numel():
            worst = max(worst, float((b.float() - a.float()).abs().max()))
    atol, rtol = precision["atol"], precision["rtol"]
    out["parity"] = {"ok": ok, "max_abs_error": worst, "atol": atol, "rtol": rtol, "outputs": len(expected),
                     "dtypes": [dtype_name(a.dtype) for a in expected], "precision": precision["text"],
                     "inputs": f"get_inputs() under seed {INPUTS_SEED + 1} (the regions were cut at seed {INPUTS_SEED})"}
    # Engagement: each place's call went to its operator, and the operator launched (once per place that shares it).
    out["engagement"] = {name: {"operator": g.op.qualname, "launches": g.calls - calls_before[name][0],
                                "operator_launches": g.op.calls - calls_before[name][1], "fallbacks": g.fallbacks,
                                **({"why": g.why_fallback} if g.why_fallback else {})}
                         for name, g in guards.items()}
    out["engaged"] = all(v["launches"] > 0 for v in out["engagement"].values())
    # The A/B: eager against the optimized model, with the rebuilt graph as its control, interleaved in this process.
    control = control_model(args, capture, occurrences, device) if guards else optimized
    out["ab_eager"] = ab_eager(model, control, optimized if guards else None, inputs, device, args.budget)
    out["ab_compile"] = ab_compile(model, optimized, inputs, device, args.budget)
    out["ab_graphs"] = ab_graphs(model, optimized, inputs, device, args.budget)
    if not guards:  # the optimized model is the rebuilt graph: what these measure is the rebuild's
        for ab in (out["ab_compile"], out["ab_graphs"]):
            if ab.get("status") == "done":
                ab["verdict"] += f"; {NO_KERNELS}: the rebuilt graph's, not a kernel's"
    return out


NO_KERNELS = "no kernels put back"


def control_model(args, capture, occurrences, device):
    """The A/B's control: the captured graph rebuilt as optimized.py is (optimized_source), with no region put back,
    each region's own code in its place; loaded as load() loads the optimized model, from its source in memory (no
    file: it is optimized.py with REGIONS = {}), its weights the model's own tensors (no copy on the device)."""
    text, state = optimized_source(capture, occurrences, [], args.model, args.package_dir, state_global="_STATE")
    control = types.ModuleType("kernelevolve_control")
    control.__file__ = os.path.join(os.path.abspath(args.out), "control.py")  # never written: its _HERE
    control._STATE = state
    exec(compile(text, "<the A/B's control: optimized.py with nothing put back>", "exec"), control.__dict__)
    return control.load(str(device))


def ab_eager(model, control, optimized, inputs, device, budget):
    """Eager against the optimized model, with a control: the rebuilt graph with nothing put back (control_model).
    The rebuild alone changes the time (its forward is one function: none of the submodules' calls the model's
    forward makes), and a model with nothing put back measured 1.2x faster than itself: without the control, the
    kernels were credited with it. The three interleaved round by round, every order in turn (round_order), each
    warmed alike; three figures: the rebuild (the control over the model), the kernels (the optimized model over the
    control: the headline) and in all (the optimized model over the model: `speedup`, `spread`, `verdict`).
    `optimized` None: no kernel put back; the optimized model is the control, the two timed, the kernels' figure 1 by
    construction and said so."""
    runners = [lambda: model(*inputs), lambda: control(*inputs)]
    if optimized is not None:
        runners.append(lambda: optimized(*inputs))
    ab = interleaved(runners, device, budget)
    rebuild = ratio(ab, 0, 1)
    if optimized is not None:
        kernels, total = ratio(ab, 1, 2), ratio(ab, 0, 2)
        kernels = {"put_back": True, "speedup": kernels["median"], "spread": kernels["spread"],
                   "verdict": verdict(kernels)}
    else:
        total = rebuild
        kernels = {"put_back": False, "speedup": 1.0, "spread": [1.0, 1.0],
                   "verdict": f"{NO_KERNELS}: no gain from kernels (1x by construction: the optimized model is the "
                              "rebuilt graph)"}
    rebuild = {"speedup": rebuild["median"], "spread": rebuild["spread"], "verdict": verdict(rebuild)}
    return {"rounds": ab["rounds"], "calls_per_sample": ab["calls_per_sample"],
            "order": f"{len(runners)} runners interleaved, every order in turn",
            "eager_us": ab["time_us"][0], "control_us": ab["time_us"][1], "optimized_us": ab["time_us"][-1],
            "speedup": total["median"], "spread": total["spread"],
            "verdict": f"{verdict(total)}; the kernels: {kernels['verdict']}; the rebuild: {rebuild['verdict']}",
            "kernels": kernels, "rebuild": rebuild}


def ab_graphs(model, optimized, inputs, device, budget):
    """Eager against the optimized model with each forward captured once in a CUDA graph and replayed, as a user who
    runs the model under CUDA graphs sees it. Where a model is bound by the CPU's launches (the DLRM at batch 4096:
    bench/optimize_dlrm_bound.py), the eager A/B measures the CPU, and what the kernels save the GPU shows only here.
    The replays are checked against each other before they are timed."""
    if torch.device(device).type != "cuda":
        return {"status": "unavailable", "reason": "CUDA graphs need a CUDA device"}
    replays = []
    try:
        for m in (model, optimized):
            # Warmed on a side stream, as a capture wants (each call's first-time work done before it).
            side = torch.cuda.Stream(device)
            side.wait_stream(torch.cuda.current_stream(device))
            with torch.no_grad(), torch.cuda.stream(side):
                for _ in range(3):
                    m(*inputs)
            torch.cuda.current_stream(device).wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.no_grad(), torch.cuda.graph(graph):
                outputs = list(tensors_in(m(*inputs)))
            replays.append((graph, outputs))
        for graph, _ in replays:
            graph.replay()
        torch.cuda.synchronize(device)
        (_, expected), (_, got) = replays
        if not all(matches(a, b) for a, b in zip(expected, got)):
            return {"status": "failed", "reason": "the optimized model's replay does not match the model's"}
        ab = interleaved([replays[0][0].replay, replays[1][0].replay], device, budget)
    except Exception as e:
        with contextlib.suppress(Exception):
            torch.cuda.synchronize(device)
        return {"status": "failed", "reason": f"{type(e).__name__}: {first_line(e)}"}
    return {"status": "done", "rounds": ab["rounds"], "eager_us": ab["time_us"][0], "optimized_us": ab["time_us"][1],
            "speedup": ab["speedups"][0]["median"], "spread": ab["speedups"][0]["spread"],
            "verdict": verdict(ab["speedups"][0])}


def optimized_model(args, capture, occurrences, winners, device):
    """OUT/optimized.py written with `winners` put back, imported as a user would: its path, the model on `device`,
    and its guards by place."""
    path = write_optimized(args.out, capture, occurrences, winners, args.model, args.package_dir)
    spec = importlib.util.spec_from_file_location("kernelevolve_optimized", path)
    optimized_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(optimized_module)
    optimized = optimized_module.load(str(device))
    return path, optimized, optimized_module.operators(optimized)


def in_model(args, winners, guards, capture, device):
    """Each winner in this process (p.after): its guard against its own code, interleaved, on the region file's
    inputs and the first occurrence's weights."""
    for p, _ in winners:
        weights = region_weights(p, p.first, capture)
        torch.manual_seed(INPUTS_SEED)
        region_inputs = [x.to(device) for x in load_region(os.path.join(args.out, p.file),
                                                           f"kernelevolve_region_{p.hash}").get_inputs()]
        values = dict(zip(p.input_names, region_inputs))
        values.update({k: v.to(device) for k, v in weights.items()})
        call_args = [values[n] for n in p.operator.signature]
        guard = next(g for name, g in guards.items() if name.startswith(p.name + "_"))
        r = interleaved([lambda: guard.original(*call_args), lambda: guard(*call_args)], device, args.budget / 4)
        p.after = {"original_us": r["time_us"][0], "operator_us": r["time_us"][1],
                   "speedup": r["speedups"][0]["median"], "spread": r["speedups"][0]["spread"]}
        if device.type == "cuda":
            # What each costs the CPU a call (the calls queued, not waited for): where the model waits on the CPU's
            # launches (its profile's gpu_busy well under 1), this, not the kernel's time, is what the model pays.
            p.after["original_cpu_us"] = queued_us(lambda: guard.original(*call_args), device)
            p.after["operator_cpu_us"] = queued_us(lambda: guard(*call_args), device)


def queued_us(run, device, calls=200, rounds=5):
    """The CPU's microseconds to queue one call of `run` on the device (the best of `rounds` loops of `calls`, each
    loop's work waited for after its clock stops)."""
    best = float("inf")
    with torch.no_grad():
        for _ in range(rounds):
            torch.cuda.synchronize(device)
            start = time.perf_counter()
            for _ in range(calls):
                run()
            best = min(best, (time.perf_counter() - start) / calls * 1e6)
        torch.cuda.synchronize(device)
    return best


def ab_compile(model, optimized, inputs, device, budget, mode=None):
    """torch.compile of the model against torch.compile of the optimized model, where torch.compile exists; `mode`
    is torch.compile's (reduce-overhead: Inductor's CUDA graphs)."""
    if not hasattr(torch, "compile"):
        return {"status": "unavailable", "reason": f"torch {torch.__version__} has no torch.compile (PyTorch 2.0 "
                                                   "added it)"}
    breaks = graph_breaks()
    try:
        compiled, compiled_optimized = torch.compile(model, mode=mode), torch.compile(optimized, mode=mode)
        with torch.no_grad():
            compiled(*inputs)
            model_breaks = graph_breaks() - breaks
            compiled_optimized(*inputs)
            optimized_breaks = graph_breaks() - breaks - model_breaks
            if mode == "reduce-overhead":  # the first calls record the CUDA graphs; later ones replay them
                for _ in range(2):
                    compiled(*inputs)
                    compiled_optimized(*inputs)
        ab = interleaved([lambda: compiled(*inputs), lambda: compiled_optimized(*inputs)], device, budget)
    except Exception as e:
        return {"status": "failed", "reason": f"{type(e).__name__}: {first_line(e)}"}
    # Graph breaks said: an operator Dynamo could not take whole would split compile-of-optimized's graph, and its
    # time with it.
    return {"status": "done", "rounds": ab["rounds"], "compile_us": ab["time_us"][0],
            "compile_optimized_us": ab["time_us"][1], "speedup": ab["speedups"][0]["median"],
            "spread": ab["speedups"][0]["spread"], "verdict": verdict(ab["speedups"][0]),
            "graph_breaks": {"model": model_breaks, "optimized": optimized_breaks}}


def graph_breaks():
    """Dynamo's graph breaks so far in this process (0 where this PyTorch does not count them)."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return 0
    return sum(counters["graph_break"].values())


COLOURS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac"]


def write_chart(path, report):
    """The model's time by region, before and after, as two stacked bars in an SVG drawn by hand (no plotting
    library needed): each region's time a forward (its time a call, measured in the rank's interleaved rounds, times
    its count), after scaled by its guard's speedup in this process where it was put back. Returns the path."""
    regions = report["regions"]
    before = [r["time_us"] * r["count"] for r in regions]
    after = [t * (r["after"]["operator_us"] / r["after"]["original_us"]) if r.get("put_back") and r.get("after")
             else t for t, r in zip(before, regions)]
    total = max(sum(before), sum(after), 1e-9)
    width, left, bar, top = 720, 90, 36, 40
    scale = (width - left - 70) / total  # room for the total after the longer bar
    height = top + 2 * (bar + 24) + 24 * (len(regions) + 1)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
             'font-size="12">',
             f'<text x="10" y="20" font-size="14">{xml(os.path.basename(report["model"]))}: time by region, '
             'a forward (us)</text>']
    for row, (label, values) in enumerate((("before", before), ("after", after))):
        y, x = top + row * (bar + 24), left
        parts.append(f'<text x="10" y="{y + bar / 2 + 4}">{label}</text>')
        for i, (r, v) in enumerate(zip(regions, values)):
            w = v * scale
            parts.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar}" fill="{COLOURS[i % len(COLOURS)]}">'
                         f'<title>{r["name"]}: {v:.1f} us</title></rect>')
            x += w
        parts.append(f'<text x="{x + 4:.1f}" y="{y + bar / 2 + 4}">{sum(values):.1f}</text>')
    y = top + 2 * (bar + 24) + 8
    for i, r in enumerate(regions):
        mark = "put back" if r.get("put_back") else "as before"
        parts.append(f'<rect x="10" y="{y + 24 * i}" width="14" height="14" fill="{COLOURS[i % len(COLOURS)]}"/>')
        parts.append(f'<text x="30" y="{y + 24 * i + 12}">{r["name"]} x{r["count"]} ({xml(" ".join(r["ops"]))[:60]}): '
                     f'{100 * r["share"]:.1f}%, {mark}</text>')
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")
    return os.path.abspath(path)


def xml(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def optimize(args, steps):
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise Refusal("device", f"--device {args.device}: this PyTorch ({torch.__version__}) sees no CUDA GPU")
    if device.type not in ("cpu", "cuda"):
        raise Refusal("device", f"--device {args.device}: the optimizer runs on cpu or cuda[:N]")
    module = load_model_file(args.model)
    args.model_sha256 = model_digest(args.model)
    size_note = check_size(module, device)
    try:
        model, inputs = build(module, device)
    except Refusal as e:
        if not args.autocast:
            raise
        raise Refusal(e.kind, f"{e} (under torch.autocast({autocast_device(args)!r}, dtype={args.autocast}), "
                              "--autocast: the model's own forward fails so, before any region is cut)")

    earlier = earlier_steps(args) if args.stage != "all" else None
    if earlier is None:
        with timed(steps, "profile"):
            profile = profile_model(model, inputs, device, args.budget)

    with timed(steps, "cut"):
        capture = capture_model(model, inputs, (autocast_device(args), AUTOCAST_DTYPES[args.autocast])
                                if args.autocast else None)
        occurrences, problems = cut(capture)
        for p in problems:  # the forward first: it names the weights the files and the manifest use
            p.source = forward_source(p, capture)
        if earlier is None:
            prepare_out(args.out, [n for p in problems for n in (p.file, p.weights_file)], args.model,
                        args.model_sha256)
            for p in problems:
                if not write_problem(p, capture, args.model, args.out):
                    p.weights_file = None

    if earlier is None:
        with timed(steps, "rank"):
            ranking = rank(problems, args.out, device, args.min_share, args.budget, model, inputs)
        report = manifest(args, device, profile, capture, occurrences, problems, ranking, steps, size_note)
        write_manifest(report)
        if args.no_evolve:
            report["next"] = NO_EVOLVE_NEXT.replace("DIR", os.path.abspath(args.out))
            return report
    else:
        profile, ranking = ranked_as_before(earlier, problems, steps)

    # Step 4 ends early enough that steps 5-6 (two torch.compiles of the model and the A/B) finish within --timeout:
    # a process killed for time reports nothing, and its regions' runs are resumable only from the database.
    deadline = STARTED + args.timeout - prove_reserve(args.timeout)
    with timed(steps, "evolve"):
        if args.stage == "finish":
            collect(args, problems)
        else:
            evolve(args, problems, deadline)
    if args.stage == "evolve":  # this rank's part: what it evolved; rank 0 puts back and proves
        mine = [dict(p.evolve, hash=p.hash) for p in problems if p.evolve is not None]
        return {"stage": "evolve", "rank": args.rank, "session": args.session, "steps_s": steps, "regions": mine,
                "evolved": sum(1 for r in mine if r["status"] != "resumed")}
    if args.stage == "finish":  # step 4's time is the ranks' (optimize.cpp measured it), not the collection's
        steps["evolve"] = args.evolve_seconds
    for p in problems:
        p.put_back, p.put_back_reason = judge(p)
    result = put_back_and_prove(args, module, model, inputs, capture, occurrences, problems, device, steps)
    report = manifest(args, device, profile, capture, occurrences, problems, ranking, steps, size_note)
    report["put_back"] = result
    report["chart"] = write_chart(os.path.join(args.out, CHART), report)
    report["next"] = None
    return report


def earlier_steps(args):
    """The manifest rank 0 wrote in steps 1-3 of this optimize (MPI's later stages read their ranking from it)."""
    path = os.path.join(args.out, MANIFEST)
    try:
        with open(path) as f:
            earlier = json.load(f)
    except (OSError, ValueError) as e:
        raise Refusal("out_dir", f"--stage {args.stage}: {path} does not read ({e}): steps 1-3 must run first")
    if earlier.get("tool") != TOOL or os.path.abspath(earlier.get("model", "")) != os.path.abspath(args.model):
        raise Refusal("out_dir", f"--stage {args.stage}: {path} is not this model's optimize")
    return earlier


def ranked_as_before(earlier, problems, steps):
    """Steps 1 and 3 as the manifest has them: each region's time, share and whether it is kept, by hash (the cut
    just redone must give the manifest's regions)."""
    by_hash = {r["hash"]: r for r in earlier["regions"]}
    if sorted(by_hash) != sorted(p.hash for p in problems):
        raise Refusal("untraceable", "the model's cut differs from the one in the manifest of steps 1-3 (the model "
                                     "file changed, or its capture is not deterministic)")
    for p in problems:
        r = by_hash[p.hash]
        p.time_us, p.spread_us, p.share, p.kept, p.reason = (r["time_us"], r["spread_us"], r["share"], r["kept"],
                                                             r["reason"])
        p.weights_file = r["weights_file"]
    for step in ("profile", "cut", "rank"):
        steps[step] = earlier["steps_s"].get(step, 0.0)
    return earlier["profile"], earlier["rank"]


def write_manifest(report):
    """The report as manifest.json; returns its text."""
    text = json.dumps(report, indent=1)
    with open(report["manifest"], "w") as f:
        f.write(text + "\n")
    return text


def manifest(args, device, profile, capture, occurrences, problems, ranking, steps, size_note):
    index = {id(occ): (p, k) for p in problems for k, occ in enumerate(p.occurrences)}
    placeholders = [n for n in capture.gm.graph.nodes if n.op == "placeholder"]
    regions = []
    for p in sorted(problems, key=lambda p: -p.share):
        first = p.first
        regions.append({
            "name": p.name, "hash": p.hash, "file": p.file, "weights_file": p.weights_file, "ops": p.ops,
            "anchor": p.anchor, "count": len(p.occurrences), "time_us": p.time_us, "spread_us": p.spread_us,
            "share": p.share, "kept": p.kept, "reason": p.reason, "dtypes": region_dtypes(p, capture),
            "inputs": [tensor_json(n, capture.meta[a.name]) for n, a in zip(p.input_names, first.inputs)],
            "outputs": [tensor_json(o.name, capture.meta[o.name]) for o in first.outputs],
            "weights": weights_json(p, first, capture),
            "occurrences": [occurrence_json(p, occ, capture) for occ in p.occurrences],
            "evolve": getattr(p, "evolve", None), "put_back": getattr(p, "put_back", False),
            "put_back_reason": getattr(p, "put_back_reason", None), "after": getattr(p, "after", None),
        })
    notes = [n for n in [size_note] if n] + capture.notes
    return {
        "tool": TOOL, "version": 2, "model": os.path.abspath(args.model), "model_sha256": args.model_sha256,
        "device": str(device),
        "torch": torch.__version__, "out_dir": os.path.abspath(args.out),
        "manifest": os.path.abspath(os.path.join(args.out, MANIFEST)),
        "seeds": {"model": MODEL_SEED, "inputs": INPUTS_SEED}, "min_share": args.min_share,
        "capture": capture.method,
        "precision": precision_of(capture, args),
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
        "database": os.path.abspath(os.path.join(args.out, DATABASE)),
        "next": None,
    }


def main():
    parser = argparse.ArgumentParser(prog="kernelevolve-optimize")
    parser.add_argument("--model", required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", required=True)
    parser.add_argument("--min-share", type=float, default=0.01)
    parser.add_argument("--budget", type=float, default=2.0, help="seconds of timing for the model, and for the regions")
    parser.add_argument("--cli", default="kernelevolve", help="the kernelevolve command that evolves each region")
    parser.add_argument("--package-dir", default="", help="where the Python package kernelevolve is, if not installed")
    parser.add_argument("--no-evolve", action="store_true", help="steps 1-3 only")
    parser.add_argument("--evolve-device", default="", help="the regions' runs' --device (default: --device)")
    parser.add_argument("--max-evals", type=int, default=20, help="evaluations per region")
    parser.add_argument("--total-evals", type=int, default=0, help="evaluations in all, split by expected gain")
    parser.add_argument("--run-option", action="append", default=[], help="passed to each kernelevolve run")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--no-put-back", default="", help="why steps 5-6 cannot run here (a sanitized library)")
    parser.add_argument("--devices", default="", help="step 4's devices, one region each at a time (D1,D2,...)")
    parser.add_argument("--stage", choices=("all", "evolve", "finish"), default="all",
                        help="under MPI: evolve (this rank's claimed regions) or finish (rank 0: steps 5-6)")
    parser.add_argument("--session", default="", help="with --stage: the MPI job's session, the same on every rank")
    parser.add_argument("--rank", type=int, default=0, help="with --stage evolve: this process's MPI rank")
    parser.add_argument("--evolve-seconds", type=float, default=0.0, help="with --stage finish: step 4's wall time")
    parser.add_argument("--autocast", default="", help="bf16 or fp16: the model called under torch.autocast")
    args = parser.parse_args()
    # The report is the only thing on stdout: what the model or PyTorch prints goes to stderr.
    report_out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    steps = {}
    try:
        with torch.no_grad(), autocast_of(args):
            report = optimize(args, steps)
        # A rank's part of step 4 (--stage evolve) is no manifest: rank 0 writes that.
        text = json.dumps(report) if args.stage == "evolve" else write_manifest(report)
    except Refusal as e:
        text = json.dumps({"error": str(e), "kind": e.kind, "steps_s": steps})
    except SystemExit as e:  # the model's own code (its constructor, get_inputs(), its forward) ended the process
        text = json.dumps({"error": f"the model's code exited the optimizer's Python ({exit_call(e)}) after "
                                    f"{', '.join(steps) or 'the import'}: a model's code runs in the optimizer's own "
                                    "process, and must not end it", "kind": "bad_model", "steps_s": steps})
    except Exception as e:  # a bug of the optimizer's, not the model's: said as one, with where it happened
        import traceback
        where = traceback.extract_tb(e.__traceback__)[-1]
        traceback.print_exc()
        text = json.dumps({"error": f"the optimizer failed (a bug: please report it): {type(e).__name__}: {e} "
                                    f"(line {where.lineno}, in {where.name})", "kind": "internal", "steps_s": steps})
    report_out.write(text + "\n")
    report_out.flush()
