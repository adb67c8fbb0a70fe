"""Captures what torch.compile (Inductor) generates for a PyTorch problem in KernelBench's format: the output code
of one compile, static and with the sizes marked dynamic, written to OUT/<name>.static.py and OUT/<name>.dynamic.py
(issue 31's fixtures; a first program is translated from this code). Needs a CUDA GPU and PyTorch 2.x.

    python3 scripts/capture-inductor.py OUT problems/pytorch/*/model.py
"""
import importlib.util
import os
import sys

import torch
from torch._inductor.utils import run_and_get_code


def load(path):
    spec = importlib.util.spec_from_file_location("problem_" + os.path.basename(os.path.dirname(path)), path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for path in sys.argv[2:]:
        name = os.path.basename(os.path.dirname(path))
        m = load(path)
        torch.manual_seed(0)
        model = m.Model(*m.get_init_inputs()).cuda().eval()
        inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in m.get_inputs()]
        for mode in ("static", "dynamic"):
            torch._dynamo.reset()
            try:
                with torch.no_grad():
                    compiled = torch.compile(model, dynamic=(mode == "dynamic"))
                    _, codes = run_and_get_code(compiled, *inputs)
                text = "\n\n# ---- next module ----\n\n".join(codes)
                header = (f"# Inductor's output code for {path} ({mode} shapes), torch {torch.__version__}, "
                          f"{torch.cuda.get_device_name()}; captured by scripts/capture-inductor.py\n")
                with open(os.path.join(out, f"{name}.{mode}.py"), "w") as f:
                    f.write(header + text)
                print(f"{name} {mode}: {len(codes)} module(s), {len(text)} characters")
            except Exception as e:  # a problem Inductor cannot compile is named, and the rest go on
                print(f"{name} {mode}: FAILED: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
