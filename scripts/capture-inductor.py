"""Captures what torch.compile (Inductor) generates for a PyTorch problem in KernelBench's format: the output code
of one compile, static and with the sizes marked dynamic, written to OUT/<name>.static.py and OUT/<name>.dynamic.py
(issue 31's fixtures; a first program is translated from this code). Needs a CUDA GPU and PyTorch 2.x. <name> is a
problem folder's name for a model.py (problems/pytorch/NAME/model.py), else the file's own (KernelBench's
level1/1_Square_matrix_multiplication_.py).

    python3 scripts/capture-inductor.py OUT problems/pytorch/*/model.py
    python3 scripts/capture-inductor.py OUT --modes dynamic --jobs 6 --timeout 300 KernelBench/level1/*.py

With --jobs, each file is captured in a process of its own (a problem that crashes or hangs costs only itself),
and OUT/index.tsv says per file and mode: ok (with the modules written, a graph break when more than one) or why
not, and the seconds it took.
"""
import argparse
import concurrent.futures
import importlib.util
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "pytorch"))
from ke_inductor.capture import capture_settings, compile_and_capture  # noqa: E402


def name_of(path):
    base = os.path.basename(path)
    return os.path.basename(os.path.dirname(path)) if base == "model.py" else os.path.splitext(base)[0]


def load(path):
    spec = importlib.util.spec_from_file_location("problem_" + name_of(path), path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def capture(out, path, modes):
    """Captures one file in this process; a line per mode: NAME MODE ok|FAILED ..."""
    import torch
    from torch._inductor.utils import run_and_get_code

    # As the first program is captured (src/pytorch/ke_inductor/capture.py).
    capture_settings(torch)
    name = name_of(path)
    m = load(path)
    torch.manual_seed(0)
    model = m.Model(*m.get_init_inputs()).cuda().eval()
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in m.get_inputs()]
    for mode in modes:
        start = time.time()
        try:
            codes, chosen, identities = compile_and_capture(torch, run_and_get_code, model, inputs, mode == "dynamic")
            text = "\n\n# ---- next module ----\n\n".join(codes)
            header = (f"# Inductor's output code for {path} ({mode} shapes), torch {torch.__version__}, "
                      f"{torch.cuda.get_device_name()}; captured by scripts/capture-inductor.py\n")
            with open(os.path.join(out, f"{name}.{mode}.py"), "w") as f:
                f.write(header + text + "\n# kernelevolve-chosen: " + json.dumps(chosen, sort_keys=True) + "\n" +
                        "# kernelevolve-args: " + json.dumps(identities) + "\n")
            print(f"{name}\t{mode}\tok\t{len(codes)} module(s), {len(text)} characters\t{time.time() - start:.1f}",
                  flush=True)
        except Exception as e:  # a problem Inductor cannot compile is named, and the rest go on
            message = f"{type(e).__name__}: {e}".replace("\t", " ").replace("\n", " ")[:400]
            print(f"{name}\t{mode}\tFAILED\t{message}\t{time.time() - start:.1f}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("files", nargs="+")
    parser.add_argument("--modes", default="static,dynamic", help="static, dynamic or both (comma-separated)")
    parser.add_argument("--jobs", type=int, default=0, help="capture each file in a process of its own, N at once")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per file with --jobs")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    modes = [m for m in args.modes.split(",") if m]
    if not args.jobs:
        for path in args.files:
            capture(args.out, path, modes)
        return

    def one(path):
        start = time.time()
        try:
            done = subprocess.run([sys.executable, os.path.abspath(__file__), args.out, path, "--modes", args.modes],
                                  capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            return [f"{name_of(path)}\t{m}\tFAILED\ttimed out after {args.timeout:.0f} s\t{time.time() - start:.1f}"
                    for m in modes]
        lines = [line for line in done.stdout.splitlines() if line.count("\t") == 4]
        if not lines:
            last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1].replace("\t", " ")[:400]
            lines = [f"{name_of(path)}\t{m}\tFAILED\t{last}\t{time.time() - start:.1f}" for m in modes]
        return lines

    with open(os.path.join(args.out, "index.tsv"), "a") as index, \
            concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for done in concurrent.futures.as_completed([pool.submit(one, path) for path in args.files]):
            for line in done.result():
                print(line, flush=True)
                index.write(line + "\n")
                index.flush()


if __name__ == "__main__":
    main()
