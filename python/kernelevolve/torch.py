"""A stored program as a PyTorch operator, and a model's submodule replaced by it.

    op = kernelevolve.torch.load("run.db")           # the latest run's best, as torch.ops.kernelevolve.<name>
    kernelevolve.torch.replace(model, "interaction", op)
    y = model(x)                                     # calls the program; op.calls counts it

The operator is defined through ``torch.library.Library`` with CPU and CUDA kernels, and (PyTorch 2.4 and
later) a fake implementation derived from the signature, and the backward program's formula where it has one,
registered with ``torch.library.register_fake`` and ``register_autograd``, so that
``torch.compile(fullgraph=True)`` and ``torch.export`` take it whole. That is what ``torch.library.custom_op``
registers too, without the Python kernel it puts at the Autograd key of every operator (7 µs a call on the CPU).
Older PyTorch (1.13) has no such registration: there the operator has Meta kernels instead, and works eagerly
(PyTorch 1.13 has neither torch.compile nor torch.export, and no FakeTensor registration of its own).

It runs the program on PyTorch's current stream, on the caller's tensors. It checks their dtypes, devices,
shapes and contiguity; on anything the program was not verified on (another shape, a non-contiguous tensor)
it falls back to the problem's own module, with the same weights, and warns once per reason, unless made
with ``any_shape=True`` (run the program anyway, on sizes it was not verified on) or ``strict=True`` (raise).
"""
import ast
import keyword
import os
import re
import sys
import types
import warnings

import torch

from .program import Error, Program, out_of_range

__all__ = ["load", "replace", "Operator", "Guarded", "HAS_CUSTOM_OP", "MISSING"]

# torch.library.custom_op, register_fake and register_autograd came in PyTorch 2.4.
HAS_CUSTOM_OP = all(hasattr(torch.library, f) for f in ("custom_op", "register_fake", "register_autograd"))
MISSING = (None if HAS_CUSTOM_OP else
           f"torch {torch.__version__} has no torch.library.register_fake (PyTorch 2.4 added it): the operator is "
           "registered through torch.library.Library with CPU, CUDA and Meta kernels alone; torch.compile, "
           "torch.export and torch.library.opcheck are not available")

_DTYPES = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
           "i64": torch.int64, "i32": torch.int32, "i8": torch.int8, "u8": torch.uint8}
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_library = None  # torch.library.Library("kernelevolve", "DEF"): one per namespace and process
_operators = {}  # qualified name -> Operator: a program loaded twice is one operator


def _dimension(expr, sizes):
    """A spec dimension ("N", "2 * H - K + 1", "cdiv(N, 4)") at `sizes`, whose values may be SymInts (the fake
    implementation's), so it is evaluated here rather than by the C API's ke_program_shape."""
    def walk(node):
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            return sizes[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -walk(node.operand)
        if isinstance(node, ast.BinOp):
            a, b = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.Add):
                return a + b
            if isinstance(node.op, ast.Sub):
                return a - b
            if isinstance(node.op, ast.Mult):
                return a * b
            # Sizes are positive, where C's truncating division (the spec's) is floor division.
            if isinstance(node.op, (ast.Div, ast.FloorDiv)):
                return a // b
            if isinstance(node.op, ast.Mod):
                return a % b
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
            values = [walk(a) for a in node.args]
            if node.func.id == "cdiv" and len(values) == 2:
                return (values[0] + values[1] - 1) // values[1]
            if node.func.id in ("min", "max"):
                return (min if node.func.id == "min" else max)(values)
        raise Error("bad spec", f"the dimension {expr!r} is not an integer expression over the sizes")
    return walk(ast.parse(str(expr), mode="eval"))


