"""Translate what torch.compile (Inductor) writes on the CPU into a KernelEvolve C++ program (issue 31, "the same on
the CPU").

On the CPU, Inductor's output code holds C++ kernels (`name = async_compile.cpp_pybinding([types], '''#include
"<cpp_prefix.h>" extern "C" void kernel(...) {...}''')`), the buffers between them (`empty_strided_cpu`) and a
`call()` that calls them in order. `translate_cpu` turns it into a C++ candidate with its own plan
(docs/spec-format.md, "Programs"): each kernel an `extern "C"` function of the source under its Python name, each
call a kernel step, each buffer a temporary or the spec's output. What cannot be translated raises
`Untranslatable`, naming the part: the extern calls (`extern_kernels.mm`, `.addmm`, `.bmm`, `.convolution`: the
CPU has no library steps), ATen operators Inductor calls as they are, kernels that need PyTorch's headers.

Why the kernels stand alone. Inductor's kernels include cpp_prefix.h, which pulls in ATen's and c10's headers
(Vectorized, BFloat16, Philox, the AOTI shim): our Clang has none of them, and a candidate's source must compile as
it is stored, since a model rewrites it. The capture therefore asks for what needs none of them
(capture.py, cpu_capture_settings): no vectorization (`cpp.simdlen = 1`: plain scalar loops, which Clang
-O3 vectorizes for the host where it may, instead of at::vec::Vectorized<float>) and one thread (`cpp.threads = 1`:
no `#pragma omp`, since our CPU device calls a program on one thread, as the bridge times eager and
torch.compile). What a scalar kernel still uses of the prefix is small: NaN-propagating max and min, Welford's
combine, argmax's IndexValue, `mod`, c10's floor divisions, the bounds check of an index. The source carries those
it uses (_CPP_HELPERS, a transcription of torch 2.6's cpp_prefix.h over the standard library), and a kernel that names
anything else of ATen or c10 is refused.

The tunable. The only knob such C++ offers honestly is the order of its floating-point reductions: Clang does not
vectorize `acc = acc + x` over floats unless it may reassociate it. Where a kernel reduces (an accumulator
`tmp_acc`), FP_REASSOCIATE (0, then 1) opens each kernel with `#pragma clang fp reassociate(on)`, which lets it
vectorize the sum, in another order: verification judges the result. Without a reduction, no tunable: one that
changes nothing would only cost evaluations.

Standard library only, as the Triton translation: this runs where PyTorch has no Inductor (CI's torch 1.13) and never
imports torch.
"""

import ast
import json
import re

from .binding import _Binding, _match_tensors, _tie_sizes
from .errors import Untranslatable
from .output_code import _dotted, _TORCH_DTYPES, _value
from .plan import _Plan, _Storage
from .program import _temporary_shape
from .relayout import cpp_relayout_name, cpp_relayout_source


