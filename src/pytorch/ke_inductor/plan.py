"""call(): its buffers, launches and extern calls, into plan steps (_Plan)."""

import ast
import functools
import re

from .binding import _statements
from .embedding_bag import _embedding_bag_kernel
from .errors import Untranslatable
from .output_code import _dotted, _TORCH_DTYPES, _value
from .relayout import triton_relayout_kernel
from .size_expressions import _dense_strides, _evaluate, _expr, _FUNCTIONS, _is_atom, _spec_value, _unwrap


class _Storage:
    """A buffer call() allocates; `name` is its temporary's name, or the out param it is returned as."""

    def __init__(self, name, shape_nodes, stride_nodes, dtype, alias_of=None, offset_nodes=()):
        self.name = name
        self.shape_nodes = shape_nodes
        self.stride_nodes = stride_nodes
        self.dtype = dtype
        self.output = None
        # `buf3 = reinterpret_tensor(buf1, shape, stride, 0)`: buf1's memory under another shape. Kernels get the
        # same pointer; a library step reads this shape.
        self.alias_of = alias_of
        # A view at an offset into its root (`reinterpret_tensor(buf0, ..., 48)`, k of a split): the offsets, in
        # elements, summed from the root on. Only call()'s results may be such views (a relayout step copies them);
        # a step that is passed one is refused, since a plan passes whole buffers.
        self.offset_nodes = list(offset_nodes)

    def root(self):
        return self.alias_of.root() if self.alias_of else self