class Operator:
    """A loaded program as ``torch.ops.kernelevolve.<name>``: call it with the spec's inputs and scalars in
    order (``signature``); it returns the outputs. ``calls`` counts the program's runs, ``fallbacks`` the calls
    the problem's module answered instead."""

    def __init__(self, program, name=None, any_shape=False, strict=False, fallback=True):
        self.program = program
        p = program.provenance
        base = re.sub(r"[^A-Za-z0-9_]", "_", name or f"{p['problem']}_r{p['run']}_n{p['node']}")
        self.name = base if not base[0].isdigit() else "p_" + base
        self.qualname = "kernelevolve::" + self.name
        self.any_shape, self.strict, self.use_fallback = any_shape, strict, fallback
        params = program.params
        self.inputs = [i for i, q in enumerate(params) if q.role in ("in", "inout", "scalar")]
        self.outputs = [i for i, q in enumerate(params) if q.role == "out"]
        self.signature = [params[i].name for i in self.inputs]
        self.calls = 0
        self.fallbacks = 0
        self.backward = None  # the Operator of the backward program (attach_backward), or None
        self.gradient_of = None  # on a backward program's Operator: the forward Operator it differentiates, or None
        self._warned = set()
        self._module = None  # the problem's own module, made at the first fallback
        self._verified_sizes = {tuple(w.get(s) for s in program.sizes) for w in program.workloads}
        self._device_index = int(program.device.split(":")[1]) if ":" in program.device else 0
        # For _run: a plan per distinct call (_plan), and where each argument goes in the program's argument list.
        self._plans = {}
        self._size_slots = [i for i, q in enumerate(params) if q.role == "size"]
        if program.has_half_scalars:  # their bits need converting: through Program.call's general path
            raise Error("bad spec", "an operator with f16 or bf16 scalar arguments is not supported yet")
        self._nargs = len(self.inputs)
        self._tensor_args = tuple(k for k, i in enumerate(self.inputs) if params[i].role != "scalar")
        self._scalar_args = tuple(k for k, i in enumerate(self.inputs) if params[i].role == "scalar")
        # Where each argument goes in the program's argument block: (value slot, argument position).
        self._tensor_slots = tuple((program.value_slot(self.inputs[k]), k) for k in self._tensor_args)
        self._scalar_slots = tuple((program.value_slot(self.inputs[k]), k) for k in self._scalar_args)
        self._output_values = tuple(program.value_slot(i) for i in self.outputs)
        self._size_values = tuple(program.value_slot(i) for i in self._size_slots)
        self._flags = 1 if any_shape else 0  # KE_PROGRAM_ANY_SHAPE
        self._first_tensor = self._tensor_args[0] if self._tensor_args else 0
        self.op = self._register()

    def __call__(self, *args):
        # The call a replaced model makes, kept short: on plain tensors in eager mode the body runs here, without
        # PyTorch's dispatcher, which costs a Python custom operator about 10 µs a call
        # (bench/results/operator_h200.md). Anything else (torch.compile, export, fake, meta or functional
        # tensors, a dispatch or function mode) goes through the registered operator.
        if len(args) != self._nargs:
            return self.op(*args)  # the schema's own error
        grad = _grad_enabled()
        if _modes_active():
            if grad and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
                return self._differentiable(args, dispatch=True)
            return self.op(*args)
        plain = True
        key = []
        for k in self._tensor_args:
            a = args[k]
            if not isinstance(a, torch.Tensor):
                return self._run(*args)  # _bind's error names the argument
            if grad and a.requires_grad:
                return self._differentiable(args, dispatch=False)
            if type(a) not in _PLAIN:
                plain = False
            key.append((a.shape, a.dtype, a.device, a.is_contiguous()))
        if not plain:
            return self.op(*args)
        for k in self._scalar_args:
            key.append(args[k])
        return self._execute(args, tuple(key))

    def __repr__(self):
        return f"<kernelevolve.torch.Operator {self.qualname}({', '.join(self.signature)}): {self.program!r}>"

    # The schema: inputs as Tensors (an inout one written in place), scalars as float or int.
    def _schema(self):
        args, alias = [], iter("abcdefghijklmnopqrstuvwxyz")
        for i in self.inputs:
            q = self.program.params[i]
            if not _IDENT.match(q.name) or keyword.iskeyword(q.name):
                raise Error("bad spec", f"param {q.name!r} cannot name an operator's argument")
            if q.role == "scalar":
                args.append(("float " if q.dtype in ("f32", "f64", "f16", "bf16") else "int ") + q.name)
            else:
                args.append((f"Tensor({next(alias)}!) " if q.role == "inout" else "Tensor ") + q.name)
        n = len(self.outputs)
        ret = "()" if n == 0 else "Tensor" if n == 1 else "(" + ", ".join(["Tensor"] * n) + ")"
        return "(" + ", ".join(args) + ") -> " + ret

    def _register(self):
        global _library
        if self.qualname in _operators:
            raise Error("invalid argument", f"{self.qualname} is registered already (load it once, or name it)")
        schema = self._schema()
        if _library is None:
            _library = torch.library.Library("kernelevolve", "DEF")
        _library.define(self.name + schema)
        for key in ("CPU", "CUDA"):
            _library.impl(self.name, self._run, key)
        if HAS_CUSTOM_OP:
            torch.library.register_fake(self.qualname, self._fake, lib=_library)
        else:
            # Meta tensors pass AutogradMeta first, which has no fallthrough in 1.13.
            for key in ("Meta", "AutogradMeta"):
                _library.impl(self.name, self._fake, key)
        _operators[self.qualname] = self
        # The overload itself: what torch.ops.kernelevolve.<name> resolves to, one Python call fewer per call.
        return getattr(torch.ops.kernelevolve, self.name).default

    # Sizes from the inputs' shapes; the reason the program cannot take them, or None.
    def _bind(self, args, check=True):
        program, sizes = self.program, {}
        for i, arg in zip(self.inputs, args):
            q = program.params[i]
            if q.role == "scalar":
                continue
            if not isinstance(arg, torch.Tensor):
                raise TypeError(f"{self.qualname}: '{q.name}' must be a tensor, not {type(arg).__name__}")
            if check:
                if arg.dtype != _DTYPES[q.dtype]:
                    return None, f"'{q.name}' is {arg.dtype}, the program takes {_DTYPES[q.dtype]}"
                if arg.device.type != program.device_kind or (
                        arg.device.type != "cpu" and (arg.device.index or 0) != self._device_index):
                    return None, f"'{q.name}' is on {arg.device}, the program runs on {program.device}"
                if q.role == "inout" and not arg.is_contiguous():  # written in place: a copy would not be
                    return None, f"'{q.name}' is not contiguous"
            if arg.dim() != len(q.shape):
                return None, f"'{q.name}' has {arg.dim()} dimensions, the program's has {len(q.shape)} ({q.shape})"
            for dim, extent in zip(q.shape, arg.shape):
                if _IDENT.match(str(dim)):
                    if check and dim in sizes and sizes[dim] != extent:
                        return None, f"'{q.name}' gives {dim} = {extent}, another input {sizes[dim]}"
                    sizes.setdefault(dim, extent)
        missing = [s for s in program.sizes if s not in sizes]
        if missing:
            # A size no input shows (an output's own, as DLRM's num_pairs): the verified workload that agrees.
            for w in program.workloads:
                if all(w.get(k) == v for k, v in sizes.items()):
                    for s in missing:
                        sizes[s] = w[s]
                    break
            else:
                return None, f"no input gives {', '.join(missing)}, and no verified workload agrees with the rest"
        if check:
            for i, arg in zip(self.inputs, args):
                q = program.params[i]
                if q.role != "scalar" and list(arg.shape) != [_dimension(d, sizes) for d in q.shape]:
                    return None, f"'{q.name}' has shape {list(arg.shape)}, the program's is {q.shape} at {sizes}"
        return sizes, None

    def why_not(self, *args):
        """None where the program would take this call (dtypes, device and a shape it was verified on, or any shape
        with any_shape=True; a strided input is copied contiguous, an in-place one must be contiguous), else why not:
        what a guard asks before calling it."""
        return self._plan(args).why

    def _verified(self, args, sizes):
        if tuple(sizes.get(s) for s in self.program.sizes) not in self._verified_sizes:
            return f"the sizes {sizes} are not a workload it was verified on ({self.program.workloads})"
        for i, arg in zip(self.inputs, args):
            q = self.program.params[i]
            if q.role == "scalar" and q.dtype not in ("f16", "bf16") and float(arg) != q.value:
                return f"'{q.name}' = {arg}, it was verified at {q.value}"
        return None

    def _allocate(self, args, sizes, device):
        return [torch.empty([_dimension(d, sizes) for d in self.program.params[i].shape],
                            dtype=_DTYPES[self.program.params[i].dtype], device=device) for i in self.outputs]

    @staticmethod
    def _result(outs):
        return None if not outs else outs[0] if len(outs) == 1 else tuple(outs)

    def _fake(self, *args):
        sizes, why = self._bind(args, check=False)
        if why:
            raise ValueError(f"{self.qualname}: {why}")
        device = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))
        return self._result(self._allocate(args, sizes, device))

    def _plan(self, args):
        """What a call of these shapes, dtypes, devices, layouts and scalars needs, worked out once (_Plan)."""
        if any(isinstance(a, torch.Tensor) and a.is_meta for a in args):
            return _Plan("meta tensors", dispatch=True)
        sizes, why = self._bind(args)
        if why is None and not self.any_shape:
            why = self._verified(args, sizes)
        for k in self._scalar_args:  # written in place by _execute: an int its dtype cannot hold is not wrapped
            why = why or out_of_range(self.program.params[self.inputs[k]], args[k])
        if why is not None:
            return _Plan(why)
        first = args[self._first_tensor]
        outs = []
        for i in self.outputs:
            q = self.program.params[i]
            dtype = _DTYPES[q.dtype]
            # new_empty without a dtype, where it is the first input's, is 1 µs faster a call.
            outs.append((tuple(_dimension(d, sizes) for d in q.shape), None if dtype == first.dtype else dtype))
        device = first.device
        stream_of = device.index or 0 if device.type == "cuda" else None
        # A strided input (a transposed view of the model's) is copied contiguous first, as the program reads it.
        copies = tuple(k for k in self._tensor_args if not args[k].is_contiguous())
        return _Plan(None, outs, tuple(sizes[self.program.params[i].name] for i in self._size_slots), stream_of,
                     copies=copies)

    def _run(self, *args):
        """The operator's CPU and CUDA kernel, as PyTorch's dispatcher calls it."""
        key = []
        for k in self._tensor_args:
            a = args[k]
            if not isinstance(a, torch.Tensor):
                key = None  # _bind raises, naming it
                break
            key.append((a.shape, a.dtype, a.device, a.is_contiguous()))
        else:
            for k in self._scalar_args:
                key.append(args[k])
        return self._execute(args, None if key is None else tuple(key))

    def _execute(self, args, key):
        plan = self._plans.get(key) if key is not None else None
        if plan is None:
            plan = self._plan(args)
            if key is not None and len(self._plans) < 256:
                self._plans[key] = plan
        if plan.why is not None:
            if plan.dispatch:
                return self.op(*args)
            return self._fall_back(args, plan.why)
        if plan.copies:
            args = list(args)
            for k in plan.copies:
                args[k] = args[k].contiguous()
        first = args[self._first_tensor]
        outs = [first.new_empty(shape) if dtype is None else first.new_empty(shape, dtype=dtype)
                for shape, dtype in plan.outs]
        stream = None if plan.stream_of is None else _raw_stream(plan.stream_of)
        # The program's argument block is written in place (Program.call's work, without its list and checks).
        program = self.program
        with program._lock:
            for value, k in self._tensor_slots:
                value.value = args[k].data_ptr()
            for value, k in self._scalar_slots:
                value.value = args[k]
            for value, out in zip(self._output_values, outs):
                value.value = out.data_ptr()
            for value, size in zip(self._size_values, plan.sizes):
                value.value = size
            program.launch(stream, self._flags)
        self.calls += 1
        return self._result(outs)

    @property
    def backward_calls(self):
        """How many times the backward program ran: its own launches. Not a count kept in the autograd formula:
        torch.compile (AOTAutograd) runs the formula once, on fake tensors, to trace the backward graph, which then
        calls the backward operator at each step without the formula (a count there said 1 for every step but the
        first, issue 49)."""
        return self.backward.calls if self.backward is not None else 0

    # Training: a backward program beside the forward one.
    def attach_backward(self, program):
        """Makes `program` (a Program of the same module's backward: `kernelevolve run MODEL.py --backward`) this
        operator's gradient, so that a model trains with it: a call whose inputs require grad runs the forward
        program and records the backward one for autograd. Without it, such a call runs the problem's module."""
        fwd = self.program
        ref, bref = fwd.spec.get("reference", {}), program.spec.get("reference", {})
        where = f"{self.qualname}: the backward {program.provenance['database']}, run {program.provenance['run']}"
        if not bref.get("backward") or bref.get("with_forward"):
            raise Error("invalid argument", f"{where} is not a backward problem (kernelevolve run MODEL.py --backward)")
        if "pytorch" not in ref or bref.get("source") != ref.get("source"):
            raise Error("invalid argument", f"{where} is the backward of another module than this operator's")
        if fwd.device_kind != program.device_kind:
            raise Error("invalid argument", f"{where} runs on {program.device_kind}, the forward on {fwd.device_kind}")
        if any(fwd.params[i].role == "inout" for i in self.inputs):
            raise Error("invalid argument", f"{self.qualname} writes an input in place: it has no backward here")
        names = {fwd.params[i].name: k for k, i in enumerate(self.inputs)}
        outputs = {"grad_" + fwd.params[i].name: k for k, i in enumerate(self.outputs)}
        plan = []  # per argument of the backward: ("input", k) or ("grad", k)
        for name in [q.name for q in program.params if q.role in ("in", "inout", "scalar")]:
            if name in names:
                plan.append(("input", names[name]))
            elif name in outputs:
                plan.append(("grad", outputs[name]))
            else:
                raise Error("invalid argument", f"{where} takes '{name}', which is neither an input of the forward "
                            f"({', '.join(names)}) nor the gradient of one of its outputs ({', '.join(outputs)})")
        gives = []  # per output of the backward: the forward argument it is the gradient of
        for name in [q.name for q in program.params if q.role == "out"]:
            if not name.startswith("grad_") or name[5:] not in names:
                raise Error("invalid argument", f"{where} gives '{name}', the gradient of no input of the forward")
            gives.append(names[name[5:]])
        # Registered only once it is known to fit: a refused backward leaves no operator behind.
        backward = Operator(program, name=self.name + "_grad", fallback=False)
        backward.gradient_of = self
        self.backward, self._backward_args, self._backward_gives = backward, plan, gives
        if HAS_CUSTOM_OP:
            # What torch.compile and torch.export differentiate; eager calls take _Differentiable below. Registered
            # only here: the formula is a Python kernel at the Autograd key, which every call through the
            # dispatcher would pay (7 µs on the CPU, torch 2.6), no_grad ones too.
            torch.library.register_autograd(self.qualname, self._autograd_backward,
                                            setup_context=self._autograd_setup, lib=_library)
        return self

    def _differentiable(self, args, dispatch):
        # `dispatch`: __call__ found torch.compile tracing or a mode on (_modes_active), and asks no more.
        if self.backward is None:
            return self._fall_back(args, _NO_BACKWARD)
        if HAS_CUSTOM_OP and dispatch:
            return self.op(*args)  # the registered autograd formula
        return _Differentiable.apply(self, *args)

    def _autograd_setup(self, ctx, inputs, output):
        ctx.save_for_backward(*[a for a in inputs if isinstance(a, torch.Tensor)])
        ctx.scalars = [a for a in inputs if not isinstance(a, torch.Tensor)]
        outs = output if isinstance(output, tuple) else (output,)
        ctx.out_meta = [(o.shape, o.dtype, o.device) for o in outs]

    def _autograd_backward(self, ctx, *grads):
        tensors, scalars = iter(ctx.saved_tensors), iter(ctx.scalars)
        args = [next(tensors) if k in self._tensor_args else next(scalars) for k in range(self._nargs)]
        return tuple(self._gradients(args, grads, ctx.out_meta))

    def _gradients(self, args, grads, out_meta):
        """The gradients of the forward's arguments (None for scalars and what the backward gives none of), given
        those of its outputs: the backward program, or autograd through the problem's module where the program
        cannot take the call (warned once per reason)."""
        grads = [g.contiguous() if g is not None else torch.zeros(shape, dtype=dtype, device=device)
                 for g, (shape, dtype, device) in zip(grads, out_meta)]
        bargs = [args[k] if kind == "input" else grads[k] for kind, k in self._backward_args]
        # Where the program cannot take the call, the backward operator's own kernel answers from the module
        # (_backward_fallback): a compiled backward graph, which holds that operator and not this formula, too.
        outs = self.backward(*bargs)
        outs = outs if isinstance(outs, tuple) else (outs,)
        result = [None] * self._nargs
        for k, g in zip(self._backward_gives, outs):
            result[k] = g
        return result

    def _backward_fallback(self, bargs, why):
        """The backward operator's outputs where its program cannot take the call (`why`), from its own arguments:
        autograd through the problem's module, given every forward input the module needs."""
        args, grads = [None] * self._nargs, [None] * len(self.outputs)
        for (kind, k), a in zip(self._backward_args, bargs):
            (args if kind == "input" else grads)[k] = a
        missing = [self.signature[k] for k, a in enumerate(args) if a is None]
        if missing:
            raise ValueError(f"{why}; and the backward is not given {', '.join(missing)}, which the problem's module "
                             "needs to be differentiated instead")
        found = self._module_gradients(args, grads, why)
        outs = [found[k] if found[k] is not None else torch.zeros_like(args[k]) for k in self._backward_gives]
        # An operator's outputs are new tensors: one that is an argument's storage (an identity's gradient) is copied.
        ptrs = {a.data_ptr() for a in bargs if isinstance(a, torch.Tensor)}
        return self._result([o.clone() if o.data_ptr() in ptrs else o for o in outs])

    def _module_gradients(self, args, grads, why):
        module = self._problem_module()
        if module is None:
            raise ValueError(f"{why}; and its problem has no PyTorch module to differentiate instead")
        if why not in self._warned:
            self._warned.add(why)
            warnings.warn(f"{why}; differentiating the problem's own module instead (warned once per reason)",
                          stacklevel=5)
        self.fallbacks += 1
        with torch.enable_grad():
            leaves = [a.detach().requires_grad_(a.is_floating_point()) if isinstance(a, torch.Tensor) else a
                      for a in args]
            outs = self._call_module(module, leaves)
            wanted = [k for k, a in enumerate(leaves) if isinstance(a, torch.Tensor) and a.requires_grad]
            # An output the backward takes no gradient of (a backward operator's call) contributes none.
            given = [(o, g) for o, g in zip(outs, grads) if g is not None]
            found = torch.autograd.grad([o for o, _ in given], [leaves[k] for k in wanted], [g for _, g in given],
                                        allow_unused=True)
        result = [None] * self._nargs
        for k, g in zip(wanted, found):
            result[k] = g
        return result

    def _call_module(self, module, args):
        """The problem's module on the operator's arguments (inputs in order, weights by their spec names): its
        outputs as a list."""
        weights = self._weights
        state, inputs = {}, []
        for i, arg in zip(self.inputs, args):
            name = self.program.params[i].name
            if name in weights:
                state[weights[name]] = arg
            else:
                inputs.append(arg)
        device = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))
        out = _functional_call(module.to(device), state, tuple(inputs))
        return list(out) if isinstance(out, (tuple, list)) else [out]

    def _fall_back(self, args, why):
        if self.gradient_of is not None:
            # A backward program attached to its forward: differentiated through the forward's module.
            return self.gradient_of._backward_fallback(args, f"{self.qualname}: the program cannot take this call: "
                                                              f"{why}")
        if self.strict or not self.use_fallback:
            raise ValueError(f"{self.qualname}: the program cannot take this call: {why}")
        ref = self.program.spec.get("reference", {})
        if ref.get("backward"):
            # The module computes the forward, not these gradients: running it here would answer wrong.
            raise ValueError(f"{self.qualname}: the program cannot take this call ({why}), and it is a backward "
                             "problem's, whose module computes the forward: load the forward with "
                             "kernelevolve.torch.load(forward_db, backward=this_db), which differentiates the module "
                             "where the backward program cannot run")
        module = self._problem_module()
        if module is None:
            raise ValueError(f"{self.qualname}: the program cannot take this call ({why}), and its problem has no "
                             "PyTorch module to fall back on; make the operator with any_shape=True to run it anyway")
        if why not in self._warned:
            self._warned.add(why)
            warnings.warn(f"{self.qualname}: {why}; running the problem's own module instead "
                          "(warned once per reason)", stacklevel=4)
        self.fallbacks += 1
        outs = self._call_module(module, args)
        # An operator's outputs are new tensors: one that is an input's storage is copied.
        ptrs = {a.data_ptr() for a in args if isinstance(a, torch.Tensor)}
        return self._result([o.clone() if o.data_ptr() in ptrs else o for o in outs])

    def _problem_module(self):
        if self._module is None:
            ref = self.program.spec.get("reference", {})
            source = ref.get("source") if "pytorch" in ref else None
            if not source:
                return None
            namespace = types.ModuleType(f"kernelevolve_problem_{self.name}")
            if ref.get("pytorch"):  # a module that finds files beside itself (a region's weights) finds them there
                namespace.__file__ = ref["pytorch"]
            # In sys.modules under its name: torch.compile, tracing a fallback that calls it, imports its module by
            # name (ModuleNotFoundError otherwise).
            sys.modules[namespace.__name__] = namespace
            exec(compile(source, ref.get("pytorch") or "<problem>", "exec"), namespace.__dict__)
            self._module = namespace.Model(*namespace.get_init_inputs()).eval()
            if ref.get("dtype") in _DTYPES:  # a --dtype problem: its module cast as its reference was
                self._module = self._module.to(_DTYPES[ref["dtype"]])
            # Spec params name the state dict's entries with '.' as '_' (docs/pytorch.md, "The signature").
            self._weights = {k.replace(".", "_"): k for k in self._module.state_dict()}
        return self._module


