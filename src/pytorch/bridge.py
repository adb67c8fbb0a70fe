# The Python side of a PyTorch problem (src/pytorch/): KernelEvolve runs this script with the interpreter
# that imports torch. It is trusted code running a trusted module; candidates never run in this process.
#
#   probe
#       exits 0: this interpreter imports torch.
#   describe --module FILE [--device D] [--sizes JSON]
#       prints the kernel signature derived from one call of the module (README, "Bring your PyTorch
#       module") and its workloads: one per entry of the problem's get_workloads(), if it has one, each of
#       which must give the same signature; else the one observed. Or {"error": ...} naming what could not
#       be mapped, and exits.
#   serve --module FILE --device D (--arena-fd N | --arena-ipc HEX) --arena-bytes B [--model-seed S]
#       answers requests, one JSON line each on stdin, with one JSON line on stdout: "draw" writes the
#       problem's own inputs (get_inputs() under a seed) and the module's weights into the shared arena,
#       "run" runs the module on tensors viewing the arena and writes its outputs there (the reference,
#       or a baseline, eager or torch.compile, timed), "prepare" says whether a mode can run here. Only
#       the module named at start ever runs: a request carries offsets, dtypes, shapes, sizes, seeds and
#       a mode, never code or paths.
import importlib.util
import inspect
import json
import math
import mmap
import os
import sys
import traceback

import torch

DTYPES = {
    torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.float64: "f64",
    torch.int64: "i64", torch.int32: "i32", torch.int8: "i8", torch.uint8: "u8", torch.bool: "u8",
}
TORCH_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "f64": torch.float64,
                "i64": torch.int64, "i32": torch.int32, "i8": torch.int8, "u8": torch.uint8}


class Unmappable(Exception):
    pass


def load_module(path):
    directory = os.path.dirname(os.path.abspath(path))
    if directory not in sys.path:
        sys.path.insert(0, directory)
    spec = importlib.util.spec_from_file_location("kernelevolve_problem", path)
    if spec is None or spec.loader is None:
        raise Unmappable(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, name):
            raise Unmappable(f"{path} defines no {name}: a problem in KernelBench's format has class Model(nn.Module), "
                             "get_inputs() and get_init_inputs()")
    return module


def int_globals(module):
    """The module's top-level ints, in definition order: the names its sizes go by."""
    return [(k, v) for k, v in vars(module).items() if type(v) is int and not k.startswith("_")]


def configure(module, sizes):
    """Sets the module's size globals for a workload, so get_init_inputs() and get_inputs() follow it."""
    known = dict(int_globals(module))
    for name, value in (sizes or {}).items():
        if name in known:
            setattr(module, name, int(value))


def on_device(device):
    """Makes tensor factories (torch.randn in get_inputs, a layer's weights) allocate on `device` where this
    PyTorch can (2.0 and later): drawing a GPU problem's inputs on the host and copying them over cost some
    60 ms a trial for 32 MB (the CPU's random number generator, then the bus)."""
    import contextlib
    if torch.device(device).type == "cpu" or not hasattr(torch.device, "__enter__"):
        return contextlib.nullcontext()
    return torch.device(device)


def build_model(module, device, seed):
    torch.manual_seed(seed)
    with on_device(device):
        init = module.get_init_inputs()
        model = module.Model(*init)
    return model.to(device).eval()


def draw_inputs(module, device, seed):
    torch.manual_seed(seed)
    with on_device(device):
        inputs = list(module.get_inputs())
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]


def forward_names(model, count):
    names = []
    try:
        for p in inspect.signature(model.forward).parameters.values():
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                names.append(p.name)
            elif p.kind == p.VAR_POSITIONAL:
                names.extend(f"{p.name}{i}" for i in range(count - len(names)))
    except (TypeError, ValueError):
        pass
    names = names[:count]
    names += [f"in{i}" for i in range(len(names), count)]
    return [identifier(n) for n in names]


def identifier(name):
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return out if out and not out[0].isdigit() else "p_" + out


def weight_name(key):
    """The kernel parameter a state-dict entry becomes: fc.weight -> fc_weight."""
    return identifier(key.replace(".", "_"))