class _CppKernel:
    """One Inductor C++ kernel: its name in the output code, its params (names, C types) and its function's text,
    renamed from `kernel` to that name and without the prefix's #include."""

    _SIGNATURE = re.compile(r'extern\s+"C"\s+void\s+kernel\s*\(([^)]*)\)')

    def __init__(self, name, types, source):
        self.name = name
        lines = source.strip("\n").splitlines()
        includes = [line for line in lines if line.lstrip().startswith("#include")]
        if len(includes) > 1 or (includes and not includes[0].strip().endswith('.h"')):
            raise Untranslatable(f"kernel {name}", f"its source includes {', '.join(i.strip() for i in includes)}")
        # `#pragma GCC ivdep` is GCC's: Clang ignores it, with a warning in every compile log a model reads.
        body = "\n".join(line for line in lines if not line.lstrip().startswith("#include") and
                         line.strip() != "#pragma GCC ivdep")
        found = self._SIGNATURE.search(body)
        if not found:
            raise Untranslatable(f"kernel {name}", 'its source has no extern "C" void kernel(...)')
        self.params, self.types = [], []
        for text in found.group(1).split(","):
            words = text.split()
            if not words:
                continue
            self.types.append(" ".join(words[:-1]))
            self.params.append(words[-1].lstrip("*&"))
        if types and len(types) != len(self.params):
            raise Untranslatable(f"kernel {name}", f"its binding lists {len(types)} types for {len(self.params)} "
                                 "params")
        self.body = body[:found.start()] + f'extern "C" void {name}(' + found.group(1) + ")" + body[found.end():]
        # c10::convert<T>(x) (c10/util/TypeCast.h) is static_cast<T>(x) for the standard arithmetic types: an index
        # read from a float, a mean's count as a float.
        self.body = re.sub(rf"\bc10::convert<({_ARITHMETIC})>\(", r"static_cast<\1>(", self.body)
        # c10's floor divisions (c10/util/generic_math.h: a group norm's group of a channel): carried as helpers.
        self.body = re.sub(r"\bc10::(div_floor_integer|div_floor_floating)\(", r"\1(", self.body)
        self.reduces = "tmp_acc" in self.body
        for pattern, what in ((r"#pragma\s+omp|\bomp_", "OpenMP (captured with cpp.threads = 1, it has none)"),
                              (r"\bVectorized\b|\bVectorizedN\b|\bVecMask\b", "at::vec (captured with cpp.simdlen = 1, "
                               "it has none)"),
                              (r"\b(?:at|c10|torch|aoti_torch)::\w+|\baoti_torch_\w+",
                               "PyTorch's headers, which a candidate cannot include")):
            used = re.search(pattern, self.body)
            if used:
                raise Untranslatable(f"kernel {name}", f"it uses {used.group(0)}: {what}")
        for word in ("bfloat16", "half", "float8_e4m3fn", "float8_e5m2"):
            if re.search(rf"\b{word}\b", self.body):
                raise Untranslatable(f"kernel {name}", f"the type {word} (c10's): f32, f64 and integers are "
                                     "translated")
        for helper in _UNSUPPORTED_HELPERS:
            if re.search(rf"\b{helper}\b", self.body):
                raise Untranslatable(f"kernel {name}", f"cpp_prefix.h's {helper}, which the program does not carry")


def _cpp_kernels_of(tree):
    """Each `name = async_compile.cpp_pybinding([types], '''source''')` (torch 2.1 on) of the module."""
    kernels = {}
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and
                (_dotted(node.value.func) or "").startswith("async_compile.")):
            continue
        func = _dotted(node.value.func)
        target = node.targets[0]
        if not isinstance(target, ast.Name) or target.id == "async_compile":
            continue
        if func == "async_compile.cpp_pybinding":
            types = _value(node.value.args[0])
            kernels[target.id] = _CppKernel(target.id, types if isinstance(types, list) else [],
                                            node.value.args[1].value)
        elif func == "async_compile.cpp":
            kernels[target.id] = _CppKernel(target.id, [], node.value.args[0].value)
        else:
            raise Untranslatable(func, "a CPU capture's kernels are C++ (async_compile.cpp_pybinding)")
    return kernels


def _examples(tree):
    """The example of each of call()'s arguments: an int (a size symbol's value) or (shape, stride, dtype, device),
    from get_args() (newer Inductor) or benchmark_compiled_module()'s assignments (torch 2.6)."""
    func = None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in ("get_args", "benchmark_compiled_module"):
            if func is None or node.name == "get_args":
                func = node
    if func is None:
        raise Untranslatable("benchmark_compiled_module()", "the output code has no example arguments")
    examples = {}
    for node in func.body:
        if not (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)):
            continue
        name, value = node.targets[0].id, node.value
        if isinstance(value, ast.Constant) and isinstance(value.value, int):
            examples[name] = value.value
        elif isinstance(value, ast.Call) and _dotted(value.func) == "rand_strided":
            keywords = {k.arg: k.value for k in value.keywords}
            examples[name] = (list(_value(value.args[0])), list(_value(value.args[1])), _dotted(keywords["dtype"]),
                              _value(keywords["device"]) if "device" in keywords else None)
    return examples


def _call_function(tree):
    """call(): a method of class Runner in newer Inductor, a function of the module in torch 2.6."""
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Runner":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "call":
                    return item
        if isinstance(node, ast.FunctionDef) and node.name == "call":
            return node
    raise Untranslatable("call()", "the output code has no such function")