class Guarded(torch.nn.Module):
    """One place of a model where `op` stands in for code it replaced (`original`, a function of the same arguments):
    a call the program was verified on (Operator.why_not) runs the program, any other (another shape, dtype, device)
    runs `original`, counted in `fallbacks`. What `kernelevolve optimize` puts in a model's graph for each region it
    puts back. `calls` counts this place's calls that went to the operator; `op.calls` the program's launches, over
    every place that shares the operator."""

    def __init__(self, op, original, compiled="operator"):
        super().__init__()
        if compiled not in ("operator", "original"):
            raise ValueError(f"Guarded: compiled is 'operator' or 'original', not {compiled!r}")
        self.op = op
        self.original = original
        # Under torch.compile: the operator, or the original code for Inductor to compile with its neighbours (where
        # the operators made the compiled model slower: kernelevolve optimize measures it).
        self.compiled = compiled
        self.calls = 0
        self.fallbacks = 0
        self.why_fallback = None  # why the first call that fell back did: what a report says of a place not engaged
        self._takes = {}  # per call signature (shapes, dtypes, devices, layouts): whether the program takes it

    def forward(self, *args):
        if _compiling():
            # Under torch.compile the graph holds the operator itself, whose own check runs at each call (the
            # problem's module where the program cannot take it), through Operator.__call__ so that a call autograd
            # records takes its backward program or the module. This frame's Python state (the counts, the cache) is
            # left alone: Dynamo guards on what it reads, and recompiled the frame each time they changed.
            return self.op(*args) if self.compiled == "operator" else self.original(*args)
        plain = True
        key = []
        for a in args:
            if isinstance(a, torch.Tensor):
                plain = plain and type(a) in _PLAIN
                key.append((a.shape, a.dtype, a.device, a.is_contiguous()))
            else:
                plain = False
                key.append(a)
        key = tuple(key)
        takes = self._takes.get(key)
        if takes is None:
            why = self.op.why_not(*args)
            takes = why is None
            if not takes and self.why_fallback is None:
                self.why_fallback = why
            if len(self._takes) < 256:
                self._takes[key] = takes
        if not takes:
            self.fallbacks += 1
            return self.original(*args)
        self.calls += 1
        # Plain tensors, no gradient, no mode: the key is the operator's own (its arguments are all tensors), and its
        # program runs without Operator.__call__ looking at them again.
        if plain and not _grad_enabled() and not _modes_active():
            return self.op._execute(args, key)
        return self.op(*args)

    def extra_repr(self):
        return (f"{self.op.qualname}, else {getattr(self.original, '__name__', 'the original')}"
                + ("; under torch.compile the original" if self.compiled == "original" else ""))


