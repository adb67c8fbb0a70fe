"""The program: `translate`, Inductor's Triton output code as a KernelEvolve program with its plan, tunables and
constraints.
"""

import ast
import json
import re

from .binding import _Binding, _match_tensors, _tie_sizes
from .embedding_bag import _batch_lookups
from .errors import Untranslatable
from .heuristics import _configs
from .output_code import _example_args, _function, _kernels_of, _OwnKernel
from .plan import _Plan, _Storage
from .runtime_helpers import _HELPERS, _rewrite_runtime
from .size_expressions import _dense_strides, _unwrap


def _tunable_names(kernels):
    """Each kernel's constexpr -> its tunable: `XBLOCK` alone, `K0_XBLOCK` ... where several kernels run."""
    names = {}
    for index, kernel in enumerate(kernels):
        prefix = f"K{index}_" if len(kernels) > 1 else ""
        names[kernel.name] = {c: prefix + c for c in kernel.constexprs}
    return names


def _grid(kernel, numels, tunable):
    """Inductor's grid types: Grid1D, one program per XBLOCK elements (rows of a reduction, persistent too);
    Grid2D, x then y; Grid2DWithYZOverflow, Grid2D with y's blocks over y and z."""
    if isinstance(kernel, _OwnKernel):
        return kernel.grid(numels, tunable)
    grid_type = kernel.inductor_meta.get("grid_type")
    x = f"cdiv({_unwrap(numels['xnumel'])}, {tunable['XBLOCK']})"
    if grid_type == "Grid1D":
        return [x]
    if grid_type == "Grid2D":
        return [x, f"cdiv({_unwrap(numels['ynumel'])}, {tunable['YBLOCK']})"]
    if grid_type == "Grid2DWithYZOverflow":
        # y's blocks spread over y and z where they outgrow y's 65535: the kernel's y block is
        # program_id(1) + program_id(2) * num_programs(1).
        blocks = f"cdiv({_unwrap(numels['ynumel'])}, {tunable['YBLOCK']})"
        spread = f"max(1, cdiv({blocks}, 65535))"
        return [x, f"cdiv({blocks}, {spread})", spread]
    raise Untranslatable(f"kernel {kernel.name}", f"grid type {grid_type}")


def _temporary_shape(plan, storage):
    """A temporary holds its buffer's extent: its shape where its strides are a permutation of dense ones (a
    channels-last layout too), else (a layout with gaps: padded strides, a buffer of which call() returns views)
    the furthest element plus one, as one dimension."""
    shape = [plan.value(s) for s in storage.shape_nodes]
    strides = [plan.value(s) for s in storage.stride_nodes]
    order = sorted(range(len(shape)), key=lambda i: (strides[i], shape[i]))
    step = 1
    for i in order:
        if shape[i] != 1 and strides[i] != step:
            if any(s < 0 for s in strides) or 0 in shape:
                raise Untranslatable(f"the buffer {storage.name}", "a layout with negative strides or no elements")
            extent = ast.Constant(1)
            for size, stride in zip(storage.shape_nodes, storage.stride_nodes):
                if plan.value(size) == 1 and isinstance(size, ast.Constant):
                    continue
                reach = ast.BinOp(size, ast.Sub(), ast.Constant(1))
                if not (isinstance(stride, ast.Constant) and stride.value == 1):
                    reach = ast.BinOp(reach, ast.Mult(), stride)
                extent = ast.BinOp(extent, ast.Add(), reach)
            if all(isinstance(n, ast.Constant) for n in storage.shape_nodes + storage.stride_nodes):
                return [str(plan.value(extent))]  # a static capture's: its value
            return [_unwrap(plan.expr(extent))]
        step *= shape[i]
    # A 0-d buffer (a full reduction's result, as Frobenius norm's sum) holds one element.
    return [_unwrap(plan.expr(s)) for s in storage.shape_nodes] or ["1"]


def _is_nchw(plan, ref):
    if not isinstance(ref, _Storage):
        return True
    shape = [plan.value(s) for s in ref.shape_nodes]
    return [plan.value(s) for s in ref.stride_nodes] == _dense_strides(shape)


def _chosen_in(output_code):
    # scripts/capture-inductor.py appends the autotuner's choices to the code it records.
    found = re.search(r"^# kernelevolve-chosen: (\{.*\})$", output_code, re.M)
    try:
        chosen = json.loads(found.group(1)) if found else {}
    except ValueError:
        return {}
    return chosen if isinstance(chosen, dict) and "error" not in chosen else {}