def as_outputs(result):
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, (tuple, list)) and result and all(isinstance(r, torch.Tensor) for r in result):
        return list(result)
    raise Unmappable(f"forward returns {type(result).__name__}"
                     + (" holding non-tensors" if isinstance(result, (tuple, list)) else "")
                     + ": a kernel's outputs must be a tensor or a tuple of tensors")


def storage_ptr(t):
    try:
        return t.untyped_storage().data_ptr()
    except AttributeError:
        return t.storage().data_ptr()


def call(model, params, args):
    try:
        from torch.func import functional_call
    except ImportError:
        from torch.nn.utils.stateless import functional_call
    return functional_call(model, params, tuple(args))


def requested_workloads(module, defaults):
    """get_workloads(), checked: a non-empty list of dicts binding the module's int globals to ints; [{}]
    (the module's own values) when the problem has no get_workloads()."""
    if not callable(getattr(module, "get_workloads", None)):
        return [{}]
    listed = module.get_workloads()
    if not isinstance(listed, (list, tuple)) or not listed:
        raise Unmappable(f"get_workloads() returns {listed!r}: it must return a non-empty list of dicts, each "
                         "binding the module's int globals (its sizes) to values")
    known = ", ".join(defaults) or "none"
    workloads = []
    for i, w in enumerate(listed):
        if not isinstance(w, dict):
            raise Unmappable(f"get_workloads()[{i}] is a {type(w).__name__}, not a dict of the module's int globals")
        for k, v in w.items():
            if k not in defaults:
                raise Unmappable(f"get_workloads()[{i}] {workload_text(w)} names '{k}', which is not one of the "
                                 f"module's int globals (known: {known})")
            if type(v) is not int:
                raise Unmappable(f"get_workloads()[{i}] {workload_text(w)} sets '{k}' to {v!r}, not an int")
        workloads.append(dict(w))
    return workloads


def workload_text(w):
    return "{" + ", ".join(f"{k}: {v}" for k, v in w.items()) + "}"


class Call:
    """One call of the module at its globals' current values: what a signature is derived from."""

    def __init__(self, module, device, check_data_dependence):
        model = build_model(module, device, 0)
        self.inputs = draw_inputs(module, device, 1)
        self.names = forward_names(model, len(self.inputs))
        with torch.no_grad():
            self.outputs = as_outputs(model(*self.inputs))
        self.state = model.state_dict()
        self.sizes = dict(int_globals(module))
        for i, o in enumerate(self.outputs):
            if any(isinstance(x, torch.Tensor) and storage_ptr(x) == storage_ptr(o) for x in self.inputs) or \
                    any(storage_ptr(t) == storage_ptr(o) for t in self.state.values()):
                raise Unmappable(f"output {i} is written in place into an input or a weight: a kernel's outputs must "
                                 "be buffers of their own")
            if o.dtype not in DTYPES:
                raise Unmappable(f"output {i} has dtype {o.dtype}, which no kernel parameter type holds")
        if not check_data_dependence:
            return
        # A second draw: shapes that follow the data, not the sizes, cannot be a fixed signature.
        again = draw_inputs(module, device, 2)
        with torch.no_grad():
            outputs2 = as_outputs(model(*again))
        for i, (a, b) in enumerate(zip(self.inputs, again)):
            if isinstance(a, torch.Tensor) and tuple(a.shape) != tuple(b.shape):
                raise Unmappable(f"input '{self.names[i]}' has shape {list(a.shape)} in one draw of get_inputs() and "
                                 f"{list(b.shape)} in another")
        for i, (a, b) in enumerate(zip(self.outputs, outputs2)):
            if tuple(a.shape) != tuple(b.shape):
                raise Unmappable(f"output {i} has a data-dependent shape ({list(a.shape)} for one draw of the inputs, "
                                 f"{list(b.shape)} for another)")

    def params(self):
        """The kernel's parameters for this call, in order (inputs, weights, outputs), shapes as numbers."""
        params = []
        for name, x in zip(self.names, self.inputs):
            if isinstance(x, torch.Tensor):
                if x.dtype not in DTYPES:
                    raise Unmappable(f"input '{name}' has dtype {x.dtype}, which no kernel parameter type holds")
                params.append({"name": name, "dtype": DTYPES[x.dtype], "role": "in", "shape": list(x.shape)})
            elif type(x) is int or type(x) is bool:
                params.append({"name": name, "dtype": "i64", "role": "scalar", "value": int(x)})
            elif type(x) is float:
                params.append({"name": name, "dtype": "f32", "role": "scalar", "value": x})
            else:
                raise Unmappable(f"input '{name}' is a {type(x).__name__}: only tensors, ints and floats map to a "
                                 "kernel's parameters")
        for key, t in self.state.items():
            if t.dtype not in DTYPES:
                raise Unmappable(f"weight '{key}' has dtype {t.dtype}, which no kernel parameter type holds")
            params.append({"name": weight_name(key), "dtype": DTYPES[t.dtype], "role": "in",
                           "shape": list(t.shape), "state": key})
        for i, o in enumerate(self.outputs):
            params.append({"name": "out" if len(self.outputs) == 1 else f"out{i}", "dtype": DTYPES[o.dtype],
                           "role": "out", "shape": list(o.shape)})
        return params