class _Plan:
    """A call signature's plan: why the program cannot take it (None: it can; `dispatch`: through PyTorch's
    dispatcher), each output's shape and dtype (None: the first input's), the size params' values, and the CUDA
    device whose current stream it runs on (None: the CPU)."""
    __slots__ = ("why", "dispatch", "outs", "sizes", "stream_of", "copies")

    def __init__(self, why, outs=(), sizes=(), stream_of=None, dispatch=False, copies=()):
        self.why, self.dispatch, self.outs, self.sizes, self.stream_of = why, dispatch, outs, sizes, stream_of
        self.copies = copies  # the arguments copied contiguous before the launch


class _Differentiable(torch.autograd.Function):
    """An eager call of an operator with a backward program, recorded for autograd: the forward program now, the
    backward program when autograd asks (Operator._gradients)."""

    @staticmethod
    def forward(ctx, op, *args):
        ctx.op = op
        out = op._run(*args)
        op._autograd_setup(ctx, args, out)
        return out

    @staticmethod
    def backward(ctx, *grads):
        return (None,) + tuple(ctx.op._autograd_backward(ctx, *grads))


_PLAIN = (torch.Tensor, torch.nn.Parameter)
# The program computes no gradient (backward programs are issue 32's): a call that autograd records goes to the
# problem's module, so that a model in training keeps its gradients.
_NO_BACKWARD = "an input requires grad, and the program has no backward"
_grad_enabled = torch.is_grad_enabled
_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None) or (lambda: False)
_dispatch_modes = getattr(torch._C, "_len_torch_dispatch_stack", None)
_function_modes = getattr(torch._C, "_is_torch_function_mode_enabled", None)


