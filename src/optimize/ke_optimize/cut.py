# The model optimizer's cut (after capture.py): the captured graph partitioned into regions, as Inductor's fusion
# groups and Welder's tiles are: chains of element-wise, reduction and normalization operators around at most one
# matrix product, convolution, attention or embedding lookup (an anchor). A module the trace could not enter (an
# LSTM) is a region of its own. Identical regions (operators, shapes, dtypes, constants) are one problem with a
# count, named by a hash of that description, never of the weights' values; each problem is written as a PyTorch
# problem file in KernelBench's format, its weights (the first occurrence's) saved beside it. Step 5 undoes the cut:
# the graph rebuilt with the winners' operators in place (optimized_graph, write_optimized).
import hashlib
import importlib
import json
import operator
import os
import pprint
import re

import torch
import torch.fx

from .capture import Refusal, VIEW_OPS, dtype_name, op_name, target_text


ANCHOR_OPS = {
    "linear", "addmm", "mm", "bmm", "matmul", "baddbmm", "addbmm", "addmv", "mv", "dot", "einsum", "tensordot",
    "bilinear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "convolution", "conv_tbc", "scaled_dot_product_attention", "scaled_dot_product_flash_attention",
    "scaled_dot_product_efficient_attention", "scaled_dot_product_cudnn_attention", "embedding", "embedding_bag",
}
# Single operators that hold several matrix products (a recurrent network, a whole attention or transformer layer):
# regions of their own.
OPAQUE_OPS = {"lstm", "gru", "rnn_tanh", "rnn_relu", "multi_head_attention_forward", "native_multi_head_attention",
              "transformer_encoder_layer_fwd"}


def node_kind(node):
    """anchor, opaque (a region of its own) or fusible (element-wise, reduction, normalization, view)."""
    if node.op == "call_module":
        return "opaque"
    name = op_name(node)
    if name in ANCHOR_OPS:
        return "anchor"
    if name in OPAQUE_OPS:
        return "opaque"
    return "fusible"


def picks_a_part(node):
    """Whether the node takes one part of a tensor by a constant integer (`indices[t]`, aten's select): a model
    that stacks its tables' inputs picks each table's so."""
    name = op_name(node) if node.op in ("call_function", "call_method") else None
    if name == "getitem":
        return isinstance(node.args[1], int)
    return name == "select" and all(isinstance(a, int) for a in node.args[1:])


# Casts, as torch.fx's trace (`x.to(torch.bfloat16)`, `h.float()`) and torch.export (`_to_copy`) write them: what
# autocast made, written out. A cast of a graph input or a weight joins the region that reads it (partition).
CASTS = {"to", "to_copy", "_to_copy", "float", "half", "bfloat16", "double", "type"}
FLOAT_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8}


def widens(node, meta):
    """Whether the cast makes a narrower float wider (autocast's bf16 result made f32 for what reads it): it belongs
    with its reader, so that the narrow value is what crosses between regions (and what the writer's region is
    checked in, at its dtype's tolerance)."""
    (source,) = node.all_input_nodes[:1] or (None,)
    if source is None or "dtype" not in meta.get(node.name, {}) or "dtype" not in meta.get(source.name, {}):
        return False
    to, of = FLOAT_BYTES.get(meta[node.name]["dtype"]), FLOAT_BYTES.get(meta[source.name]["dtype"])
    return to is not None and of is not None and to > of


CONCATENATIONS = {"cat", "stack", "concat", "concatenate", "hstack", "vstack"}
# Lookups that a model makes side by side, one per table, for one concatenation (DLRM's sparse features): one region
# for all, as FBGEMM's table-batched embedding is one operator, so that a put-back pays one call where the model
# paid one a table (a recommendation model waits on its CPU's launches).
SIDE_BY_SIDE = {"embedding", "embedding_bag"}


def side_by_side_key(node):
    """(operator, the concatenation it feeds) for a lookup whose only reader is a concatenation, else None."""
    if op_name(node) not in SIDE_BY_SIDE:
        return None
    readers = set(node.users)
    if readers and all(op_name(u) == "getitem" for u in readers):  # aten's lookup returns a tuple: its pooled rows'
        readers = {r for u in readers for r in u.users}
    if len(readers) != 1:
        return None
    (user,) = readers
    if user.op not in ("call_function", "call_method") or op_name(user) not in CONCATENATIONS:
        return None
    return op_name(node), user