def signature_change(base, other):
    """What differs between two calls' parameters beyond their sizes (names, dtypes, roles, ranks, scalar
    values), in words; None when nothing does."""
    if [p["name"] for p in base] != [p["name"] for p in other]:
        return (f"its parameters are ({', '.join(p['name'] for p in other)}), not "
                f"({', '.join(p['name'] for p in base)})")
    for a, b in zip(base, other):
        for field in ("role", "dtype"):
            if a[field] != b[field]:
                return f"'{a['name']}' has {field} {b[field]}, not {a[field]}"
        if "shape" in a and len(a["shape"]) != len(b["shape"]):
            return f"'{a['name']}' has {len(b['shape'])} dimensions, not {len(a['shape'])}"
        if a["role"] == "scalar" and a["value"] != b["value"]:
            return f"the scalar '{a['name']}' is {b['value']}, not {a['value']} (a scalar has one value for every workload)"
    return None


def describe(path, device, sizes):
    module = load_module(path)
    configure(module, sizes)
    defaults = dict(int_globals(module))
    workloads = requested_workloads(module, defaults)

    def label(i):
        return f"get_workloads()[{i}] {workload_text(workloads[i])}"

    calls = []
    for i, w in enumerate(workloads):
        for k, v in defaults.items():  # each workload from the module's own values, not from the previous one
            setattr(module, k, v)
        configure(module, w)
        try:
            calls.append(Call(module, device, check_data_dependence=i == 0))
        except Unmappable as e:
            raise Unmappable(f"{label(i)}: {e}" if len(workloads) > 1 else str(e)) from None
    # The signature is derived once, from the first call; every other workload must give the same one.
    params = calls[0].params()
    others = [c.params() for c in calls[1:]]
    for i, other in enumerate(others, 1):
        change = signature_change(params, other)
        if change:
            raise Unmappable(f"{label(i)} changes the kernel's signature derived from {label(0)}: {change}")

    # A dimension is named after the first int global (in definition order) that has its value in every
    # workload; 0 and 1 are never names. A dimension that follows no global is a literal if it never changes.
    names_in_order = list(defaults)
    sizes_seen = {}  # size name -> its value in each workload, in order of first appearance

    def shape_of(index):
        dims = []
        for d in range(len(params[index]["shape"])):
            values = tuple([params[index]["shape"][d]] + [o[index]["shape"][d] for o in others])
            name = next((k for k in names_in_order
                         if tuple(c.sizes[k] for c in calls) == values and any(v not in (0, 1) for v in values)), None)
            if name is not None:
                sizes_seen.setdefault(name, values)
                dims.append(name)
            elif len(set(values)) == 1:
                dims.append(values[0])
            else:
                changed = next(i for i, v in enumerate(values) if v != values[0])
                raise Unmappable(f"{label(changed)}: dimension {d} of '{params[index]['name']}' is {values[changed]} "
                                 f"there and {values[0]} in {label(0)}, and no int global of the module has those "
                                 "values: a size that changes must be a global of its own")
        return dims

    for index, p in enumerate(params):
        if "shape" in p:
            p["shape"] = shape_of(index)
    for name, values in sizes_seen.items():
        params.append({"name": name, "dtype": "i64", "role": "size"})
    # A global a workload changes must reach the kernel as a size: the reference is run with the sizes alone.
    for i, w in enumerate(workloads):
        for k, v in w.items():
            if k not in sizes_seen and v != defaults[k]:
                raise Unmappable(f"{label(i)} sets '{k}', but no dimension of the kernel's signature follows it: a "
                                 f"workload binds sizes only, and the reference would run with {k} = {defaults[k]}")
    bound = [{name: values[i] for name, values in sizes_seen.items()} for i in range(len(calls))]
    return {"params": params, "workload": bound[0], "workloads": bound, "forward": calls[0].names,
            "dtypes": sorted({p["dtype"] for p in params if p["role"] != "size"}),
            "torch": torch.__version__}


