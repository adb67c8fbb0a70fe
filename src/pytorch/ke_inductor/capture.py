"""The driver of the first program from torch.compile (issue 31): it compiles the module with Inductor, the sizes
marked dynamic, captures the output code of that one compile, translates it (program.translate) for the
spec's params, and prints one JSON object: {"source", "tunables", "constraints", "notes"}, or
{"error", "part"}.
  python -m ke_inductor --module model.py --device cuda --spec spec.json [--dtype bf16|f16]
On the CPU (--device cpu) it captures C++ kernels under cpu_capture_settings() and translates them with
cpu.translate_cpu().
"""

import json

from .cpu import translate_cpu
from .errors import Untranslatable
from .program import state_names, translate


def apply_precision(torch, precision=None):
    """The TF32 switches of the run's precision (the spec's "precision", as the run resolved it; ke_bridge's
    precision_state()): the program captured is the one the user's torch.compile runs under them, so node 0 is what
    the user already has. No precision given: fp32, TF32 off (the strict policy)."""
    precision = precision or {}
    torch.backends.cuda.matmul.allow_tf32 = bool(precision.get("matmul_tf32", False))
    torch.backends.cudnn.allow_tf32 = bool(precision.get("cudnn_tf32", False))
    if hasattr(torch, "set_float32_matmul_precision"):
        torch.set_float32_matmul_precision(precision.get("float32_matmul_precision", "highest"))


def capture_settings(torch):
    """What a capture sets before it compiles (scripts/capture-inductor.py records fixtures under the same): fp32
    without TF32 until the spec's precision says otherwise (apply_precision, after the module loads); a module's
    float (an eps, a slope) a constant of the code, not a 0-d float64 CPU tensor the program would have to be
    passed; and no compile served from Inductor's cache, which may hold another problem's example sizes
    (bench/results/inductor_first.md, the translation census)."""
    import importlib

    apply_precision(torch)
    for module, key, value in (("torch._dynamo.config", "specialize_float", True),
                               ("torch._inductor.config", "fx_graph_cache", False)):
        try:
            config = importlib.import_module(module)
        except ImportError:
            continue
        if hasattr(config, key):
            setattr(config, key, value)


def cpu_capture_settings(torch):
    """What a capture on the CPU sets besides capture_settings() (tests/fixtures/inductor_cpu/capture.py records
    fixtures under the same), so that the C++ Inductor writes stands alone in a candidate our Clang compiles
    (cpu.py says why): no at::vec (simdlen 1 picks no vector ISA: plain scalar loops, which
    Clang vectorizes itself where it may) and one thread (no `#pragma omp`: our CPU device calls a program on one
    thread, and the bridge times eager and torch.compile on one, KE_TORCH_THREADS)."""
    import torch._inductor.config as config

    config.cpp.simdlen = 1
    config.cpp.threads = 1


def autotuned(before=()):
    """The configuration Inductor's autotuner kept for each Triton kernel this process has run, by kernel name
    ({"triton_red_fused_sum_0": {"XBLOCK": 1, "R0_BLOCK": 2048, "num_warps": 16, "num_stages": 1}}): node 0
    starts there, as torch.compile runs (the output code lists the candidates, not the winner). `before`: ids of
    autotuners of earlier compiles, left out."""
    out = {}
    for obj in autotuners():
        if id(obj) not in before and len(getattr(obj, "launchers", [])) == 1:
            config = obj.launchers[0].config
            name = getattr(obj.fn, "__name__", None) or obj.inductor_meta.get("kernel_name")
            out[name] = {**config.kwargs, "num_warps": config.num_warps, "num_stages": config.num_stages}
    return out


def autotuners():
    import gc

    from torch._inductor.runtime.triton_heuristics import CachingAutotuner
    # type(), not isinstance(): gc also lists weak proxies, and isinstance() of a dead one raises.
    return [obj for obj in gc.get_objects() if issubclass(type(obj), CachingAutotuner)]