class Region:
    def __init__(self, index):
        self.index = index
        self.nodes = []
        self.anchor = None
        self.opaque = False
        self.deps = set()  # the regions whose values this one reads

    def ancestors(self, regions):
        seen, stack = set(), list(self.deps)
        while stack:
            r = stack.pop()
            if r not in seen:
                seen.add(r)
                stack.extend(regions[r].deps)
        return seen


def partition(capture):
    """The regions of the graph, in an order in which each reads only what earlier ones wrote. A node joins the
    region of its latest producer that can take it (not an opaque region; not a second anchor) when joining
    makes no cycle between regions (no other producer's region already reads this one); else it starts a new
    region. A node reading a tuple (split's, an LSTM's) is always in its producer's region: only tensors cross
    between regions. An anchor does not join a region that only picks a part of an input by a constant index, and a
    concatenation of three or more regions' values starts a region of its own (picks_a_part, CONCATENATIONS). Lookups
    side by side (the same operator, each read only by one concatenation) are one region (SIDE_BY_SIDE)."""
    graph = capture.gm.graph
    position = {n: i for i, n in enumerate(graph.nodes)}
    regions, of, side_by_side = [], {}, {}

    def makes_a_cycle(r, sources):
        """Whether the node joining region r would: another source's region already reads r."""
        return any(r.index in regions[s].ancestors(regions) for s in sources if s != r.index)

    pending = []  # casts of a graph input or a weight (autocast's, written out), for the region of their first reader
    for node in graph.nodes:
        if node.op not in ("call_function", "call_method", "call_module"):
            continue
        if op_name(node) in CASTS and (all(a.op in ("placeholder", "get_attr") for a in node.all_input_nodes) or
                                       widens(node, capture.meta)):
            pending.append(node)
            continue
        producers = sorted({a for a in node.all_input_nodes if a in of}, key=lambda a: -position[a])
        tuples = {of[a].index for a in producers if "tuple" in capture.meta.get(a.name, {})}
        kind = node_kind(node)
        chosen = None
        if len(tuples) > 1:
            raise Refusal("untraceable", f"node {node.name} reads tuples made in two regions; the cut keeps a tuple "
                                         "within the region that made it")
        key = side_by_side_key(node) if kind == "anchor" else None
        sources = {of[a].index for a in producers}
        # What its pending casts read (they join its region, below): no region it joins may make a cycle with those.
        sources |= {of[b].index for a in node.all_input_nodes if a in pending for b in a.all_input_nodes if b in of}
        if tuples:
            chosen = regions[tuples.pop()]
        elif key in side_by_side and not makes_a_cycle(side_by_side[key], sources):
            chosen = side_by_side[key]
        elif kind != "opaque":
            # A concatenation of three or more regions' values gathers them for what follows (DLRM's features for
            # the interaction's product) rather than ending one of them: a region of its own, which its consumer
            # joins, rather than the epilogue of whichever producer came last.
            # So does the concatenation that side-by-side lookups feed.
            lookups = {r.index for r in side_by_side.values()}
            gathers = op_name(node) in CONCATENATIONS and (len(sources) > 2 or bool(sources & lookups))
            for a in [] if gathers else producers:
                r = of[a]
                if r.opaque or (kind == "anchor" and r.anchor is not None):
                    continue
                # An anchor does not take in the picking of a part of an input (`indices[t]`): the part is its
                # input, so that the same lookup on each table of a stack is one problem, not one per constant t.
                if kind == "anchor" and all(picks_a_part(n) for n in r.nodes):
                    continue
                if makes_a_cycle(r, sources):
                    continue
                chosen = r
                break
        if chosen is None:
            chosen = Region(len(regions))
            chosen.opaque = kind == "opaque"
            regions.append(chosen)
        chosen.nodes.append(node)
        if kind == "anchor" and chosen.anchor is None:
            chosen.anchor = node
            if key is not None and chosen.nodes == [node]:
                side_by_side[key] = chosen
        of[node] = chosen
        chosen.deps |= {of[a].index for a in producers} - {chosen.index}
        for a in node.all_input_nodes:  # its casts of inputs, weights and narrower values are its region's prologue
            if a not in pending:
                continue
            before = {of[b].index for b in a.all_input_nodes if b in of} - {chosen.index}
            if makes_a_cycle(chosen, before):
                continue  # left for its producer's region, below
            pending.remove(a)
            chosen.nodes.append(a)
            chosen.deps |= before
            of[a] = chosen
    for node in pending:  # a cast read by no operator's region it can join: its producer's, or a region of its own
        sources = [of[a] for a in node.all_input_nodes if a in of]
        region = sources[0] if len(sources) == 1 and not sources[0].opaque else None
        if region is None:
            region = Region(len(regions))
            region.opaque = False
            regions.append(region)
        region.nodes.append(node)
        of[node] = region
        for user in node.users:  # its readers' regions read its region
            if user in of and of[user] is not region:
                of[user].deps.add(region.index)
    # Kahn's order over the regions, ties by creation.
    order, done = [], set()
    while len(order) < len(regions):
        ready = [r for r in regions if r.index not in done and r.deps <= done]
        order.append(ready[0])
        done.add(ready[0].index)
    for r in regions:
        r.nodes.sort(key=lambda n: position[n])
    return order, of