def _modes_active():
    # Whether a call must go through the dispatcher: torch.compile is tracing, or a dispatch or function mode is
    # on (a PyTorch without the means to tell always dispatches).
    if _dispatch_modes is None or _function_modes is None:
        return True
    # torch.compile first: Dynamo cannot trace the other two.
    return _compiling() or _function_modes() or _dispatch_modes()


def _raw_stream(index):
    # PyTorch's current CUDA stream as an address; the raw getter skips making a Stream object (2 µs a call).
    global _raw_stream
    getter = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    _raw_stream = getter or (lambda i: torch.cuda.current_stream(i).cuda_stream)
    return _raw_stream(index)


def _functional_call(module, state, inputs):
    if hasattr(torch, "func") and hasattr(torch.func, "functional_call"):
        return torch.func.functional_call(module, state, inputs)
    from torch.nn.utils import stateless  # PyTorch 1.13
    return stateless.functional_call(module, state, inputs)


def load(database, run=None, node=None, *, device=None, name=None, any_shape=False, strict=False, fallback=True,
         backward=None):
    """The program of a run database (the latest run's best by default) as a PyTorch operator, named
    ``kernelevolve::<problem>_r<run>_n<node>`` unless `name` says. Loading the same node again with the same
    options gives the same operator (a PyTorch operator is registered once per process).

    `backward`: the program of the same module's backward (`kernelevolve run MODEL.py --backward`), a database
    (its latest run's best) or a kernelevolve.Program, made the operator's gradient (Operator.attach_backward), so
    that a model trains with it."""
    program = Program(database, run=run, node=node, device=device)
    p = program.provenance
    wanted = re.sub(r"[^A-Za-z0-9_]", "_", name or f"{p['problem']}_r{p['run']}_n{p['node']}")
    known = _operators.get("kernelevolve::" + (wanted if not wanted[0].isdigit() else "p_" + wanted))
    if known is not None:
        k = known.program.provenance
        same = (os.path.realpath(k["database"]) == os.path.realpath(p["database"]) and k["run"] == p["run"]
                and k["node"] == p["node"] and _device_key(known.program.device) == _device_key(program.device))
        if same and (known.any_shape, known.strict, known.use_fallback) == (any_shape, strict, fallback):
            program.close()
            if backward is not None:
                if known.backward is not None:
                    raise Error("invalid argument", f"{known.qualname} has a backward already")
                known.attach_backward(_program(backward, device))
            return known
        raise Error("invalid argument", f"{known.qualname} is registered already, for another program or with other "
                    "options: give this one a name")
    op = Operator(program, name=name, any_shape=any_shape, strict=strict, fallback=fallback)
    if backward is not None:
        op.attach_backward(_program(backward, device))
    return op