def main():
    import argparse
    import importlib.util
    import sys
    import traceback

    parser = argparse.ArgumentParser(prog="kernelevolve-inductor")
    parser.add_argument("--module", required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--spec", required=True)
    parser.add_argument("--dtype", choices=["bf16", "f16"])
    args = parser.parse_args()

    def reply(**fields):
        print(json.dumps(fields))

    try:
        import torch
    except ImportError as e:
        return reply(error=f"PyTorch does not import: {e}", part="torch")
    if not hasattr(torch, "compile"):
        return reply(error=f"torch {torch.__version__} has no torch.compile (PyTorch 2.0 added it)", part="torch")
    try:
        from torch._inductor.utils import run_and_get_code
    except ImportError as e:
        return reply(error=f"torch {torch.__version__} has no Inductor to capture: {e}", part="torch")
    capture_settings(torch)
    on_cpu = torch.device(args.device).type == "cpu"
    if on_cpu:
        try:
            cpu_capture_settings(torch)
        except (ImportError, AttributeError) as e:
            return reply(error=f"torch {torch.__version__}'s Inductor has no C++ settings to capture with: {e}",
                         part="torch")
    try:
        with open(args.spec) as f:
            spec = json.load(f)
        name = "kernelevolve_inductor_problem"
        loader = importlib.util.spec_from_file_location(name, args.module)
        module = importlib.util.module_from_spec(loader)
        sys.modules[name] = module  # Dynamo looks a forward's globals up by its module's name
        loader.loader.exec_module(module)
        apply_precision(torch, spec.get("precision"))  # after the file's own code: the run's switches win
        torch.manual_seed(0)
        device = torch.device(args.device)
        # Made on the device: a KernelBench problem at its own size draws gigabytes of random inputs, seconds on
        # the host. Only the code is captured here, so the values need not be the reference's.
        with device:
            model = module.Model(*module.get_init_inputs()).to(device).eval()
            inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
        if args.dtype:  # as the reference of a --dtype problem casts (ke_bridge's Variant): floats only
            dtype = {"bf16": torch.bfloat16, "f16": torch.float16}[args.dtype]
            model = model.to(dtype)
            inputs = [x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
    except Exception as e:
        return reply(error=f"the module does not load: {type(e).__name__}: {e}", part="module",
                     trace=traceback.format_exc()[-2000:])
    # A problem of one workload is captured first as torch.compile runs it there, at static sizes: the same
    # kernels, reductions and configurations that the "torch.compile" baseline times (a dynamic capture splits
    # some reductions that the static one does in one kernel). The program then holds only at those sizes, and
    # says so in its constraints. Where that does not translate, or sizes differ from the workload's, or there
    # are several workloads, the capture is dynamic: one program for every workload.
    # Between them, on a GPU: the static capture again without Inductor's layout optimization (channels-last
    # convolutions) and stride padding (buffers with gaps), which its translation does not take: still the
    # problem's own sizes, where the dynamic capture's index arithmetic on sizes as arguments costs time.
    plain = {k: False for k in ("layout_optimization", "comprehensive_padding")
             if getattr(torch._inductor.config, k, False)} if not on_cpu else {}
    modes = ["static"] + (["static-plain"] if plain else []) + ["dynamic"] \
        if len(spec.get("workloads", [])) == 1 else ["dynamic"]
    failure = None
    for mode in modes:
        try:
            result = _compile_and_translate(torch, run_and_get_code, model, inputs, spec, mode == "dynamic", on_cpu,
                                            plain if mode == "static-plain" else None)
        except Untranslatable as e:
            failure = dict(error=str(e), part=getattr(e, "part", ""))
            continue
        except Exception as e:
            failure = dict(error=f"torch.compile failed on the module: {type(e).__name__}: {e}",
                           part="torch.compile", trace=traceback.format_exc()[-2000:])
            continue
        if mode.startswith("static"):
            if not _holds_at(result.get("constraints", []), spec["workloads"][0]):
                failure = dict(error="the static capture's sizes are not the workload's", part="static")
                continue
            result["notes"] = ("static sizes (the problem's one workload, as torch.compile runs it); " if
                               mode == "static" else
                               f"static sizes, with Inductor's {' and '.join(plain)} off (the default capture did "
                               f"not translate: {failure['error'][:300]}); ") + result.get("notes", "")
        elif failure:  # a static capture that failed: its kernels are not torch.compile's, and the user asks why
            result["notes"] = (f"dynamic sizes: the static capture did not translate ({failure['error'][:300]}); "
                               + result.get("notes", ""))
        return reply(source=result["source"], tunables=result["tunables"],
                     constraints=result.get("constraints", []), notes=result.get("notes", ""))
    return reply(**failure)


def _compile_and_translate(torch, run_and_get_code, model, inputs, spec, dynamic, on_cpu=False, config=None):
    codes, chosen, identities = compile_and_capture(torch, run_and_get_code, model, inputs, dynamic, config)
    if len(codes) != 1:
        raise Untranslatable("graph break", f"torch.compile wrote {len(codes)} graphs for the module: one program "
                             "is one graph")
    if on_cpu:  # C++ kernels (cpu.py), no autotuner
        return translate_cpu(codes[0], spec, state_names(identities) if identities else None)
    return translate(codes[0], spec, chosen, state_names(identities) if identities else None)


def compile_and_capture(torch, run_and_get_code, model, inputs, dynamic, config=None):
    """torch.compile of the model, run once on the inputs -> (Inductor's output codes, the configuration its
    autotuner kept for each kernel (autotuned()), and what each input of the compiled graph is: "input I", "state
    KEY" or None). The last is seen by a backend that hands the graph to Inductor as torch.compile's own does;
    where that fails it is None, and the translation pairs same-shaped arguments by order alone. `config`: Inductor
    settings changed for this compile only."""
    with torch._inductor.config.patch(config or {}):
        return _compile_and_capture(torch, run_and_get_code, model, inputs, dynamic)


def _compile_and_capture(torch, run_and_get_code, model, inputs, dynamic):
    torch._dynamo.reset()
    try:
        before = {id(obj) for obj in autotuners()}
    except Exception:
        before = set()
    sources = {}
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and x.numel():
            sources.setdefault(x.data_ptr(), f"input {i}")
    for key, t in model.state_dict(keep_vars=True).items():
        if t.numel():
            sources.setdefault(t.data_ptr(), f"state {key}")
    seen = []

    def backend(gm, example_inputs):
        from torch._inductor.compile_fx import compile_fx

        try:
            seen.append([sources.get(x.data_ptr()) if isinstance(x, torch.Tensor) else None for x in example_inputs])
        except Exception:  # a tensor without storage: nothing known
            seen.append(None)
        return compile_fx(gm, example_inputs)

    identities = None
    with torch.no_grad():
        try:
            _, codes = run_and_get_code(torch.compile(model, backend=backend, dynamic=dynamic), *inputs)
            identities = seen[0] if len(seen) == 1 else None
        except Exception:
            torch._dynamo.reset()
            _, codes = run_and_get_code(torch.compile(model, dynamic=dynamic), *inputs)
    try:
        chosen = autotuned(before)
    except Exception:  # an Inductor without these internals: the heuristics' first configuration instead
        chosen = {}
    return codes, chosen, identities


def _holds_at(constraints, workload):
    """Whether the translation's constraints (`batch_size == 4096`, over the spec's sizes) hold at the workload."""
    for text in constraints:
        try:
            if not eval(text, {"__builtins__": {}}, dict(workload)):  # noqa: S307: our own translator's text
                return False
        except Exception:
            return False
    return True