class Ref:
    """A reference inside a region's description: an input, a weight or an earlier node, by position."""

    def __init__(self, token):
        self.token = token

    def __repr__(self):
        return "%" + self.token


class Occurrence:
    """One region of the graph with its boundary: inputs (graph inputs or other regions' values, by first use),
    weights (get_attr targets, by first use), outputs (values read outside it, in graph order)."""

    def __init__(self, region):
        self.region = region
        self.nodes = region.nodes
        inside = set(region.nodes)
        self.inputs, self.weights = [], []
        for node in region.nodes:
            for a in node.all_input_nodes:
                if a.op == "get_attr":
                    if a not in self.weights:
                        self.weights.append(a)
                elif a not in inside and a not in self.inputs:
                    self.inputs.append(a)
        self.outputs = [n for n in region.nodes if any(u.op == "output" or u not in inside for u in n.users)]
        self.hash, self.description = None, None
        self.problem, self.index = None, 0  # its Problem, and which of its occurrences it is (cut())


def describe(occ, capture):
    """The region as data: operators with their constants, each value's shape and dtype; its hash names it."""
    refs = {}
    for i, a in enumerate(occ.inputs):
        refs[a] = Ref(f"in{i}")
    for k, w in enumerate(occ.weights):
        refs[w] = Ref(f"w{k}")
    nodes = []
    for j, node in enumerate(occ.nodes):
        args = torch.fx.node.map_arg(node.args, lambda a: refs[a])
        kwargs = torch.fx.node.map_arg(dict(node.kwargs), lambda a: refs[a])
        meta = capture.meta.get(node.name, {})
        nodes.append([target_text(node), stable_repr(args), stable_repr(sorted(kwargs.items())),
                      {k: meta[k] for k in ("shape", "dtype", "tuple") if k in meta}])
        refs[node] = Ref(f"n{j}")

    def tensor(a):
        return [capture.meta[a.name]["dtype"], capture.meta[a.name]["shape"]]

    weights = []
    for w in occ.weights:
        t = attribute(capture, w.target)
        kind = capture.kind.get(w.target, "buffer")
        weights.append([kind, dtype_name(t.dtype), list(t.shape)])
        if kind == "constant":  # part of the computation, as an operator's constants are: by value
            weights[-1].append(hashlib.sha256(t.detach().cpu().contiguous().numpy().tobytes()).hexdigest())
    return {"inputs": [tensor(a) for a in occ.inputs], "weights": weights, "nodes": nodes,
            "outputs": [repr(refs[o]) for o in occ.outputs]}


def stable_repr(value):
    """repr, but a function or a class by its qualified name: never an address, which changes from run to run."""
    if isinstance(value, (list, tuple)):
        inner = ", ".join(stable_repr(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner},)"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{stable_repr(k)}: {stable_repr(v)}" for k, v in sorted(value.items())) + "}"
    if callable(value) and not isinstance(value, (torch.dtype, torch.device)):
        return f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', type(value).__name__)}"
    return repr(value)