class _CpuPlan(_Plan):
    def statement(self, node):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            func = _dotted(node.value.func) or ""
            if func in self.kernels:
                return self.launch(self.kernels[func], _plain_args(node.value))
            if func.startswith("extern_kernels.") or func.startswith("torch.ops.") or func.startswith("aten."):
                raise _refused_call(func)
        return super().statement(node)

    def assign(self, name, value):
        func = _dotted(value.func) if isinstance(value, ast.Call) else None
        if func == "empty_strided_cpu":
            shape, stride, dtype = value.args[:3]
            storage = _Storage(name, list(shape.elts), list(stride.elts), _TORCH_DTYPES.get(_dotted(dtype)))
            if storage.dtype is None:
                raise Untranslatable(f"the buffer {name}", f"dtype {_dotted(dtype)}")
            self.buffers[name] = storage
            self.storages.append(storage)
            return None
        if func and (func.startswith("extern_kernels.") or func.startswith("torch.ops.") or func.startswith("aten.")):
            raise _refused_call(func)
        if func in ("empty_strided_cuda", "empty_strided_xpu"):
            raise Untranslatable(func, "a GPU buffer in a CPU capture")
        return super().assign(name, value)

    def relayout_kernel(self, rank, dtype):
        """The C++ relayout of a view of that rank and element type (relayout.py), one in the program each."""
        name = cpp_relayout_name(rank, dtype)
        kernel = next((k for k in self.launched if k.name == name), None)
        if kernel is None:
            kernel = _CppKernel(name, [], cpp_relayout_source(rank, dtype))
            self.launched.append(kernel)
        return kernel


def _refused_call(func):
    if func.startswith("extern_kernels."):
        return Untranslatable(func, "a library call (a matrix product or a convolution): the CPU's programs have "
                              "kernel steps only")
    return Untranslatable(func.replace("torch.ops.", "").replace(".default", ""),
                          "an ATen operator Inductor calls as it is: a CPU program has no step that computes it")


def _plain_args(call):
    """torch 2.0's calls pass `c_void_p(buf0.data_ptr())` and `c_long(s0)`: the buffer or the size itself."""
    args = []
    for node in call.args:
        if isinstance(node, ast.Call) and _dotted(node.func) in ("c_void_p", "c_long", "c_int") and node.args:
            inner = node.args[0]
            if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and inner.func.attr == \
                    "data_ptr":
                inner = inner.func.value
            node = inner
        args.append(node)
    return ast.Call(func=call.func, args=args, keywords=[])


def translate_cpu(output_code, spec, arg_names=None):
    """Inductor's CPU output code for a problem -> {"source", "tunables", "notes", "constraints"}: a C++
    candidate (the spec's language must be cpp) with its plan. `constraints` lists the sizes Inductor fixed in the
    code (`features == 4096`): the program computes the problem only where they hold. `arg_names`: the spec param
    each of call()'s arguments is, where the capture saw it (state_names()), so that same-shaped state entries (a
    batch norm's weight, bias and statistics) pair right; else None, and they pair by order."""
    tree = ast.parse(output_code)
    kernels = _cpp_kernels_of(tree)
    examples = _examples(tree)
    call = _call_function(tree)
    binding = _Binding(spec)
    _match_tensors(call, examples, binding, arg_names)
    _tie_sizes(call, examples, binding)
    plan = _CpuPlan(binding, kernels)
    plan.run(call)
    if not plan.steps:
        raise Untranslatable("call()", "it calls no kernel")

    used = {id(a.root()) for s in plan.steps for a in s["args"] if isinstance(a, _Storage)}
    for storage in plan.storages:
        if id(storage) in used and storage.shape_nodes is None:
            raise Untranslatable(f"the buffer {storage.name}", "call() asserts no shape for it")
    for step in plan.steps:
        for arg, ctype in zip(step["args"], step["kernel"].types):
            if not isinstance(arg, _Storage) and not isinstance(arg, str):
                continue
            pointer = "*" in ctype
            buffer = isinstance(arg, _Storage) or binding.params.get(arg, {}).get("role") in ("in", "out", "inout")
            if pointer != buffer:
                raise Untranslatable(f"kernel {step['kernel'].name}", f"its param of type {ctype} is passed "
                                     f"{_cpp_ref(arg)}")
    temporaries = [{"name": s.name, "dtype": s.dtype, "shape": _temporary_shape(plan, s)}
                   for s in plan.storages if s.output is None and id(s) in used]
    steps = [{"kernel": step["kernel"].name, "args": [_cpp_ref(a) for a in step["args"]]} for step in plan.steps]
    block = {"temporaries": temporaries, "steps": steps} if temporaries else {"steps": steps}
    bodies = [kernel.body for kernel in plan.launched]
    reduces = any(kernel.reduces for kernel in plan.launched)
    tunables = {"FP_REASSOCIATE": [0, 1]} if reduces else {}
    notes = [f"{len(plan.launched)} C++ kernel(s) ({', '.join(k.name for k in plan.launched)}), scalar and on one "
             "thread as captured (cpp.simdlen = 1, cpp.threads = 1)"]
    if reduces:
        notes.append("FP_REASSOCIATE 1 lets Clang reorder (and vectorize) the reductions' sums")
    if binding.constraints:
        notes.append("specialised by Inductor to " + ", ".join(binding.constraints))
    return {"source": _cpp_source(block, bodies, reduces), "tunables": tunables, "constraints": binding.constraints,
            "notes": "Translated from torch.compile's (Inductor's) CPU output code: " + "; ".join(notes) + "."}