def _arg_names_in(output_code):
    # scripts/capture-inductor.py records what each of call()'s arguments is: "state KEY", "input I" or null.
    found = re.search(r"^# kernelevolve-args: (\[.*\])$", output_code, re.M)
    try:
        identities = json.loads(found.group(1)) if found else None
    except ValueError:
        return None
    return state_names(identities) if isinstance(identities, list) else None


def state_names(identities):
    """What the capture saw each argument to be ("state fc.weight", "input 0", None) -> the spec param of each
    state entry (fc_weight, as the spec derived from the module names it), "input I" for the module's I-th input
    (_match_tensors() names it: the spec's I-th param), None for the others."""
    def name(key):
        out = "".join(c if c.isalnum() or c == "_" else "_" for c in key.replace(".", "_"))
        return out if out and not out[0].isdigit() else "p_" + out

    def one(i):
        if isinstance(i, str) and i.startswith("state "):
            return name(i[len("state "):])
        return i if isinstance(i, str) and re.fullmatch(r"input \d+", i) else None
    return [one(i) for i in identities]


def _first(values, value):
    return [value] + [v for v in values if v != value]


def _tf32_libraries(spec):
    """The libraries whose f32 calls ran on TF32 in the capture: those whose switch the spec's precision turns on
    (cudnn: torch.backends.cudnn.allow_tf32; cublas and cublaslt: torch.backends.cuda.matmul.allow_tf32). The
    capture driver set torch's switches from the same precision before it compiled (capture.apply_precision),
    so reading it here reads what torch had; this module never imports torch. A policy alone is PyTorch's defaults."""
    precision = spec.get("precision")
    if precision == "as-run":
        precision = {"cudnn_tf32": True, "matmul_tf32": False}
    if not isinstance(precision, dict):
        return set()
    return ({"cudnn"} if precision.get("cudnn_tf32") else set()) | \
        ({"cublas", "cublaslt"} if precision.get("matmul_tf32") else set())


