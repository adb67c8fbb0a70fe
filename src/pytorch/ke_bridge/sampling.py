"""One call of the module at some values of its globals (Sample): the kernel's parameters with numeric shapes."""

import torch

from .dtypes import DTYPES
from .errors import Unmappable
from .flops import total_flops
from .loading import int_globals, module_at
from .meta import OnDevice
from .module_call import as_outputs, forward_names, output_names, weight_name
from .sparse import sparse_weights
from .variant import gradient_inputs, gradient_weights, Variant


class Sample:
    """One call of the module at some values of its globals (set in the source: module_at): the kernel's
    parameters with numeric shapes, the globals' values, and the forward's intermediate shapes."""

    def __init__(self, path, device, meta, sizes=None, check_data_dependence=False, flops=False, variant=None):
        variant = variant or Variant()
        self.variant = variant
        mode = OnDevice("meta" if meta else device)
        with mode:
            module = module_at(path, sizes)
            self.module = module
            torch.manual_seed(0)
            self.init = list(module.get_init_inputs())
            try:
                model = module.Model(*self.init)
            except Exception:
                if not meta:
                    raise
                # A constructor that reads values (Swin's [x.item() for x in torch.linspace(...)]): again,
                # with its small tensors real, and then every weight on meta.
                mode.small_real = True
                torch.manual_seed(0)
                model = module.Model(*self.init)
                mode.small_real = False
                model = model.to("meta")
            if not meta:
                model = model.to(device)
            model = variant.model(model).eval()
            torch.manual_seed(1)
            inputs = [x.to(device) if isinstance(x, torch.Tensor) and not meta else x for x in module.get_inputs()]
        self.sizes = dict(int_globals(module))
        self.names = forward_names(model, len(inputs))
        # A backward's leaves: the inputs it gives the gradients of require them, after the cast.
        self.grad_inputs = gradient_inputs(self.names, inputs) if variant.backward else []
        inputs = [variant.tensor(x) for x in inputs]
        if variant.backward:
            inputs = [x.detach().requires_grad_(True) if n in self.grad_inputs else x
                      for n, x in zip(self.names, inputs)]
        self.state = model.state_dict()
        self.grad_weights = gradient_weights(model, self.state) if variant.backward else []
        tensors = [(f"input '{n}'", x) for n, x in zip(self.names, inputs) if isinstance(x, torch.Tensor)] + \
                  [(f"weight '{k}'", t) for k, t in self.state.items()]
        versions = [t._version for _, t in tensors]
        # A sparse gradient's capacity: the index positions its table is called with, summed over its calls.
        self.sparse_capacity = {}
        hooks = []
        if variant.backward:
            for key, m in sparse_weights(model).items():
                def count(_, args, key=key):
                    if not args or not isinstance(args[0], torch.Tensor):
                        raise Unmappable(f"the sparse table '{key}' is called without its indices as the first "
                                         "positional argument")
                    self.sparse_capacity[key] = self.sparse_capacity.get(key, 0) + args[0].numel()
                hooks.append(m.register_forward_pre_hook(count))
        mode.shapes = []
        try:
            with mode, (torch.enable_grad() if variant.backward else torch.no_grad()):
                result = model(*inputs)
        finally:
            for h in hooks:
                h.remove()
        self.intermediates, mode.shapes = mode.shapes, None
        self.outputs = as_outputs(result)
        # A kernel reads its inputs and weights and writes its outputs: a module that changes an input or a
        # weight as it runs has no such form (an output that is a view of an input is fine: it is copied).
        for (what, t), version in zip(tensors, versions):
            if t._version != version:
                raise Unmappable(f"forward writes into its {what} in place: a kernel's inputs and weights are "
                                 "read-only, and its outputs are buffers of their own")
        for i, o in enumerate(self.outputs):
            if o.dtype not in DTYPES:
                raise Unmappable(f"output {i} has dtype {o.dtype}, which no kernel parameter type holds")
        step = None
        if variant.backward:
            step = ([self.names.index(n) for n in self.grad_inputs], self.grad_weights, variant.with_forward)
        self.flops = total_flops(model, inputs, step) if flops else None
        self.inputs = inputs
        self.params = self.make_params()
        if meta:
            # A draw that gives other shapes is a signature that follows the data. Shapes computed from the
            # data raise on meta tensors, so that the derivation falls back to a real call, which checks them.
            with OnDevice("meta"):
                torch.manual_seed(2)
                again = list(module.get_inputs())
            self.check_same_inputs(again)
        elif check_data_dependence:
            with OnDevice(device):
                torch.manual_seed(2)
                again = [variant.tensor(x.to(device) if isinstance(x, torch.Tensor) else x)
                         for x in module.get_inputs()]
            self.check_same_inputs(again)
            with torch.no_grad():
                outputs2 = as_outputs(model(*again))
            for i, (a, b) in enumerate(zip(self.outputs, outputs2)):
                if tuple(a.shape) != tuple(b.shape):
                    raise Unmappable(f"output {i} has a data-dependent shape ({list(a.shape)} for one draw of the "
                                     f"inputs, {list(b.shape)} for another)")

    def check_same_inputs(self, again):
        for i, (a, b) in enumerate(zip(self.inputs, again)):
            if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and tuple(a.shape) != tuple(b.shape):
                raise Unmappable(f"input '{self.names[i]}' has shape {list(a.shape)} in one draw of get_inputs() and "
                                 f"{list(b.shape)} in another")

    def make_params(self):
        """The kernel's parameters for this call, in order (inputs, weights, outputs), shapes as numbers. A 0-d
        tensor (a loss, a scalar weight, BatchNorm's num_batches_tracked) is a one-element buffer, [1]."""
        def shape(t):
            return list(t.shape) if t.dim() > 0 else [1]
        params = []
        for name, x in zip(self.names, self.inputs):
            if isinstance(x, torch.Tensor):
                if x.dtype not in DTYPES:
                    raise Unmappable(f"input '{name}' has dtype {x.dtype}, which no kernel parameter type holds")
                params.append({"name": name, "dtype": DTYPES[x.dtype], "role": "in", "shape": shape(x)})
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
            params.append({"name": weight_name(key), "dtype": DTYPES[t.dtype], "role": "in", "shape": shape(t),
                           "state": key})
        outputs = [{"name": name, "dtype": DTYPES[o.dtype], "role": "out", "shape": shape(o)}
                   for name, o in zip(output_names(len(self.outputs)), self.outputs)]
        if not self.variant.backward:
            return params + outputs
        # The backward: each differentiable output's gradient in, then (with the forward's outputs first) the
        # gradient of each input and weight that takes one, out, each shaped and typed as what it is of.
        upstream = [dict(p, name=f"grad_{p['name']}", role="in") for p, o in zip(outputs, self.outputs)
                    if o.requires_grad and o.is_floating_point()]
        if not upstream:
            raise Unmappable("no output of the forward depends on an input or a weight that takes a gradient: the "
                             "module has no backward to compute")
        of = {p["name"]: p for p in params if "shape" in p}
        weights = {p["state"]: p for p in params if "state" in p}
        grads = [dict(of[n], name=f"grad_{n}", role="out") for n in self.grad_inputs]
        for k in self.grad_weights:
            w = weights[k]
            if k not in self.sparse_capacity:
                grads.append({key: v for key, v in dict(w, name=f"grad_{w['name']}", role="out").items()
                              if key != "state"})
                continue
            rows = self.sparse_capacity[k]
            grads += [{"name": f"grad_{w['name']}_indices", "dtype": "i64", "role": "out", "shape": [rows]},
                      {"name": f"grad_{w['name']}_values", "dtype": w["dtype"], "role": "out",
                       "shape": [rows] + w["shape"][1:]},
                      {"name": f"grad_{w['name']}_nnz", "dtype": "i64", "role": "out", "shape": [1]}]
        if not grads:
            raise Unmappable("the module has no float input and no parameter to give a gradient of: no backward")
        params = params + upstream + (outputs if self.variant.with_forward else []) + grads
        seen = set()
        for p in params:
            if p["name"] in seen:
                raise Unmappable(f"two of the backward's parameters are named '{p['name']}' (a gradient is named "
                                 "grad_ and what it is of): rename the module's input or weight")
            seen.add(p["name"])
        return params

    def dims(self):
        """Every dimension of the parameters, in order: ((param index, dim index), value)."""
        return [((i, d), v) for i, p in enumerate(self.params) for d, v in enumerate(p.get("shape", []))]


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