def _device_key(device):
    """One spelling per device, as a Program reads it: "cuda" is "cuda:0" (device 0 of its kind), "cpu:0" is "cpu".
    An optimized model loads its operators as "cuda" where the optimizer loaded them as "cuda:0"."""
    d = torch.device(device)
    return torch.device(d.type) if d.type == "cpu" else torch.device(d.type, d.index or 0)


def _program(what, device):
    return what if isinstance(what, Program) else Program(what, device=device)


def replace(model, target, op):
    """Makes `op` the forward of the submodules `target` names in `model`: a dotted path ("" for the model
    itself), a module, or a module class (every submodule of it). Each call of their forward passes its
    arguments and the submodule's own state (parameters and buffers, by their spec names) to the operator.
    Returns the submodules replaced; none is an error."""
    if isinstance(target, str):
        found = [model.get_submodule(target)] if target else [model]
    elif isinstance(target, type):
        found = [m for m in model.modules() if isinstance(m, target)]
    elif isinstance(target, torch.nn.Module):
        found = [m for m in model.modules() if m is target]
    else:
        raise TypeError("replace: the target is a dotted path, a module or a module class")
    if not found:
        raise ValueError(f"replace: {model.__class__.__name__} has no submodule {target!r}")
    for module in found:
        _bind_forward(module, op)
    return found


def _bind_forward(module, op):
    """module.forward(*inputs) becomes op(inputs and module's state, in the signature's order)."""
    params = op.program.params
    # Each state entry as (owner, attribute), read at every call: .to() may replace a buffer.
    owners = {}
    for key in module.state_dict():
        path, _, attr = key.rpartition(".")
        owners[key.replace(".", "_")] = (module.get_submodule(path) if path else module, attr)
    order = []  # per operator argument: ("input", k) or ("state", owner, attribute)
    free = 0
    for i in op.inputs:
        name = params[i].name
        if name in owners:
            order.append(("state",) + owners[name])
        else:
            order.append(("input", free))
            free += 1

    def forward(*inputs):
        if len(inputs) != free:
            raise TypeError(f"{module.__class__.__name__}.forward (replaced by {op.qualname}) takes {free} "
                            f"arguments, got {len(inputs)}")
        return op(*[inputs[o[1]] if o[0] == "input" else getattr(o[1], o[2]) for o in order])

    module.forward = forward
