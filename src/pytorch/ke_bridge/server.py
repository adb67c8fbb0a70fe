"""`serve`'s requests (Server): drawing the problem's inputs and weights into the arena, running the module on the
arena's tensors (the reference, in float64, a backward, or a timed baseline), and whether a mode can run here."""

import copy
import importlib.util
import math
import re

import torch

from .errors import Unmappable
from .loading import build_model, draw_inputs, load_module, module_at
from .module_call import as_module, as_outputs, call, forward_names, output_names, weight_name, wide
from .sparse import sparse_parts, SPARSE_PARTS, sparse_weights
from .timing import Timer
from .variant import Variant


class Server:
    def __init__(self, args, arena):
        self.path = args.module
        self.module = load_module(args.module)
        self.device = arena.device
        self.arena = arena
        self.model_seed = args.model_seed
        self.variant = Variant(args.dtype, args.backward, args.with_forward)
        self.timer = Timer(self.device)
        self.sizes = None
        self.model = None
        self.compiled = None
        self.sparse_outputs = {}  # grad_<w>_<part> of a sparse table's gradient: the weight's name

    def workload(self, sizes):
        if sizes != self.sizes or self.model is None:
            # The last workload's module goes before the next is built: two sets of weights never coexist.
            self.model, self.weights, self.compiled = None, [], None
            self.release_cached()
            self.module = module_at(self.path, sizes)
            self.model = self.variant.model(build_model(self.module, self.device, self.model_seed))
            inputs = draw_inputs(self.module, self.device, 0)
            self.names = forward_names(self.model, len(inputs))
            # A 0-d tensor is a one-element buffer, [1], in the arena; the module gets it as 0-d, as its own.
            self.zero_d = {n for n, x in zip(self.names, inputs) if isinstance(x, torch.Tensor) and x.dim() == 0}
            # The weights by parameter name, once per workload: every run and draw looks them up. The
            # state dict's tensors are the module's own, so a copy into them is a copy into the module.
            self.weights = [(key, weight_name(key), t) for key, t in self.model.state_dict().items()]
            sparse = sparse_weights(self.model)
            self.sparse_outputs = {f"grad_{name}_{part}": name for key, name, _ in self.weights if key in sparse
                                   for part in SPARSE_PARTS}
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
                args.append(as_module(self.arena.view(views[name]), name in self.zero_d))
            elif name in scalars:
                args.append(scalars[name])
            else:
                raise Unmappable(f"the request names no input '{name}'")
        return args

    def params(self, request):
        views = request["views"]
        return {key: as_module(self.arena.view(views[name]), t.dim() == 0) for key, name, t in self.weights if name in views}

    def draw(self, request):
        """get_inputs() and the module's weights into the arena. The reply gives each float tensor's scale as a
        range, [mean - std, mean + std]: the evaluator draws its later trials at the problem's own scale, not
        at unit scale (a network of unit-scale weights gives outputs of thousands, where fp32's rounding alone
        passes 1e-4). A randn input's range is [-1, 1], the unit scale it had before."""
        self.workload(request.get("sizes"))
        inputs = draw_inputs(self.module, self.device, request["seed"])
        views = request["views"]
        ranges = {}

        def put(name, t, what, source):
            v = as_module(self.arena.view(views[name]), t.dim() == 0)
            if tuple(v.shape) != tuple(t.shape):
                raise Unmappable(f"{what}: the spec's shape {list(v.shape)} for this workload, {source} {list(t.shape)}")
            with torch.no_grad():  # an input get_inputs() marks requires_grad: its values, not its graph
                v.copy_(t)
            if t.is_floating_point() and t.numel() > 1:
                # Its mean and spread, not its extremes: a randn input's extremes lie at 4 or 5 sigma.
                std, mean = (float(v) for v in torch.std_mean(t.float()))
                if math.isfinite(mean) and math.isfinite(std):
                    ranges[name] = [mean - std, mean + std]

        for name, x in zip(self.names, inputs):
            if name in views and isinstance(x, torch.Tensor):
                put(name, x, f"input '{name}'", "the problem's get_inputs()")
        for _, name, t in self.weights:
            if name in views:
                put(name, t, f"weight '{name}'", "the module's")
        if self.variant.backward:
            # The gradients of the outputs, a backward's other inputs: unit normal, as a loss's would be, under
            # the draw's seed (get_inputs() drew from it just now). A grad_<name> of an input or a weight is an
            # output, and is left alone.
            known = set(self.names) | {name for _, name, _ in self.weights}
            for name, view in sorted(views.items()):
                if name.startswith("grad_") and name[5:] not in known and name not in self.sparse_outputs:
                    put(name, torch.randn(view[2], device=self.device), f"gradient '{name}'", "drawn")
        self.sync()
        inputs = x = None  # get_inputs()' tensors, copied into the arena: not kept
        self.release_cached()
        return {"ok": True, "ranges": ranges}

    def prepare(self, request):
        mode = request.get("mode", "reference")
        if mode == "compile" and not hasattr(torch, "compile"):
            return {"ok": False, "error": f"torch {torch.__version__} has no torch.compile (PyTorch 2.0 added it)"}
        if mode == "compile" and self.device.type == "cpu":
            # On the CPU Inductor writes C++ and builds it with the system's compiler (seconds per module): it needs
            # its Inductor (torch 2.x; 1.13 stops above) and a C++ compiler, which its first call finds or fails on.
            try:
                importlib.import_module("torch._inductor.config")
            except ImportError as e:
                return {"ok": False, "error": f"torch {torch.__version__} has no Inductor for the CPU: {e}"}
        if mode not in ("reference", "reference64", "eager", "compile"):
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
        if self.variant.backward:
            return self.run_backward(model, args, request, mode)
        time_us = None
        with torch.no_grad():
            if mode == "reference":
                params = self.params(request)
                outputs = as_outputs(call(model, params, args) if params else model(*args))
            elif mode == "reference64":
                # The same call in float64 on the same tensors: the exact answer that a float32 reference
                # only approximates. A copy of the module, dropped after: float64 weights held only now.
                params = {k: wide(v) for k, v in self.params(request).items()}
                args64 = [wide(a) for a in args]
                model64 = self.model64(model, params)
                outputs = as_outputs(call(model64, params, args64) if params else model64(*args64))
                model64 = params = args64 = None
            else:
                fn = self.baseline(model, request, mode)
                result, time_us = self.timer.time(lambda: fn(*args), request.get("flush", False))
                outputs = as_outputs(result)
        names = request["outputs"]
        if len(names) != len(outputs):
            raise Unmappable(f"the module returned {len(outputs)} outputs, the spec names {len(names)}")
        return self.reply(dict(zip(names, outputs)), names, request, time_us)

    def model64(self, model, params):
        """The module to call on float64 copies of `params`: itself when every weight is given (the usual
        case), else a float64 copy of it, so that none of its own tensors stays float32."""
        whole = set(params) >= {key for key, _, _ in self.weights}
        return model if whole else copy.deepcopy(model).double()

    def baseline(self, model, request, mode):
        """The module as a user runs it, for "eager" and "compile": its own parameters, loaded from the arena."""
        with torch.no_grad():
            for _, name, weight in self.weights:
                if name in request["views"]:
                    weight.copy_(as_module(self.arena.view(request["views"][name]), weight.dim() == 0))
        if mode != "compile":
            return model
        if self.compiled is None:
            self.compiled = torch.compile(model)
        return self.compiled

    def reply(self, results, names, request, time_us):
        """Writes results[name] into each output's view (cast to its dtype) and answers."""
        for name in names:
            o = results[name]
            v = as_module(self.arena.view(request["views"][name]), o.dim() == 0)
            if tuple(v.shape) != tuple(o.shape):
                raise Unmappable(f"output '{name}': the spec's shape {list(v.shape)}, the module's {list(o.shape)}")
            v.copy_(o)
        self.sync()
        results = o = None  # the module's outputs, copied into the arena: not kept
        self.release_cached()
        reply = {"ok": True}
        if time_us is not None and request.get("timed", False):
            reply["time_us"] = time_us
            reply["host_us"] = self.timer.host_us
        return reply

    def run_backward(self, model, args, request, mode):
        """A backward problem's call (Variant). The reference ("reference", and "reference64" alike) is
        autograd in float64 on float64 copies of the arena's inputs, weights and output gradients, each result
        rounded once into its output: the exact gradients that any order of summation only approximates, so
        a kernel whose sums run in another order (atomics) is judged by its distance from them, within the
        tolerance. "eager" and "compile" run the module as a user trains it, in the problem's dtype: the
        forward untimed, then its backward timed (with the forward too for a forward-and-backward problem).
        Each output is found by its name: grad_<input>, grad_<weight>, or a forward output (out, out0, ...)."""
        views, names = request["views"], request["outputs"]
        index = {n: i for i, n in enumerate(self.names)}
        keys = {name: key for key, name, _ in self.weights}
        grad_inputs = [n[5:] for n in names if n.startswith("grad_") and n[5:] in index]
        grad_weights = [n[5:] for n in names if n.startswith("grad_") and n[5:] in keys]
        sparse = list(dict.fromkeys(self.sparse_outputs[n] for n in names if n in self.sparse_outputs))
        grad_weights += [n for n in sparse if n not in grad_weights]
        for n in names:
            if not (n.startswith("grad_") and (n[5:] in index or n[5:] in keys)) and not re.fullmatch(r"out\d*", n) \
                    and n not in self.sparse_outputs:
                raise Unmappable(f"output '{n}' of a backward problem is neither the gradient of an input or a weight "
                                 "(grad_<name>) nor an output of the forward (out, out0, ...)")
        wide_mode = mode in ("reference", "reference64")
        cast = wide if wide_mode else (lambda t: t.detach() if isinstance(t, torch.Tensor) else t)
        args = [cast(a) for a in args]
        for n in grad_inputs:
            args[index[n]] = args[index[n]].detach().requires_grad_(True)
        if wide_mode:
            params = {k: wide(v) for k, v in self.params(request).items()}
            for n in grad_weights:
                params[keys[n]] = params[keys[n]].detach().requires_grad_(True)
            model64 = self.model64(model, params)
            fn = (lambda *a: call(model64, params, a)) if params else model64
            weight_of = params.__getitem__
        else:
            fn = self.baseline(model, request, mode)
            own = dict(model.named_parameters())
            missing = [keys[n] for n in grad_weights if keys[n] not in own]
            if missing:
                raise Unmappable(f"the module has no parameter {missing[0]!r} to give the gradient of")
            weight_of = own.__getitem__
        targets = [args[index[n]] for n in grad_inputs] + [weight_of(keys[n]) for n in grad_weights]

        def forward():
            return as_outputs(fn(*args))

        def backward(outs):
            pairs = []
            for name, o in zip(output_names(len(outs)), outs):
                if f"grad_{name}" in views and o.requires_grad:
                    pairs.append((o, cast(self.arena.view(views[f"grad_{name}"])).reshape(o.shape)))
            got = torch.autograd.grad([o for o, _ in pairs], targets, [g for _, g in pairs], allow_unused=True)
            # A sparse gradient coalesced here, timed: eager's work is the kernel's, rows deduplicated and summed.
            return [torch.zeros_like(t) if g is None else g.coalesce() if g.is_sparse else g
                    for g, t in zip(got, targets)]

        time_us = None
        timed = not wide_mode
        with torch.enable_grad():
            if timed and self.variant.with_forward:
                def step():
                    o = forward()
                    return o, backward(o)
                (outs, grads), time_us = self.timer.time(step, request.get("flush", False))
            elif timed:
                outs = forward()
                grads, time_us = self.timer.time(lambda: backward(outs), request.get("flush", False))
            else:
                outs = forward()
                grads = backward(outs)
        results = {name: o.detach() for name, o in zip(output_names(len(outs)), outs)}
        for n, g in zip(grad_inputs + grad_weights, grads):
            if n in sparse:
                results.update({f"grad_{n}_{part}": t for part, t in sparse_parts(g, n, views).items()})
            else:
                results[f"grad_{n}"] = g
        missing = [n for n in names if n not in results]
        if missing:
            raise Unmappable(f"the spec names output '{missing[0]}', the module returned {len(outs)} outputs")
        outs = grads = targets = args = fn = None
        return self.reply(results, names, request, time_us)