def _cpp_ref(arg):
    if isinstance(arg, _Storage):
        arg = arg.root()
        return arg.output or arg.name
    return arg


def _cpp_source(block, bodies, reduces):
    plan_text = json.dumps(block).replace('{"kernel"', '\n   {"kernel"')
    text = "/* kernelevolve-plan\n" + plan_text + "\n*/\n" + _PRELUDE
    code = "\n".join(bodies)
    for name, helper in _CPP_HELPERS.items():
        if re.search(rf"\b{name}\b", code):
            text += helper
    if reduces:
        text += _REASSOCIATE
    for body in bodies:
        if reduces:
            # `#pragma clang fp` must open a compound statement: the function's own braces.
            brace = body.index("{", body.index(")"))
            body = body[:brace + 1] + "\n    KE_FP_REASSOCIATE" + body[brace + 1:]
        text += "\n" + body + "\n"
    return text


# The standard headers Inductor's scalar kernels use (std::exp, std::numeric_limits, std::make_unique, int64_t).
_PRELUDE = """// Inductor's C++ kernels, with the helpers of PyTorch's cpp_prefix.h (torch 2.6) they use, written out.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <type_traits>

template <typename T>
inline bool ke_isnan(T x) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(x);
  else return false;
}
"""


_REASSOCIATE = """
#if FP_REASSOCIATE
#define KE_FP_REASSOCIATE _Pragma("clang fp reassociate(on)")
#else
#define KE_FP_REASSOCIATE
#endif
"""