class Arena:
    """The memory KernelEvolve shares with this process: a memfd on the CPU; on a GPU, device memory the
    worker allocated and exported with cuIpcGetMemHandle, opened here, so no trial's tensors cross the bus."""

    def __init__(self, args):
        self.device = torch.device(args.device)
        self.views = {}
        size = args.arena_bytes
        if self.device.type == "cpu":
            self.map = mmap.mmap(args.arena_fd, size)
            self.base = torch.frombuffer(self.map, dtype=torch.uint8) if size > 0 else torch.empty(0, dtype=torch.uint8)
        elif self.device.type == "cuda":
            self.base = open_ipc(self.device, args.arena_ipc, size)
        else:
            raise Unmappable(f"no arena on a {self.device.type} device")

    def view(self, spec):
        # The same few views come back in every request: made once (a reference trial's host cost is
        # mostly this process's own overhead).
        key = (spec[0], spec[1], tuple(spec[2]))
        view = self.views.get(key)
        if view is None:
            offset, dtype, shape = key
            dt = TORCH_DTYPES[dtype]
            count = math.prod(shape) if shape else 1
            nbytes = count * torch.empty(0, dtype=dt).element_size()
            view = self.base[offset:offset + nbytes].view(dt).view(shape)
            if len(self.views) > 4096:
                self.views.clear()
            self.views[key] = view
        return view


def open_ipc(device, handle_hex, size):
    """The worker's allocation, as a uint8 tensor on `device`: cuIpcOpenMemHandle in the primary context,
    the one PyTorch uses, and __cuda_array_interface__ to wrap the pointer without a copy."""
    import ctypes

    torch.cuda.set_device(device)
    torch.empty(1, device=device)  # makes PyTorch create (and make current) the device's primary context
    lib = ctypes.CDLL("libcuda.so.1")

    class Handle(ctypes.Structure):
        _fields_ = [("reserved", ctypes.c_char * 64)]

    opener = getattr(lib, "cuIpcOpenMemHandle_v2", None) or lib.cuIpcOpenMemHandle
    opener.argtypes = [ctypes.POINTER(ctypes.c_uint64), Handle, ctypes.c_uint]
    handle = Handle.from_buffer_copy(bytes.fromhex(handle_hex))
    pointer = ctypes.c_uint64(0)
    status = opener(ctypes.byref(pointer), handle, 1)  # CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
    if status != 0:
        raise Unmappable(f"cuIpcOpenMemHandle failed with CUresult {status}")

    class Shared:
        __cuda_array_interface__ = {"shape": (size,), "typestr": "|u1", "data": (pointer.value, False),
                                    "version": 2, "strides": None}

    holder = Shared()
    tensor = torch.as_tensor(holder, device=device)
    tensor._kernelevolve_holder = holder
    return tensor