class _Plan:
    def __init__(self, binding, kernels):
        self.binding = binding
        self.kernels = kernels
        self.buffers = {}    # Inductor name -> _Storage
        self.storages = []
        self.steps = []      # each a dict whose buffer args are _Storage objects until resolved
        self.launched = []   # the kernels in launch order
        self.item_args = {}  # kernel -> {param index: scalar param}: `argN_1.item()` passed by value
        self.results = {}    # `buf0 = aten op(...)` returning a tuple -> its results (None: not computed)

    # Reading a call's arguments -------------------------------------------------------------------------------

    def tensor(self, node, what):
        """A buffer argument: a param's name or a _Storage."""
        if isinstance(node, ast.Name):
            if node.id in self.binding.tensor_of:
                return self.binding.tensor_of[node.id]
            if node.id in self.buffers:
                storage = self.buffers[node.id]
                if self.offset_of(storage):
                    raise Untranslatable(f"{node.id} = reinterpret_tensor(...): a view at an offset into a buffer, "
                                         f"passed to {what}", "a plan passes whole buffers")
                return storage
        raise Untranslatable(what, f"the argument {ast.unparse(node)} is not a buffer of the program")

    def dtype_of(self, ref):
        """A buffer argument's dtype: a param's, or the _Storage's."""
        return ref.dtype if isinstance(ref, _Storage) else self.binding.params[ref]["dtype"]

    def shape_of(self, ref):
        """A buffer's shape and strides as Inductor expressions (ast nodes)."""
        if isinstance(ref, _Storage):
            return ref.shape_nodes, ref.stride_nodes
        if ref not in self.binding.layouts:
            raise Untranslatable(f"the input {ref}", "call() asserts no shape for it")
        return self.binding.layouts[ref]

    def value(self, node):
        return _evaluate(node, self.binding.symbol_values)

    def expr(self, node):
        return _expr(node, self.binding.names)

    # Statements ----------------------------------------------------------------------------------------------

    def run(self, call):
        for node in _statements(call.body):
            self.statement(node)

    def statement(self, node):
        text = ast.unparse(node)
        if isinstance(node, (ast.Delete, ast.Pass)):
            return
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id == "args":
            return  # `arg0_1, arg1_1 = args`: matched already
        if isinstance(node, ast.Return):
            return self.outputs(node.value)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            func = _dotted(node.value.func) or ""
            if func in ("args.clear", "torch.cuda.set_device", "assert_alignment"):
                return
            if func == "assert_size_stride":
                return self.assert_shape(node.value)
            if func.endswith(".run") and func[:-4] in self.kernels:
                return self.launch(self.kernels[func[:-4]], node.value)
            if func in ("extern_kernels.mm", "extern_kernels.addmm", "extern_kernels.bmm"):
                return self.matmul(func.split(".")[1], node.value)
            raise Untranslatable(func, "a call the translation does not know")
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            return self.assign(node.targets[0].id, node.value)
        raise Untranslatable(text.splitlines()[0], "a statement of call() the translation does not know")

    def assign(self, name, value):
        func = _dotted(value.func) if isinstance(value, ast.Call) else None
        if isinstance(value, ast.Name) and value.id == "args":
            return
        if isinstance(value, ast.Name) and value.id in self.buffers:
            self.buffers[name] = self.buffers[value.id]  # `buf1 = buf0; del buf0  # reuse`
            return
        if isinstance(value, ast.Name) and value.id in self.binding.symbol_values and name == value.id:
            return
        if isinstance(value, ast.Name) and name in self.binding.symbol_values:
            return  # `s77 = arg2_1`: tied already
        if func == "get_raw_stream":
            return
        if func == "empty_strided_cuda":
            shape, stride, dtype = value.args
            storage = _Storage(name, list(shape.elts), list(stride.elts), _TORCH_DTYPES.get(_dotted(dtype)))
            if storage.dtype is None:
                raise Untranslatable(f"the buffer {name}", f"dtype {_dotted(dtype)}")
            self.buffers[name] = storage
            self.storages.append(storage)
            return
        if func == "extern_kernels.convolution":
            return self.convolution(name, value)
        if func == "reinterpret_tensor" and isinstance(value.args[0], ast.Name) and value.args[0].id in self.buffers:
            # `buf3 = reinterpret_tensor(buf1, ...); del buf1  # reuse`, or `# alias`: the same memory. At an offset,
            # only call()'s results may use it (tensor() refuses it to a step).
            base = self.buffers[value.args[0].id]
            shape, stride, offset = list(value.args[1].elts), list(value.args[2].elts), value.args[3]
            offsets = base.offset_nodes + ([offset] if self.value(offset) != 0 else [])
            root = base.root()
            if root.shape_nodes is None or self.extent(shape, stride, offsets) > self.extent(root.shape_nodes,
                                                                                           root.stride_nodes):
                raise Untranslatable(f"{name} = reinterpret_tensor(...)", "a view larger than its buffer")
            storage = _Storage(name, shape, stride, base.dtype, alias_of=base, offset_nodes=offsets)
            self.buffers[name] = storage
            return
        if func == "torch.ops.aten.avg_pool3d.default":
            return self.avg_pool3d(name, value)
        if func in ("torch.ops.aten._embedding_bag.default", "torch.ops.aten._embedding_bag_forward_only.default"):
            return self.embedding_bag(name, value)
        if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name) and value.value.id in self.results:
            # `buf1 = buf0[0]`: one of an ATen operator's results.
            index = _value(value.slice)
            results = self.results[value.value.id]
            if not isinstance(index, int) or not 0 <= index < len(results) or results[index] is None:
                raise Untranslatable(f"{name} = {ast.unparse(value)}", "a result of the operator the program does "
                                     "not compute (only an embedding bag's pooled rows are)")
            self.buffers[name] = results[index]
            return
        if func and (func.startswith("torch.ops.") or func.startswith("aten.")):
            raise Untranslatable(func.replace("torch.ops.", "").replace(".default", ""),
                                 "an ATen operator Inductor calls as it is: no library step computes it")
        if func and func not in _FUNCTIONS:
            raise Untranslatable(func, "a call the translation does not know")
        # An integer local: `ps0 = 2*s53`, `kernel_xnumel = 384*s77`.
        self.binding.names[name] = self.wrap(self.expr(value))  # raises Untranslatable on anything but sizes
        self.binding.symbol_values[name] = self.value(value)

    @staticmethod
    def wrap(text):
        return text if _is_atom(text) else f"({text})"

    def assert_shape(self, call):
        """After an extern call that allocates its result, Inductor asserts its shape: that gives the buffer's."""
        target = call.args[0]
        if isinstance(target, ast.Name) and target.id in self.buffers:
            storage = self.buffers[target.id]
            if storage.shape_nodes is None:
                storage.shape_nodes = list(call.args[1].elts)
                storage.stride_nodes = list(call.args[2].elts)

    # Kernel launches ------------------------------------------------------------------------------------------

    def launch(self, kernel, call):
        if kernel not in self.launched:
            self.launched.append(kernel)
        if len(call.args) != len(kernel.params):
            raise Untranslatable(f"{kernel.name}.run", f"{len(call.args)} arguments for {len(kernel.params)} params")
        args = []
        for index, node in enumerate(call.args):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "item"
                    and not node.args):
                # A 0-d tensor's value (a module's scalar): our spec has it as a scalar param, passed by value.
                param = self.tensor(node.func.value, f"{kernel.name}.run")
                if not isinstance(param, str) or self.binding.params[param]["role"] != "scalar":
                    raise Untranslatable(f"{kernel.name}.run", f"{ast.unparse(node)} is not a scalar of the spec")
                args.append(param)
            elif isinstance(node, ast.Name) and (node.id in self.buffers or node.id in self.binding.tensor_of):
                args.append(self.tensor(node, f"{kernel.name}.run"))
            else:
                args.append(_unwrap(self.expr(node)))
        numels = dict(zip(kernel.params, args))
        self.steps.append({"kernel": kernel, "args": args, "numels": numels})

    # Library calls --------------------------------------------------------------------------------------------

    def operand(self, node, what):
        """A matrix operand: (buffer, shape nodes, transposed). `reinterpret_tensor(w, (K, N), (1, K), 0)` is
        w stored [N, K] read transposed (a Linear's weight)."""
        if isinstance(node, ast.Call) and _dotted(node.func) == "reinterpret_tensor":
            base, shape, stride, offset = node.args
            if self.value(offset) != 0:
                raise Untranslatable(what, "an operand at an offset into its buffer")
            shape, stride = list(shape.elts), list(stride.elts)
            values = [self.value(s) for s in shape]
            strides = [self.value(s) for s in stride]
            if len(shape) == 2 and strides == [1, values[0]]:
                return self.tensor(base, what), shape, True
            # A batch of matrices each read transposed: [B, R, C] over memory stored [B, C, R] (x.transpose(1, 2)).
            if len(shape) == 3 and strides == [values[1] * values[2], 1, values[1]]:
                return self.tensor(base, what), shape, True
            if strides == _dense_strides(values):
                return self.tensor(base, what), shape, False
            raise Untranslatable(what, f"an operand with strides {ast.unparse(node.args[2])}")
        ref = self.tensor(node, what)
        shape, stride = self.shape_of(ref)
        if stride is not None and [self.value(s) for s in stride] != _dense_strides([self.value(s) for s in shape]):
            raise Untranslatable(what, f"the operand {ast.unparse(node)} is not contiguous")
        return ref, shape, False

    def dim(self, node):
        """An operand's extent, in our names."""
        return self.expr(node)

    def matmul(self, op, call):
        what = f"extern_kernels.{op}"
        keywords = {k.arg: k.value for k in call.keywords}
        if "out" not in keywords:
            raise Untranslatable(what, "a product without out=")
        positional = list(call.args)
        bias = positional.pop(0) if op == "addmm" else None
        if any(k not in ("out", "alpha", "beta") for k in keywords):
            raise Untranslatable(what, f"options {sorted(keywords)}")
        for k in ("alpha", "beta"):
            if k in keywords and ast.unparse(keywords[k]) != "1":
                raise Untranslatable(what, f"{k}={ast.unparse(keywords[k])}")
        a, a_shape, a_transposed = self.operand(positional[0], what)
        b, b_shape, b_transposed = self.operand(positional[1], what)
        out, out_shape, _ = self.operand(keywords["out"], what)
        if a_transposed and bias is not None:
            # cuBLASLt's step, which adds addmm's bias, reads A row-major [M, K]; cublas.gemm has the transposed A.
            raise Untranslatable(f"{what} of a transposed left operand", "cublaslt.matmul, which adds the bias, reads "
                                 "A row-major [M, K]; only cublas.gemm takes A transposed")
        rank = 3 if op == "bmm" else 2
        if len(a_shape) != rank or len(b_shape) != rank:
            raise Untranslatable(what, f"an operand that is not {rank}-d")
        # The operands' logical shapes ([B,] M, K and [B,] K, N), whatever their memory's order.
        m, k, n = (_unwrap(self.dim(d)) for d in (a_shape[-2], a_shape[-1], b_shape[-1]))
        if op == "bmm":
            step = {"library": "cublas.gemm_batched", "args": [a, b, out, _unwrap(self.dim(a_shape[0])), m, n, k],
                    "options": {}}
        else:
            step = {"library": "cublas.gemm", "args": [a, b, out, m, n, k], "options": {}}
        step["dtype"] = self.dtype_of(a)  # whether TF32 may apply (translate())
        if bias is not None:
            bias_ref, bias_shape, _ = self.operand(bias, what)
            if len(bias_shape) != 1:
                raise Untranslatable(what, "a bias that is not one value per column")
            step["library"] = "cublaslt.matmul"
            step["args"].append(bias_ref)
            step["options"]["epilogue"] = "bias"
        if a_transposed:
            step["options"]["a_transposed"] = "true"
        if b_transposed:
            step["options"]["b_transposed"] = "true"
        self.steps.append(step)

    def convolution(self, name, call):
        """A 1-d, 2-d or 3-d convolution, forward or transposed: cudnn.conv2d, conv3d, conv_transpose2d or
        conv_transpose3d, a 1-d one as the 2-d one over an image one row high."""
        what = "extern_kernels.convolution"
        keywords = {k.arg: _value(k.value) for k in call.keywords}
        transposed = bool(keywords.get("transposed"))
        try:
            x, x_shape, _ = self.operand(call.args[0], what)
            w, w_shape, _ = self.operand(call.args[1], what)
        except Untranslatable as error:
            raise Untranslatable(f"{what} on a channels-last buffer", "cuDNN's steps read NCHW: " + error.why)
        spatial = len(x_shape) - 2
        if spatial not in (1, 2, 3) or len(w_shape) != len(x_shape):
            raise Untranslatable(f"{what} over {spatial} dimensions", "cuDNN's steps are 1-d, 2-d or 3-d")
        library = "cudnn.conv3d" if spatial == 3 else "cudnn.conv2d"
        if transposed:
            library = library.replace(".conv", ".conv_transpose")
        elif any(v != 0 for v in keywords.get("output_padding", [0])):
            raise Untranslatable(f"{what} with output_padding", "a forward convolution has none")
        # The convolution's result has its input's dtype; its shape comes with the assert that follows.
        storage = _Storage(name, None, None, self.dtype_of(x))
        self.buffers[name] = storage
        self.storages.append(storage)
        defaults = {"stride": 1, "padding": 0, "dilation": 1, "output_padding": 0}
        options = {}
        for key, default in defaults.items():
            if key == "output_padding" and not transposed:
                continue
            value = list(keywords.get(key, [default] * spatial))
            # A 1-d convolution is the 2-d one over an image one row high, in the same memory: [N, C, L] is
            # [N, C, 1, L], the weight [K, C, R] is [K, C, 1, R], and the row's stride, padding, dilation (and
            # output_padding) are 1, 0, 1 and 0.
            if spatial == 1:
                value = [default] + value
            options[key] = ",".join(str(v) for v in value)
        groups = keywords.get("groups", 1)
        options["groups"] = str(groups)
        # The weight is [K, C / groups, ...] forward, and [C, K / groups, ...] transposed (ConvTranspose's own
        # layout): the output's channels are its second extent times the groups.
        out_channels = self.dim(w_shape[0])
        if transposed:
            per_group = self.dim(w_shape[1])
            out_channels = (str(int(per_group) * groups) if re.fullmatch(r"\d+", per_group)
                            else per_group if groups == 1 else f"{groups} * {self.wrap(per_group)}")
        if spatial == 1:
            x_dims = [self.dim(x_shape[0]), self.dim(x_shape[1]), "1", self.dim(x_shape[2])]
            w_dims = [out_channels, "1", self.dim(w_shape[2])]
        else:
            x_dims = [self.dim(d) for d in x_shape]
            w_dims = [out_channels] + [self.dim(d) for d in w_shape[2:]]
        args = [x, w, storage] + x_dims + w_dims
        bias = call.keywords and [k.value for k in call.keywords if k.arg == "bias"]
        if bias and ast.unparse(bias[0]) != "None":
            args.append(self.tensor(bias[0], what))
        self.steps.append({"library": library, "args": args, "options": options, "conv_input": x,
                           "dtype": self.dtype_of(x)})

    def avg_pool3d(self, name, call):
        """aten.avg_pool3d, which Inductor does not lower and calls as it is: cudnn.avg_pool3d."""
        what = "aten.avg_pool3d"
        given = dict(zip(("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"),
                         (_value(a) for a in call.args[1:])))
        given.update({k.arg: _value(k.value) for k in call.keywords})
        if given.get("ceil_mode"):
            raise Untranslatable(f"{what} with ceil_mode", "cuDNN's pooling rounds its output down")
        if given.get("divisor_override") is not None:
            raise Untranslatable(f"{what} with divisor_override", "cuDNN's pooling divides by its window")
        kernel = list(given.get("kernel_size") or [])
        settings = {"kernel_size": kernel, "stride": list(given.get("stride") or kernel),  # [] is the kernel's
                    "padding": list(given.get("padding") or [0])}
        options = {}
        for key, values in settings.items():
            values = values * 3 if len(values) == 1 else values
            if len(values) != 3 or not all(isinstance(v, int) for v in values):
                raise Untranslatable(what, f"a {key} of neither one nor three integers")
            options[key] = ",".join(str(v) for v in values)
        options["count_include_pad"] = "true" if given.get("count_include_pad", True) else "false"
        try:
            x, x_shape, _ = self.operand(call.args[0], what)
        except Untranslatable as error:
            raise Untranslatable(f"{what} on a channels-last buffer", "cudnn.avg_pool3d reads NCDHW: " + error.why)
        if len(x_shape) != 5:
            raise Untranslatable(f"{what} of a {len(x_shape)}-d input", "cudnn.avg_pool3d takes [N, C, D, H, W]")
        # The result has its input's dtype; its shape comes with the assert that follows.
        storage = _Storage(name, None, None, self.dtype_of(x))
        self.buffers[name] = storage
        self.storages.append(storage)
        self.steps.append({"library": "cudnn.avg_pool3d", "args": [x, storage] + [self.dim(d) for d in x_shape],
                           "options": options, "conv_input": x, "conv_output": storage})

    def embedding_bag(self, name, call):
        """aten._embedding_bag(weight, indices, offsets) in sum mode, which Inductor calls as it is: a kernel of
        ours (_EMBEDDING_BAG_SUM). Its other results (offset2bag, bag_size, max_indices) feed only a backward."""
        what = "aten._embedding_bag"
        names = ("weight", "indices", "offsets", "scale_grad_by_freq", "mode", "sparse", "per_sample_weights",
                 "include_last_offset", "padding_idx")
        given = dict(zip(names, call.args))
        given.update({k.arg: k.value for k in call.keywords})
        for key, default in (("mode", 0), ("per_sample_weights", None), ("include_last_offset", False),
                             ("padding_idx", -1)):
            if key in given and _value(given[key]) not in (default, None if key == "padding_idx" else default):
                raise Untranslatable(f"{what} with {key}={ast.unparse(given[key])}", "the program's embedding bag "
                                     "sums each bag's rows (mode='sum', offsets of each bag's start, no weights per "
                                     "sample, no padding index)")
        refs = {}
        for key in ("weight", "indices", "offsets"):
            if key not in given:
                raise Untranslatable(what, f"a call without its {key}")
            try:
                ref, shape, transposed = self.operand(given[key], f"{what}'s {key}")
            except Untranslatable as error:
                raise Untranslatable(f"{what}'s {key}", error.why)
            if transposed or len(shape) != (2 if key == "weight" else 1):
                raise Untranslatable(f"{what}'s {key}", f"a {len(shape)}-d operand" if not transposed else
                                     "a transposed operand")
            refs[key] = (ref, shape)
        if self.dtype_of(refs["weight"][0]) not in ("f32", "f16", "bf16"):
            raise Untranslatable(f"{what}'s weight", f"dtype {self.dtype_of(refs['weight'][0])}")
        for key in ("indices", "offsets"):
            if self.dtype_of(refs[key][0]) not in ("i64", "i32"):
                raise Untranslatable(f"{what}'s {key}", f"dtype {self.dtype_of(refs[key][0])}")
        (weight, weight_shape), (indices, indices_shape), (offsets, offsets_shape) = \
            refs["weight"], refs["indices"], refs["offsets"]
        # One kernel however many calls launch it: the program's source defines it once.
        kernel = next((k for k in self.launched if k.name == "ke_embedding_bag_sum"), None)
        if kernel is None:
            kernel = _embedding_bag_kernel(self.value(weight_shape[1]))
            self.launched.append(kernel)
        # The pooled rows have the weight's dtype; their shape comes with the assert that follows `buf1 = buf0[0]`.
        storage = _Storage(name + "_0", None, None, self.dtype_of(weight))
        self.storages.append(storage)
        self.results[name] = [storage, None, None, None]
        args = [weight, indices, offsets, storage, self.dim(offsets_shape[0]), self.dim(indices_shape[0]),
                self.dim(weight_shape[1])]
        self.steps.append({"kernel": kernel, "args": args, "numels": dict(zip(kernel.params, args))})

    # Outputs --------------------------------------------------------------------------------------------------

    def outputs(self, node):
        """call()'s results into the spec's outputs. A buffer it wrote, dense and all of it (or a view that is), is
        the output param itself. Anything else it returns (a strided view, a view at an offset, one of several views
        into one buffer, a buffer returned twice, a view of an input) is copied into its output param by a relayout
        step of ours after the others: the buffer stays a temporary of its own extent."""
        returned = node.elts if isinstance(node, ast.Tuple) else [node]
        outs = [p for p in self.binding.spec["params"] if p["role"] == "out"]
        if len(returned) != len(outs):
            raise Untranslatable("call()'s results", f"{len(returned)} tensors for the spec's {len(outs)} outputs")
        for result, param in zip(returned, outs):
            view = None
            if isinstance(result, ast.Call) and _dotted(result.func) == "reinterpret_tensor":
                # A view of a buffer it wrote (a 1-d pool's result without its unsqueezed dimension, a batched
                # product's [B * M, N] as [B, M, N], q, k or v of a split).
                view, result = result, result.args[0]
            if isinstance(result, ast.Name) and result.id in self.binding.tensor_of:
                self.output_of_input(result.id, view, param)
                continue
            if not (isinstance(result, ast.Name) and result.id in self.buffers):
                raise Untranslatable("call()'s results", f"{ast.unparse(view or result)} is not a buffer it wrote")
            storage = self.buffers[result.id]
            root = storage.root()
            if root.shape_nodes is None:
                raise Untranslatable(f"the output {result.id}", "call() asserts no shape for it")
            if root.dtype != param["dtype"]:
                raise Untranslatable(f"the output {result.id}", f"dtype {root.dtype}, the spec's {param['dtype']}")
            offsets = list(storage.offset_nodes)
            if view is not None:
                shape_nodes, stride_nodes = list(view.args[1].elts), list(view.args[2].elts)
                if self.value(view.args[3]) != 0:
                    offsets.append(view.args[3])
            else:
                shape_nodes, stride_nodes = storage.shape_nodes, storage.stride_nodes
            shape = [self.value(s) for s in shape_nodes]
            what = f"the output {ast.unparse(view) if view is not None else result.id}"
            self.check_extents(what, shape_nodes, param)
            whole = (view is None and root is storage) or self.same_numel(shape_nodes, root.shape_nodes)
            if (not offsets and [self.value(s) for s in stride_nodes] == _dense_strides(shape) and whole and
                    root.output is None):
                root.output = param["name"]
                continue
            self.within(what, (shape_nodes, stride_nodes, offsets), (root.shape_nodes, root.stride_nodes), root.name)
            self.relayout(what, root, param, shape_nodes, stride_nodes, offsets)

    def output_of_input(self, name, view, param):
        """An input returned as it is, or a view of it: copied into the output."""
        ref = self.binding.tensor_of[name]
        shape_nodes, stride_nodes = self.shape_of(ref)
        offsets = []
        if view is not None:
            if self.value(view.args[3]) != 0:
                offsets.append(view.args[3])
            view_shape, view_stride = list(view.args[1].elts), list(view.args[2].elts)
            self.within(f"the output {ast.unparse(view)}", (view_shape, view_stride, offsets),
                        (shape_nodes, stride_nodes), f"the input {ref}")
            shape_nodes, stride_nodes = view_shape, view_stride
        if self.dtype_of(ref) != param["dtype"]:
            raise Untranslatable(f"the output {name}", f"dtype {self.dtype_of(ref)}, the spec's {param['dtype']}")
        self.relayout(f"the output {ast.unparse(view) if view is not None else name}", ref, param, shape_nodes,
                      stride_nodes, offsets)

    def relayout(self, what, source, param, shape_nodes, stride_nodes, offset_nodes):
        """A step of our relayout kernel: the view (sizes, strides and offset over `source`, a _Storage root or an
        input's name) copied into the output param, dense."""
        self.check_extents(what, shape_nodes, param, fix=True)
        if not shape_nodes:  # a 0-d view at an offset: one element
            shape_nodes, stride_nodes = [ast.Constant(1)], [ast.Constant(0)]
        kernel = self.relayout_kernel(len(shape_nodes), param["dtype"])
        numel = functools.reduce(lambda a, b: ast.BinOp(a, ast.Mult(), b), shape_nodes)
        offset = functools.reduce(lambda a, b: ast.BinOp(a, ast.Add(), b), offset_nodes or [ast.Constant(0)])
        args = [source, param["name"]] + [self.size_arg(n) for n in [numel] + shape_nodes + stride_nodes + [offset]]
        self.steps.append({"kernel": kernel, "args": args, "numels": dict(zip(kernel.params, args))})

    def size_arg(self, node):
        """An integer argument in our names; one over no size of the spec (a static capture's) as its value."""
        text = _unwrap(self.expr(node))
        return text if re.search(r"[A-Za-z_]", text) else str(self.value(node))

    def relayout_kernel(self, rank, dtype):
        """The Triton relayout kernel of that rank, one in the program whatever its dtype (the CPU's: cpu.py)."""
        name = f"ke_relayout_{rank}d"
        kernel = next((k for k in self.launched if k.name == name), None)
        if kernel is None:
            kernel = triton_relayout_kernel(rank)
            self.launched.append(kernel)
        return kernel

    def check_extents(self, what, shape_nodes, param, fix=False):
        """What call() returns has the extents of the spec's output (at the workload): another shape would put the
        elements elsewhere, or more or fewer of them than the output holds. `fix`: a relayout's extents are its
        arguments, and those the code fixed join the constraints."""
        dims = param.get("shape")
        if dims is None:
            return
        shape = [self.value(s) for s in shape_nodes]
        wanted = [_spec_value(d, self.binding.workload) for d in dims]
        if shape != wanted:
            raise Untranslatable(what, f"its extents {shape} are not the spec's output's {wanted}")
        for node, dim in zip(shape_nodes, dims if fix else []):
            if not re.search(r"[A-Za-z_]", self.expr(node)):
                # An extent the code fixed (the heads of a split, which no input's shape gives): the program holds
                # where the spec's output has it.
                self.binding.specialise(self.value(node), dim)

    def within(self, what, view, base, base_name):
        """A view (shape, strides, offsets) must reach no element before or past its base's (shape, strides)."""
        shape_nodes, stride_nodes, offsets = view
        if any(self.value(s) < 0 for s in stride_nodes) or sum(self.value(o) for o in offsets) < 0:
            raise Untranslatable(what, "a view with a negative stride or offset")
        if self.extent(shape_nodes, stride_nodes, offsets) > self.extent(*base):
            raise Untranslatable(what, f"a view larger than {base_name}")

    def offset_of(self, storage):
        return sum(self.value(o) for o in storage.offset_nodes)

    def extent(self, shape_nodes, stride_nodes, offset_nodes=()):
        """How many elements from the buffer's start a layout reaches (its furthest element plus one), at the
        example's sizes: a view must stay within its buffer's."""
        shape = [self.value(s) for s in shape_nodes]
        if any(s == 0 for s in shape):
            return 0
        strides = [self.value(s) for s in stride_nodes] if stride_nodes is not None else _dense_strides(shape)
        return 1 + sum(self.value(o) for o in offset_nodes) + sum((s - 1) * abs(t) for s, t in zip(shape, strides))

    def same_numel(self, shape, other):
        """Whether two shapes hold as many elements: at the example's sizes and at other sizes too, so that a
        coincidence of the example (4 * 4 == 16) does not pass for an identity."""
        def numel(nodes, values):
            total = 1
            for node in nodes:
                total *= _evaluate(node, values)
            return total

        if other is None:
            return False
        moved = {name: value + 5 + 2 * i for i, (name, value) in enumerate(self.binding.symbol_values.items())}
        try:
            return all(numel(shape, values) == numel(other, values) for values in (self.binding.symbol_values, moved))
        except (NameError, ZeroDivisionError):
            return False