def translate(output_code, spec, chosen=None, arg_names=None):
    """Inductor's output code for a problem -> {"source", "tunables", "notes", "constraints"} (see the module's
    docstring). `constraints` lists the sizes Inductor fixed in the code (`hidden == 768`): the program computes
    the problem only where they hold. `chosen`: the configuration Inductor's autotuner kept for each kernel, by
    name ({"triton_red_fused_sum_0": {"XBLOCK": 1, "R0_BLOCK": 2048, "num_warps": 16, "num_stages": 1}}), known
    only after a run: each tunable's first value (node 0's) is the chosen one. Without it, the choices recorded in
    the code are used, else the heuristics' first configuration. `arg_names`: the spec param each of call()'s
    arguments is, where the capture saw it (state_names()), else None; without it, those recorded in the code.
    A library step on f32 data takes "math": "tf32" where the spec's "precision" had its library's TF32 switch on
    (_tf32_libraries): the math the captured torch.compile ran, which the run's precision allows."""
    if chosen is None:
        chosen = _chosen_in(output_code)
    if arg_names is None:
        arg_names = _arg_names_in(output_code)
    tree = ast.parse(output_code)
    kernels = _kernels_of(tree)
    examples = _example_args(tree)
    call = _function(tree, "call", in_class="Runner")
    binding = _Binding(spec)
    _match_tensors(call, examples, binding, arg_names)
    _tie_sizes(call, examples, binding)
    plan = _Plan(binding, kernels)
    plan.run(call)
    if not plan.steps:
        raise Untranslatable("call()", "it launches nothing")

    for step in plan.steps:
        if step.get("library", "").startswith("cudnn."):
            if not _is_nchw(plan, step["conv_input"]) or not _is_nchw(plan, step.get("conv_output", step["args"][2])):
                call = "aten.avg_pool3d" if "conv_output" in step else "extern_kernels.convolution"
                raise Untranslatable(f"{call} on a channels-last buffer", "cuDNN's steps read and write NCHW")

    _batch_lookups(plan)
    names = _tunable_names(plan.launched)
    several = len(plan.launched) > 1
    options = {kernel.name: {key: f"K{index}_{key}" for key in ("num_warps", "num_stages")}
               for index, kernel in enumerate(plan.launched)}
    helpers = set()
    bodies, tunables, notes = [], {}, []
    carried = {}  # a kernel's own function's name in the program -> its text
    for kernel in plan.launched:
        body = _rewrite_runtime(kernel, kernel.body, helpers)
        for function, text in kernel.functions.items():
            text = _rewrite_runtime(kernel, text, helpers)
            if carried.get(function, text) != text:
                # Two kernels' sources define one name differently (each its own `_triton_helper_fn_add0`).
                renamed = f"{function}_{kernel.name}"
                text = re.sub(rf"\b{function}\b", renamed, text)
                body = re.sub(rf"\b{function}\b", renamed, body)
                function = renamed
            if function not in carried:
                carried[function] = text
                bodies.append(text)
        for constexpr, tunable in names[kernel.name].items():
            if tunable != constexpr:
                body = re.sub(rf"\b{constexpr}\b", tunable, body)
        bodies.append(body)
        configs = _configs(kernel)
        for constexpr, tunable in names[kernel.name].items():
            values = []
            for config in configs:
                if constexpr not in config:
                    raise Untranslatable(f"kernel {kernel.name}", f"no configuration sets its {constexpr}")
                if config[constexpr] not in values:
                    values.append(config[constexpr])
            picked = chosen.get(kernel.name, {}).get(constexpr)
            tunables[tunable] = _first(values, picked) if isinstance(picked, int) else values
        picked = chosen.get(kernel.name, {})
        for key in ("num_warps", "num_stages"):
            # Each kernel its own where several run, as Inductor launches them: a pointwise kernel's 4 warps would
            # starve a reduction that its autotuner gave 16.
            values = ([picked[key]] if isinstance(picked.get(key), int) else []) + [c[key] for c in configs]
            tunables[options[kernel.name][key] if several else key] = list(dict.fromkeys(values))
        if isinstance(kernel, _OwnKernel):
            notes.append(f"{kernel.name}: {getattr(kernel, 'note', 'ours, where Inductor calls ATen')}, "
                         f"{len(configs)} configuration(s)")
            continue
        notes.append(f"{kernel.name}: {kernel.heuristic}, {len(configs)} configuration(s) of Inductor's heuristics"
                     + (", starting from its autotuner's choice" if picked else ""))

    steps = []
    tf32_libraries = _tf32_libraries(spec)
    for step in plan.steps:
        if "kernel" in step:
            kernel = step["kernel"]
            tunable = names[kernel.name]
            entry = {"kernel": kernel.name, "grid": _grid(kernel, step["numels"], tunable)}
            if several:
                entry.update(options[kernel.name])
            entry["args"] = [_ref(a) for a in step["args"]]
            steps.append(entry)
            # Persistent reductions and static kernels reassign their numels in their bodies; the launch
            # still passes them, as Inductor's does.
        else:
            entry = {"library": step["library"], "args": [_ref(a) for a in step["args"]]}
            options = dict(step["options"])
            tf32 = step.get("dtype") == "f32" and step["library"].split(".")[0] in tf32_libraries
            if tf32:
                options["math"] = "tf32"
            if options:
                entry["options"] = options
            steps.append(entry)
            notes.append(f"extern_kernels -> {step['library']}" + (" (TF32, as the capture ran)" if tf32 else ""))

    used = {id(a.root()) for s in plan.steps for a in s["args"] if isinstance(a, _Storage)}
    for storage in plan.storages:
        if id(storage) in used and storage.shape_nodes is None:
            raise Untranslatable(f"the buffer {storage.name}", "call() asserts no shape for it")
    temporaries = [{"name": s.name, "dtype": s.dtype, "shape": _temporary_shape(plan, s)}
                   for s in plan.storages if s.output is None and id(s) in used]
    block = {"temporaries": temporaries, "steps": steps} if temporaries else {"steps": steps}
    texts = bodies + [_HELPERS[name] for name in helpers]
    source = _source(block, bodies, helpers, bool(re.search(r"\blibdevice\.", "\n".join(texts))))
    if binding.constraints:
        notes.append("specialised by Inductor to " + ", ".join(binding.constraints))
    return {"source": source, "tunables": tunables, "constraints": binding.constraints,
            "notes": "Translated from torch.compile's (Inductor's) output code: " + "; ".join(notes) + "."}


def _ref(arg):
    if isinstance(arg, _Storage):
        arg = arg.root()
        return arg.output or arg.name
    return arg


def _source(block, bodies, helpers, libdevice):
    plan_text = json.dumps(block, indent=None)
    # One step a line keeps the block readable where a person or a model reads it.
    plan_text = plan_text.replace('{"kernel"', '\n   {"kernel"').replace('{"library"', '\n   {"library"')
    parts = ['"""kernelevolve-plan\n' + plan_text + '\n"""', "import triton", "import triton.language as tl"]
    if libdevice:
        parts.append("from triton.language.extra import libdevice")
    text = "\n".join(parts) + "\n\n"
    for name, helper in _HELPERS.items():
        if name in helpers:
            text += "\n" + helper + "\n"
    for body in bodies:
        text += "\n@triton.jit\n" + body + "\n\n"
    return text