# cpp_prefix.h's scalar helpers, each carried where a kernel names it (at::_isnan is ke_isnan here).
_CPP_HELPERS = {
    "max_propagate_nan": """
template <typename T>
inline T max_propagate_nan(T a, T b) {
  if (ke_isnan(a)) return a;
  return a > b ? a : b;
}
""",
    "min_propagate_nan": """
template <typename T>
inline T min_propagate_nan(T a, T b) {
  if (ke_isnan(a)) return a;
  return a < b ? a : b;
}
""",
    "mod": """
template <typename T, typename U>
inline std::common_type_t<T, U> mod(T a, U b) { return a % b; }
template <> inline float mod(float a, float b) { return std::fmod(a, b); }
template <> inline double mod(double a, double b) { return std::fmod(a, b); }
""",
    "div_floor_integer": """
template <typename A, typename B>
inline std::common_type_t<A, B> div_floor_integer(A a, B b) {
  std::common_type_t<A, B> x = a, y = b;
  if ((x < 0) != (y < 0)) {
    const auto quot = x / y;
    return x % y ? quot - 1 : quot;
  }
  return x / y;
}
""",
    "div_floor_floating": """
template <typename T>
inline T div_floor_floating(T a, T b) {
  if (b == 0) return a / b;
  auto mod = std::fmod(a, b);
  auto div = (a - mod) / b;
  if ((mod != 0) && (b < 0) != (mod < 0)) div -= T(1);
  if (div == 0) return std::copysign(T(0), a / b);
  T floordiv = std::floor(div);
  return div - floordiv > T(0.5) ? floordiv + T(1) : floordiv;
}
""",
    "AOTI_TORCH_CHECK": """
// Inductor's bounds check of an index it loads (an embedding's, a loss's target): out of bounds, the call traps,
// where PyTorch would raise.
#define AOTI_TORCH_CHECK(cond, ...) \\
  do {                              \\
    if (!(cond)) __builtin_trap();  \\
  } while (0)
""",
    "Welford": """
template <typename T>
struct Welford {
  T mean = T(0);
  T m2 = T(0);
  T weight = T(0);
  uint64_t index = 0;
};

template <typename T>
Welford<T> welford_combine(const Welford<T>& a, const Welford<T>& b, bool use_index = false) {
  if (a.index == 0) return b;
  if (b.index == 0) return a;
  auto delta = b.mean - a.mean;
  auto a_weight = use_index ? T(a.index) : a.weight;
  auto b_weight = use_index ? T(b.index) : b.weight;
  auto new_weight = a_weight + b_weight;
  auto wb_over_w = b_weight / new_weight;
  return Welford<T>{a.mean + delta * wb_over_w, a.m2 + b.m2 + delta * delta * a_weight * wb_over_w, new_weight,
                    a.index + b.index};
}

template <typename T>
Welford<T> welford_combine(const Welford<T>& acc, const T& data) {
  auto new_weight = acc.weight + T(1);
  auto delta = data - acc.mean;
  T new_mean = acc.mean + delta / new_weight;
  auto new_delta = data - new_mean;
  return Welford<T>{new_mean, acc.m2 + delta * new_delta, new_weight, acc.index + 1};
}
""",
    "IndexValue": """
template <typename T>
struct IndexValue {
  int64_t index;
  T value;
  IndexValue(int64_t idx, T val) : index(idx), value(val) {}
  IndexValue() {}
};

template <typename T>
inline bool greater_or_nan(T a, T b, int64_t idx_a, int64_t idx_b) {
  if (ke_isnan(a)) return ke_isnan(b) ? idx_a < idx_b : true;
  return (a == b) ? idx_a < idx_b : (a > b);
}

template <typename T>
inline bool less_or_nan(T a, T b, int64_t idx_a, int64_t idx_b) {
  if (ke_isnan(a)) return ke_isnan(b) ? idx_a < idx_b : true;
  return (a == b) ? idx_a < idx_b : (a < b);
}

template <typename T>
inline IndexValue<T>& argmin_combine(IndexValue<T>& a, T next_value, int64_t next_index) {
  if (!less_or_nan(a.value, next_value, a.index, next_index)) {
    a.value = next_value;
    a.index = next_index;
  }
  return a;
}

template <typename T>
inline IndexValue<T>& argmax_combine(IndexValue<T>& a, T next_value, int64_t next_index) {
  if (!greater_or_nan(a.value, next_value, a.index, next_index)) {
    a.value = next_value;
    a.index = next_index;
  }
  return a;
}

template <typename T>
inline IndexValue<T>& argmin_combine(IndexValue<T>& a, const IndexValue<T>& next) {
  return argmin_combine(a, next.value, next.index);
}

template <typename T>
inline IndexValue<T>& argmax_combine(IndexValue<T>& a, const IndexValue<T>& next) {
  return argmax_combine(a, next.value, next.index);
}
""",
}

_ARITHMETIC = "float|double|bool|int8_t|uint8_t|int16_t|int32_t|int64_t|uint32_t|uint64_t|int|long"

# What else cpp_prefix.h gives a scalar kernel: refused by name (the program does not carry them).
_UNSUPPORTED_HELPERS = ("WeightRecp", "normalized_rand_cpu", "randn_cpu", "randint64_cpu", "atomic_add",
                        "fetch_value", "calc_erfinv", "mm_get_thread_blocking", "mm_get_cache_blocking",
                        "flag_to_float_scalar", "float_to_flag_scalar")