class Timer:
    """Times one call as KernelEvolve's devices time a kernel: on a GPU, events on the current stream
    bracketing the call, with L2 flushed first by reading a buffer twice its size (as the CUDA device does);
    on the CPU, the steady clock around the call, caches left warm."""

    def __init__(self, device):
        self.device = device
        self.flush_buffer = None
        if device.type == "cuda":
            l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 64 << 20)
            self.flush_buffer = torch.ones(max(2 * l2, 1 << 20) // 4, dtype=torch.float32, device=device)
            self.start = torch.cuda.Event(enable_timing=True)
            self.stop = torch.cuda.Event(enable_timing=True)

    def time(self, fn, flush):
        import time
        if self.device.type != "cuda":
            t0 = time.perf_counter_ns()
            out = fn()
            return out, (time.perf_counter_ns() - t0) / 1000.0
        if flush:
            self.flush_buffer.sum()
        self.start.record()
        out = fn()
        self.stop.record()
        self.stop.synchronize()
        return out, self.start.elapsed_time(self.stop) * 1000.0


class Server:
    def __init__(self, args, arena):
        self.module = load_module(args.module)
        self.device = arena.device
        self.arena = arena
        self.model_seed = args.model_seed
        self.timer = Timer(self.device)
        self.sizes = None
        self.model = None
        self.compiled = None

    def workload(self, sizes):
        if sizes != self.sizes or self.model is None:
            # The last workload's module goes before the next is built: two sets of weights never coexist.
            self.model, self.weights, self.compiled = None, [], None
            self.release_cached()
            configure(self.module, sizes)
            self.model = build_model(self.module, self.device, self.model_seed)
            self.names = forward_names(self.model, len(draw_inputs(self.module, self.device, 0)))
            # The weights by parameter name, once per workload: every run and draw looks them up. The
            # state dict's tensors are the module's own, so a copy into them is a copy into the module.
            self.weights = [(key, weight_name(key), t) for key, t in self.model.state_dict().items()]
            self.compiled = None
            self.sizes = sizes
            inputs = None  # a full draw, made only to name the inputs: let go before the next one
            self.release_cached()
        return self.model

    # Temporaries cached by PyTorch past this many bytes go back to the device after a draw or a run: kept,
    # get_inputs()' tensors and the module's outputs (and its intermediates) would stay reserved beside the
    # arena, where the bridge needs one of them at a time and other processes on the GPU need the rest.
    # Below it the cache stays, for a small problem's speed.
    RELEASE_BYTES = 256 << 20

    def release_cached(self):
        if self.device.type == "cuda" and \
                torch.cuda.memory_reserved(self.device) - torch.cuda.memory_allocated(self.device) >= self.RELEASE_BYTES:
            torch.cuda.empty_cache()

    def sync(self):
        # The worker reads the arena as soon as it has the reply: PyTorch's work on it must be done.
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def forward_args(self, request):
        views = request["views"]
        scalars = request.get("scalars", {})
        args = []
        for name in self.names:
            if name in views:
                args.append(self.arena.view(views[name]))
            elif name in scalars:
                args.append(scalars[name])
            else:
                raise Unmappable(f"the request names no input '{name}'")
        return args

    def params(self, request):
        views = request["views"]
        return {key: self.arena.view(views[name]) for key, name, _ in self.weights if name in views}

    def draw(self, request):
        self.workload(request.get("sizes"))
        inputs = draw_inputs(self.module, self.device, request["seed"])
        views = request["views"]
        for name, x in zip(self.names, inputs):
            if name in views and isinstance(x, torch.Tensor):
                v = self.arena.view(views[name])
                if tuple(v.shape) != tuple(x.shape):
                    raise Unmappable(f"input '{name}': the spec's shape {list(v.shape)} for this workload, the problem's "
                                     f"get_inputs() {list(x.shape)}")
                v.copy_(x)
        for _, name, t in self.weights:
            if name in views:
                v = self.arena.view(views[name])
                if tuple(v.shape) != tuple(t.shape):
                    raise Unmappable(f"weight '{name}': the spec's shape {list(v.shape)} for this workload, the "
                                     f"module's {list(t.shape)}")
                v.copy_(t)
        self.sync()
        inputs = x = None  # get_inputs()' tensors, copied into the arena: not kept
        self.release_cached()
        return {"ok": True}

    def prepare(self, request):
        mode = request.get("mode", "reference")
        if mode == "compile" and not hasattr(torch, "compile"):
            return {"ok": False, "error": f"torch {torch.__version__} has no torch.compile (PyTorch 2.0 added it)"}
        if mode == "compile" and self.device.type == "cpu":
            return {"ok": False, "error": "torch.compile is measured on GPUs only: on the CPU, Inductor builds C++ with "
                                          "the system's compiler, minutes per module"}
        if mode not in ("reference", "eager", "compile"):
            return {"ok": False, "error": f"unknown mode {mode!r}"}
        return {"ok": True}

    def run(self, request):
        """The module on the arena's tensors, its outputs written back there. Mode "reference" calls it with
        the arena's weights (the evaluator may have drawn them); "eager" and "compile" are the baselines,
        timed as a user runs the module: its own parameters (loaded from the arena first, untimed), and for
        "compile" the module under torch.compile."""
        model = self.workload(request.get("sizes"))
        args = self.forward_args(request)
        mode = request.get("mode", "reference")
        time_us = None
        with torch.no_grad():
            if mode == "reference":
                params = self.params(request)
                outputs = as_outputs(call(model, params, args) if params else model(*args))
            else:
                for _, name, weight in self.weights:
                    if name in request["views"]:
                        weight.copy_(self.arena.view(request["views"][name]))
                if mode == "compile":
                    if self.compiled is None:
                        self.compiled = torch.compile(model)
                    fn = self.compiled
                else:
                    fn = model
                result, time_us = self.timer.time(lambda: fn(*args), request.get("flush", False))
                outputs = as_outputs(result)
        names = request["outputs"]
        if len(names) != len(outputs):
            raise Unmappable(f"the module returned {len(outputs)} outputs, the spec names {len(names)}")
        for name, o in zip(names, outputs):
            v = self.arena.view(request["views"][name])
            if tuple(v.shape) != tuple(o.shape):
                raise Unmappable(f"output '{name}': the spec's shape {list(v.shape)}, the module's {list(o.shape)}")
            v.copy_(o)
        self.sync()
        outputs = result = o = None  # the module's outputs, copied into the arena: not kept
        self.release_cached()
        reply = {"ok": True}
        if time_us is not None and request.get("timed", False):
            reply["time_us"] = time_us
        return reply


def serve(args):
    arena = Arena(args)
    server = Server(args, arena)
    print(json.dumps({"ok": True, "torch": torch.__version__}), flush=True)
    for line in sys.stdin:
        try:
            request = json.loads(line)
            op = request.get("op")
            if op == "draw":
                reply = server.draw(request)
            elif op == "run":
                reply = server.run(request)
            elif op == "prepare":
                reply = server.prepare(request)
            elif op == "quit":
                break
            else:
                reply = {"ok": False, "error": f"unknown request {op!r}"}
        except Exception as e:  # the reference's own failure, told to KernelEvolve, which blames the reference
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()[-2000:]}
        print(json.dumps(reply), flush=True)


def main():
    import argparse
    parser = argparse.ArgumentParser(prog="kernelevolve-pytorch-bridge")
    parser.add_argument("mode", choices=["probe", "describe", "serve"])
    parser.add_argument("--module", default="")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--sizes", default="")
    parser.add_argument("--arena-fd", type=int, default=-1)
    parser.add_argument("--arena-bytes", type=int, default=0)
    parser.add_argument("--arena-ipc", default="")
    parser.add_argument("--model-seed", type=int, default=0)
    args = parser.parse_args()
    if args.mode == "probe":  # torch imported: this interpreter will do
        return
    torch.set_num_threads(max(1, int(os.environ.get("KE_TORCH_THREADS", "1"))))
    # The reference in full fp32: TF32 would put a matmul or a convolution outside fp32's tolerance.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if args.mode == "describe":
        try:
            print(json.dumps(describe(args.module, args.device, json.loads(args.sizes) if args.sizes else None)))
        except Unmappable as e:
            print(json.dumps({"error": str(e)}))
        except Exception as e:
            print(json.dumps({"error": f"the module failed: {type(e).__name__}: {e}",
                              "trace": traceback.format_exc()[-2000:]}))
        return
    serve(args)


if __name__ == "__main__":
    main()