def attribute(capture, target):
    obj = capture.gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def region_hash(description):
    text = json.dumps(description, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Problem:
    """A distinct region: its first occurrence (what the file is written from) and every occurrence's place."""

    def __init__(self, name, first):
        self.name = name
        self.first = first
        self.occurrences = [first]
        self.hash = first.hash
        self.file = f"region_{self.hash}.py"
        self.weights_file = f"region_{self.hash}.pt"
        self.weight_names = []
        self.input_names = []
        self.modules = []  # (attribute, position in the region's nodes, the module): a region's opaque module

    @property
    def ops(self):
        return [op_name(n) for n in self.first.nodes]

    @property
    def anchor(self):
        return op_name(self.first.region.anchor) if self.first.region.anchor is not None else None

    @property
    def computes(self):
        return any(op not in VIEW_OPS for op in self.ops)


def cut(capture):
    """The graph's regions in execution order, and the problems they make (deduplicated by hash, named r1, r2,
    ... in order of first occurrence)."""
    order, _ = partition(capture)
    occurrences = [Occurrence(r) for r in order]
    problems, by_hash = [], {}
    for occ in occurrences:
        occ.description = describe(occ, capture)
        occ.hash = region_hash(occ.description)
        if occ.hash in by_hash:
            by_hash[occ.hash].occurrences.append(occ)
        else:
            by_hash[occ.hash] = Problem(f"r{len(problems) + 1}", occ)
            problems.append(by_hash[occ.hash])
        occ.problem, occ.index = by_hash[occ.hash], len(by_hash[occ.hash].occurrences) - 1
    return occurrences, problems


def python_name(text, taken):
    name = re.sub(r"\W", "_", text).strip("_") or "v"
    if name[0].isdigit() or name in ("self", "torch", "nn", "os", "device", "inf", "nan", "_WEIGHTS", "Model"):
        name = "v_" + name
    base, k = name, 1
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    taken.add(name)
    return name


def weight_attr(fqn, taken):
    """A weight's attribute in the region's Model: the last two parts of its name in the model (fc.weight ->
    fc_weight), so that identical regions read alike whichever occurrence wrote the file."""
    return python_name("_".join(fqn.split(".")[-2:]), taken)


FX_BUILTINS = {"inf", "nan", "NoneType", "torch", "device", "fx_pytree", "pytree"}


def forward_source(problem, capture):
    """The region's forward, written by FX's code generator from a graph of its own: its inputs as the forward's
    arguments, its weights as the Model's attributes, its modules (opaque ones) as submodules."""
    occ = problem.first
    graph = torch.fx.Graph()
    env, taken = {}, set()
    problem.input_names = [python_name(a.name, taken) for a in occ.inputs]
    for a, name in zip(occ.inputs, problem.input_names):
        env[a] = graph.placeholder(name)
    problem.weight_names = []
    for w in occ.weights:
        name = weight_attr(capture.fqn.get(w.target, w.target), taken)
        problem.weight_names.append(name)
        env[w] = graph.get_attr(name)
    problem.modules = []
    for i, node in enumerate(occ.nodes):
        copy = graph.node_copy(node, lambda a: env[a])
        # A view as a reshape: the region's file draws its inputs contiguous, where the model may have given it
        # strided ones whose results (attention's, over a transposed input) a view of the model's could follow but
        # not those of the file's inputs. reshape is the same view where one exists, else a copy of the same values.
        if copy.target is getattr(torch.ops.aten, "view").default:
            copy.target = torch.ops.aten.reshape.default
        elif node.op == "call_method" and copy.target == "view":
            copy.target = "reshape"
        if node.op == "call_module":
            name = python_name(node.target.split(".")[-1], taken)
            problem.modules.append((name, i, capture.gm.get_submodule(node.target)))
            copy.target = name
        env[node] = copy
    outs = [env[o] for o in occ.outputs]
    graph.output(outs[0] if len(outs) == 1 else tuple(outs))
    return graph_code(graph, f"region {problem.name}")


def graph_code(graph, what):
    """A graph's forward as FX's code generator writes it, each global it needs (a function outside torch) imported
    by name, with whether it writes inf or nan and torch.device(...): (source, imports, uses_inf, uses_device)."""
    code = graph.python_code(root_module="self")
    extra = sorted(set(code.globals) - FX_BUILTINS)
    imports = []
    for name in extra:
        obj = code.globals[name]
        module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
        found = None
        if module and qualname and "." not in qualname:
            try:
                found = getattr(importlib.import_module(module), qualname, None)
            except Exception:
                found = None
        if found is not obj:
            raise Refusal("untraceable", f"{what} calls {obj!r}, which a Python file cannot import by name")
        imports.append(f"from {module} import {qualname} as {name}")
    # FX frees each value after its last use (`;  x = None`): noise in a file a person or a model reads.
    source = re.sub(r";  (?:\w+ = )+None$", "", code.src.strip("\n"), flags=re.M)
    source = "\n".join(line.rstrip() for line in source.splitlines()).strip("\n")
    return source, imports, ("inf" in source or "nan" in source), ("device(" in source)


def literal(x):
    return f"{x:.4g}"


def input_expression(meta):
    """get_inputs()' draw for one input: the shape and dtype the model gave the region, at its scale (a float's
    mean and spread; its range when it was never negative, so that a log or a square root stays defined; an
    integer's range, so that an index stays in bounds)."""
    shape, dtype = meta["shape"], TORCH_NAMES[meta["dtype"]]
    if meta["dtype"] == "bool":
        return f"torch.randint(0, 2, {shape}).bool()"
    if "min" in meta and "mean" not in meta:
        draw = f"torch.randint({meta['min']}, {meta['max'] + 1}, {shape}, dtype={dtype})"
        if meta.get("sorted"):  # cut points: sorted along the last dimension, each row's first at 0
            return f"torch.sort({draw}, dim=-1).values.index_fill(-1, torch.tensor([0]), 0)"
        return draw
    mean, std = meta.get("mean", 0.0), meta.get("std", 1.0)
    cast = "" if meta["dtype"] == "f32" else f".to({dtype})"
    if std == 0:
        return f"torch.full({shape}, {literal(mean)}, dtype={dtype})"
    if abs(mean) < 0.05 and 0.8 < std < 1.25:
        return f"torch.randn({shape}){cast}"
    sign = "-" if mean < 0 else "+"
    return f"(torch.randn({shape}) * {literal(std)} {sign} {literal(abs(mean))}){cast}"


TORCH_NAMES = {"f32": "torch.float32", "f16": "torch.float16", "bf16": "torch.bfloat16", "f64": "torch.float64",
               "i64": "torch.int64", "i32": "torch.int32", "i8": "torch.int8", "u8": "torch.uint8", "bool": "torch.bool"}


def module_constructor(name, module):
    """An opaque module written as its constructor (repr(nn.LSTM(...)) is one); refused where that does not
    rebuild a module of the same kind and weights."""
    text = f"nn.{module!r}"
    try:
        rebuilt = eval(text, {"nn": torch.nn})
        same = type(rebuilt) is type(module) and \
            {k: tuple(v.shape) for k, v in rebuilt.state_dict().items()} == \
            {k: tuple(v.shape) for k, v in module.state_dict().items()}
    except Exception:
        same = False
    if not same or "\n" in text:
        raise Refusal("untraceable", f"the module {name} ({type(module).__name__}) cannot be written as a constructor "
                                     "in a problem file")
    return text


def region_weights(problem, occ, capture):
    """The region's state dict for one occurrence: its weights' values in the model, and its modules'."""
    state = {}
    for name, w in zip(problem.weight_names, occ.weights):
        state[name] = attribute(capture, w.target).detach().cpu().clone()
    for name, i, _ in problem.modules:
        for key, t in capture.gm.get_submodule(occ.nodes[i].target).state_dict().items():
            state[f"{name}.{key}"] = t.detach().cpu().clone()
    return state


def occurrence_weights(problem, occ, capture):
    """Each of the region's state-dict keys -> the model's own key, for this occurrence (to put a kernel back in
    its place, its weights come from there)."""
    names = {}
    for name, w in zip(problem.weight_names, occ.weights):
        if capture.kind.get(w.target) != "constant":  # a constant's value is the file's own (the hash holds it)
            names[name] = capture.fqn.get(w.target, w.target)
    for name, i, _ in problem.modules:
        target = occ.nodes[i].target
        for key in capture.gm.get_submodule(target).state_dict():
            names[f"{name}.{key}"] = f"{target}.{key}"
    return names


def write_problem(problem, capture, model_path, directory):
    forward, imports, uses_inf, uses_device = problem.source
    occ = problem.first
    lines = []
    for name, w in zip(problem.weight_names, occ.weights):
        t = attribute(capture, w.target)
        empty = f"torch.empty({list(t.shape)}, dtype={TORCH_NAMES.get(dtype_name(t.dtype), str(t.dtype))})"
        if capture.kind.get(w.target) == "parameter":
            grad = "" if t.is_floating_point() else ", requires_grad=False"
            lines.append(f"self.{name} = nn.Parameter({empty}{grad})")
        else:
            lines.append(f"self.register_buffer({name!r}, {empty})")
    for name, _, module in problem.modules:
        lines.append(f"self.{name} = {module_constructor(name, module)}")
    state = region_weights(problem, occ, capture)
    if state:
        torch.save(state, os.path.join(directory, problem.weights_file))
        lines += ["# The model's values. On PyTorch's meta device (as a signature is derived) there is nothing to",
                  "# load into.",
                  "if not any(t.is_meta for t in self.state_dict().values()):",
                  "    self.load_state_dict(torch.load(_WEIGHTS, map_location=\"cpu\"))"]
    ops = " ".join(problem.ops)
    head = [
        f"# Region {problem.name} of {os.path.basename(model_path)}, cut by `kernelevolve optimize` (issue 30): "
        f"{len(problem.occurrences)} occurrence(s) in the model.",
        f"# Operators: {ops}",
        f"# Hash {problem.hash}: its operators, constants, shapes and dtypes (not its weights' values).",
    ]
    if state:
        head.append(f"# Its weights are the model's own (its first occurrence's), in {problem.weights_file} beside this file.")
    head.append("# get_inputs() draws inputs of the shapes and dtypes the model gives this region, at the scale it gives them.")
    body = head + (["import os", ""] if state else []) + ["import torch", "import torch.nn as nn"]
    if uses_device:
        body.append("from torch import device")
    body += imports
    if uses_inf:
        body += ["", "inf = float(\"inf\")", "nan = float(\"nan\")"]
    if state:
        body += ["", f"_WEIGHTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), {problem.weights_file!r})"]
    body += ["", "", "class Model(nn.Module):", "    def __init__(self):", "        super().__init__()"]
    body += ["        " + line for line in lines]
    body += [""] + ["    " + line if line else "" for line in forward.splitlines()]
    draws = ", ".join(input_expression(capture.meta[a.name]) for a in occ.inputs)
    body += ["", "", "def get_inputs():", f"    return [{draws}]", "", "", "def get_init_inputs():", "    return []", ""]
    with open(os.path.join(directory, problem.file), "w") as f:
        f.write("\n".join(body))
    return state


# Step 5, put back: the cut undone, with operators standing in for the regions that won. The captured graph is
# rebuilt region by region (the cut's order, in which each reads only what earlier ones wrote); an occurrence of a
# put-back region becomes one call of a guard module (kernelevolve.torch.Guarded: the operator where the call is one
# it was verified on, else the region's own code), given its inputs and its own weights; every other region keeps
# its nodes. The result is written as a Python file a user imports (OPTIMIZED), its weights beside it.
OPTIMIZED, OPTIMIZED_WEIGHTS = "optimized.py", "optimized.pt"


def region_function(problem, signature, name):
    """The region's code as a plain function of the operator's arguments (its inputs and weights, by the names the
    operator's signature gives them, in that order): what a guard runs where the operator cannot. Its source and the
    imports that source needs; None and why where the signature is not the region's."""
    occ = problem.first
    if problem.modules:
        return None, "the region holds a module the trace did not enter (its weights are the module's): not put back"
    values = occurrence_values(problem, occ)
    if sorted(signature) != sorted(values):
        return None, (f"the operator takes ({', '.join(signature)}), the region's inputs and weights are "
                      f"({', '.join(values)})")
    graph = torch.fx.Graph()
    env = {values[n]: graph.placeholder(n) for n in signature}
    for node in occ.nodes:
        env[node] = graph.node_copy(node, lambda a: env[a])
    outs = [env[o] for o in occ.outputs]
    graph.output(outs[0] if len(outs) == 1 else tuple(outs))
    source, imports, _, _ = graph_code(graph, f"region {problem.name}")
    return (source.replace("def forward(self, ", f"def {name}(", 1), imports), None


def occurrence_values(problem, occ):
    """An occurrence's nodes by the names its problem gives them: its inputs, then its weights."""
    values = dict(zip(problem.input_names, occ.inputs))
    values.update(zip(problem.weight_names, occ.weights))
    return values


def optimized_graph(capture, occurrences, put_back):
    """The captured graph with each occurrence of a put-back region (`put_back`: problem hash -> its operator's
    signature) replaced by a call of a guard module named after the region and the occurrence (r1_0, r1_1, ...),
    its weights flattened to attributes of one module. Returns the graph and, per attribute, its kind and the capture's
    target; per guard, the region's name and hash; per kept module (an LSTM), its target."""
    graph, env = torch.fx.Graph(), {}
    attributes, modules, guards, taken = {}, {}, {}, set()

    def flat(target, store):
        for name, (_, t) in store.items():
            if t == target:
                return name
        name = python_name(target, taken)
        store[name] = (capture.kind.get(target, "module") if store is attributes else "module", target)
        return name

    def value(a):
        if a not in env and a.op == "get_attr":
            env[a] = graph.get_attr(flat(a.target, attributes))
        return env[a]

    for node in capture.gm.graph.nodes:
        if node.op == "placeholder":
            env[node] = graph.node_copy(node)
    for occ in occurrences:
        problem = occ.problem
        signature = put_back.get(problem.hash)
        if signature is None:
            for node in occ.nodes:
                copy = graph.node_copy(node, value)
                if node.op == "call_module":
                    copy.target = flat(node.target, modules)
                env[node] = copy
            continue
        values = occurrence_values(problem, occ)
        place = python_name(f"{problem.name}_{occ.index}", taken)
        guards[place] = (problem.name, problem.hash)
        call = graph.call_module(place, tuple(value(values[n]) for n in signature))
        if len(occ.outputs) == 1:
            env[occ.outputs[0]] = call
        else:
            for i, out in enumerate(occ.outputs):
                env[out] = graph.call_function(operator.getitem, (call, i))
    out = next(n for n in capture.gm.graph.nodes if n.op == "output")
    graph.node_copy(out, value)
    graph.lint()
    return graph, attributes, modules, guards


def write_optimized(directory, capture, occurrences, regions, model_path, package_dir, under_compile="operator",
                    weights=True):
    """OPTIMIZED and OPTIMIZED_WEIGHTS under `directory`: the optimized model as a file to import. `regions`: per
    put-back problem, its operator's database, run, node and signature, and its region_function (source, imports).
    `under_compile`: what each guard is under torch.compile (Guarded's `compiled`). `weights=False`: the code again
    for the same regions, OPTIMIZED_WEIGHTS as written (a model's weights can be gigabytes). Returns the file's path."""
    text, state = optimized_source(capture, occurrences, regions, model_path, package_dir, under_compile)
    if weights:
        torch.save({k: t.detach().cpu() for k, t in state.items()}, os.path.join(directory, OPTIMIZED_WEIGHTS))
    path = os.path.join(directory, OPTIMIZED)
    with open(path, "w") as f:
        f.write(text)
    return path


def optimized_source(capture, occurrences, regions, model_path, package_dir, under_compile="operator",
                     state_global=None):
    """The optimized model's file (write_optimized) as text, and its state dict: the capture's own tensors, where
    they are. `state_global`: the Model takes its weights from that global of its module rather than from
    OPTIMIZED_WEIGHTS (the proof's control, built in memory with no region put back, shares the model's weights)."""
    put_back = {p.hash: r["signature"] for p, r in regions}
    graph, attributes, modules, guards = optimized_graph(capture, occurrences, put_back)
    forward, imports, _, _ = graph_code(graph, "the optimized model")
    functions, table = [], {}
    for p, r in regions:
        source, more = r["function"]
        functions.append(source)
        imports += more
        table[p.name] = {"hash": p.hash, "database": r["database"], "run": r["run"], "node": r["node"],
                         "device_kind": r["device_kind"], "original": f"{p.name}_original",
                         "places": [g for g, (name, _) in guards.items() if name == p.name]}
    names = [f"{name} ({r['hash']})" for name, r in table.items()]
    state, lines = {}, []
    for name, (kind, target) in attributes.items():
        state[name] = attribute(capture, target).detach()
        if kind == "parameter":
            lines.append(f"self.{name} = nn.Parameter(state[{name!r}], requires_grad=False)")
        else:
            lines.append(f"self.register_buffer({name!r}, state[{name!r}])")
    for name, (_, target) in modules.items():
        module = capture.gm.get_submodule(target)
        lines.append(f"self.{name} = {module_constructor(name, module)}")
        lines.append(f"self.{name}.load_state_dict({{k[len({name + '.'!r}):]: v for k, v in state.items() "
                     f"if k.startswith({name + '.'!r})}})")
        for key, t in module.state_dict().items():
            state[f"{name}.{key}"] = t.detach()
    head = [
        f"# {os.path.basename(model_path)} optimized by `kernelevolve optimize` (issue 30): its captured graph with each "
        "put-back region's",
        "# operator in place (a kernel a run of optimize.db found, loaded by kernelevolve.torch), behind a guard that runs "
        "the",
        "# region's own code on a call the kernel was not verified on. load() gives the model (weights from "
        f"{OPTIMIZED_WEIGHTS}),",
        "# graph_module(model) its torch.fx GraphModule, operators(model) each operator with its call counts.",
        f"# Regions put back: {', '.join(names) or 'none'}.",
        "import os",
        "import sys",
        "",
        "import torch",
        "import torch.nn as nn",
        "import torch.fx",
        "from torch import device",
    ] + sorted(set(imports)) + [
        "",
        "_HERE = os.path.dirname(os.path.abspath(__file__))",
        "# Where the kernelevolve package was when this file was written (a build tree's); an installed one is found as",
        "# any package is.",
        f"_PACKAGE = {package_dir or ''!r}",
        "if _PACKAGE and os.path.isdir(_PACKAGE) and _PACKAGE not in sys.path:",
        "    sys.path.insert(0, _PACKAGE)",
        "import kernelevolve.torch  # noqa: E402",
        "",
        "inf = float(\"inf\")",
        "nan = float(\"nan\")",
        "# Per region put back: its hash, its operator's run and node in the database (relative to this file), its own",
        "# code (the guard's fallback) and the places in the graph that call it.",
        "REGIONS = " + pprint.pformat(table, width=100, sort_dicts=False).replace("\n", "\n" + " " * 10),
        "# Under torch.compile each guard is its operator (\"operator\"), or the region's own code for Inductor to",
        "# compile (\"original\": where the optimizer measured the compiled model slower with the operators).",
        f"UNDER_COMPILE = {under_compile!r}",
    ]
    body = head
    for source in functions:
        body += ["", ""] + source.splitlines()
    body += ["", "", "class Model(nn.Module):", "    def __init__(self, device=None, under_compile=None):",
             "        super().__init__()",
             f"        state = torch.load(os.path.join(_HERE, {OPTIMIZED_WEIGHTS!r}), map_location=\"cpu\")"
             if state_global is None else f"        state = {state_global}"]
    body += ["        " + line for line in lines]
    body += ["        for region in REGIONS.values():",
             "            # Each operator on the model's device, where that is of the kind it was verified on (elsewhere",
             "            # on that kind's device 0, and the guard answers with the region's own code).",
             "            kind = torch.device(device).type if device is not None else None",
             "            op = kernelevolve.torch.load(os.path.join(_HERE, region[\"database\"]), run=region[\"run\"],",
             "                                         node=region[\"node\"],",
             "                                         device=device if kind == region[\"device_kind\"] else None)",
             "            for place in region[\"places\"]:",
             "                self.add_module(place, kernelevolve.torch.Guarded(op, globals()[region[\"original\"]],",
             "                                                                  compiled=under_compile or UNDER_COMPILE))",
             ""]
    body += ["    " + line if line else "" for line in forward.splitlines()]
    body += ["", "", "def load(device=\"cpu\", under_compile=None):",
             "    \"\"\"The optimized model on `device`, in eval mode, for inference (its weights need no gradient).",
             "    `under_compile` (\"operator\" or \"original\") overrides UNDER_COMPILE: the optimizer chose it by",
             "    torch.compile's default mode, and its report measures reduce-overhead mode (CUDA graphs) both ways.\"\"\"",
             "    device = torch.device(device)",
             "    if device.type == \"cuda\" and device.index is None:  # where .to(\"cuda\") puts the weights",
             "        device = torch.device(\"cuda\", torch.cuda.current_device())",
             "    return Model(str(device), under_compile).to(device).eval()",
             "", "", "def operators(model):",
             "    \"\"\"Each put-back region's guards in `model`, by name: the calls each sent to its operator (`calls`), the",
             "    operator's launches from every place that shares it (`op.calls`), and the calls the region's own code",
             "    answered instead (`fallbacks`).\"\"\"",
             "    return {name: m for name, m in model.named_modules() if isinstance(m, kernelevolve.torch.Guarded)}",
             "", "", "class _Tracer(torch.fx.Tracer):",
             "    def is_leaf_module(self, m, qualname):",
             "        return isinstance(m, kernelevolve.torch.Guarded) or super().is_leaf_module(m, qualname)",
             "", "", "def graph_module(model=None):",
             "    \"\"\"The optimized model as a torch.fx GraphModule: its graph calls each guard as one module.\"\"\"",
             "    model = model if model is not None else load()",
             "    return torch.fx.GraphModule(model, _Tracer().trace(model))", ""]
    return "\n".join(body), state
