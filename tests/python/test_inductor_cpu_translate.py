"""Inductor's recorded CPU output code (tests/fixtures/inductor_cpu) translates into the expected C++ programs
(issue 31, "the same on the CPU"), and what cannot be translated is refused naming its part.

Standard library only, no torch: run with PYTHONPATH=src/pytorch (ctest does). Each problem's spec is
tests/fixtures/inductor/specs/NAME.json, the params `kernelevolve import problems/pytorch/NAME/model.py` derives
(the same for every language). That the programs compile and compute the module is test_inductor_cpu_program's.
"""

import ctypes
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from ke_inductor import Untranslatable, translate_cpu

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures", "inductor_cpu")
SPECS = os.path.join(HERE, "..", "fixtures", "inductor", "specs")

TRANSLATED = {
    "gelu_tanh.dynamic", "gelu_tanh.static", "layer_norm_affine.dynamic", "layer_norm_affine.static",
    "mean_middle_dim.dynamic", "mean_middle_dim.static", "relu_nchw.dynamic", "relu_nchw.static",
    "softmax_last_dim.dynamic", "softmax_last_dim.static",
    # Outputs that are views (issue 52): copied into the dense outputs by relayout steps.
    "scale_transpose.dynamic", "scale_transpose.static", "split_heads.dynamic", "split_heads.static",
}
# The CPU has no library steps: the products and convolutions are refused by the call's name.
REFUSED = {
    "conv3x3_bias_relu.dynamic": "extern_kernels.convolution", "conv3x3_bias_relu.static": "extern_kernels.convolution",
    "dlrm_interaction.dynamic": "extern_kernels.bmm", "dlrm_interaction.static": "extern_kernels.bmm",
    "emb_bag_sum.dynamic": "aten._embedding_bag", "emb_bag_sum.static": "aten._embedding_bag",
    "linear_gelu_scale.dynamic": "extern_kernels.addmm", "linear_gelu_scale.static": "extern_kernels.addmm",
    "linear_relu.dynamic": "extern_kernels.addmm", "linear_relu.static": "extern_kernels.addmm",
    "linear_residual_layernorm.dynamic": "extern_kernels.addmm",
    "linear_residual_layernorm.static": "extern_kernels.addmm",
    "matmul_ab.dynamic": "extern_kernels.mm", "matmul_ab.static": "extern_kernels.mm",
    "qkv_projection.dynamic": "extern_kernels.addmm", "qkv_projection.static": "extern_kernels.addmm",
}

# The heads of split_heads: its views fix them, and no input's shape gives them.
DYNAMIC_FIXED = {"layer_norm_affine.dynamic": ["hidden == 768"], "split_heads.dynamic": ["heads == 4"]}


def fixture(name):
    with open(os.path.join(FIXTURES, name + ".py")) as f:
        code = f.read()
    with open(os.path.join(SPECS, name.split(".")[0] + ".json")) as f:
        spec = json.load(f)
    return code, spec


def plan_of(source):
    found = re.match(r"/\* kernelevolve-plan\n(.*?)\n\*/", source, re.S)
    assert found, source[:80]
    return json.loads(found.group(1))


def functions_of(source):
    return re.findall(r'extern "C" void (\w+)\(', source)


class EveryFixture(unittest.TestCase):
    def test_each_translates_or_names_its_part(self):
        names = sorted(f[:-3] for f in os.listdir(FIXTURES) if f.endswith(".py") and f != "capture.py")
        self.assertEqual(set(names), TRANSLATED | set(REFUSED))
        for name in names:
            code, spec = fixture(name)
            with self.subTest(name):
                if name in REFUSED:
                    with self.assertRaises(Untranslatable) as caught:
                        translate_cpu(code, spec)
                    self.assertEqual(caught.exception.part, REFUSED[name])
                    self.assertTrue(caught.exception.why)
                    continue
                result = translate_cpu(code, spec)
                source = result["source"]
                plan = plan_of(source)
                # Every step calls a function the source defines; the source stands alone: the standard library's
                # headers only, nothing of ATen or c10, no OpenMP, no at::vec.
                self.assertTrue(set(s["kernel"] for s in plan["steps"]) <= set(functions_of(source)))
                for include in re.findall(r"#include\s*(\S+)", source):
                    self.assertRegex(include, r"^<[a-z_]+>$")
                self.assertNotRegex(source, r"\b(at|c10|torch)::|#pragma omp|Vectorized|#pragma GCC")
                for helper in ("max_propagate_nan", "min_propagate_nan", "welford_combine", "argmax_combine"):
                    if re.search(rf"\b{helper}\(", source):
                        self.assertRegex(source, rf"inline \w[\w<>, ]* {helper}\(|Welford<T> {helper}\(")
                # A dynamic capture holds for every workload, but for the sizes of weights (Dynamo keeps a
                # parameter's shape static); a static one says at which sizes it holds.
                if name.endswith(".dynamic"):
                    self.assertEqual(result["constraints"], DYNAMIC_FIXED.get(name, []))
                else:
                    self.assertTrue(result["constraints"])


class Programs(unittest.TestCase):
    def test_elementwise_dynamic_passes_the_sizes(self):
        result = translate_cpu(*fixture("gelu_tanh.dynamic"))
        self.assertEqual(plan_of(result["source"]), {"steps": [
            {"kernel": "cpp_fused_gelu_0", "args": ["x", "out", "batch_size", "features"]}]})
        self.assertEqual(result["constraints"], [])
        # Nothing to reorder: no tunable (one that changes nothing costs evaluations).
        self.assertEqual(result["tunables"], {})
        self.assertIn('extern "C" void cpp_fused_gelu_0(const float* in_ptr0', result["source"])
        self.assertIn("std::tanh", result["source"])

    def test_static_sizes_are_constraints(self):
        result = translate_cpu(*fixture("gelu_tanh.static"))
        self.assertEqual(result["constraints"], ["batch_size == 128", "features == 4096"])
        self.assertEqual(plan_of(result["source"])["steps"], [{"kernel": "cpp_fused_gelu_0", "args": ["x", "out"]}])

    def test_softmax_buffers_become_temporaries(self):
        result = translate_cpu(*fixture("softmax_last_dim.dynamic"))
        plan = plan_of(result["source"])
        self.assertEqual(plan["temporaries"], [
            {"name": "buf0", "dtype": "f32", "shape": ["batch_size", "seq_len", "1"]},
            {"name": "buf2", "dtype": "f32", "shape": ["batch_size", "seq_len", "1"]}])
        self.assertEqual(plan["steps"], [{"kernel": "cpp_fused__softmax_0", "args": [
            "x", "buf0", "buf2", "out", "batch_size", "seq_len", "num_classes"]}])
        self.assertIn("max_propagate_nan", result["source"])

    def test_reductions_offer_reassociation(self):
        result = translate_cpu(*fixture("layer_norm_affine.static"))
        self.assertEqual(result["tunables"], {"FP_REASSOCIATE": [0, 1]})
        source = result["source"]
        self.assertIn('#define KE_FP_REASSOCIATE _Pragma("clang fp reassociate(on)")', source)
        # The pragma opens the function's body, where Clang accepts it.
        self.assertRegex(source, r'void cpp_fused_native_layer_norm_0\([^)]*\)\s*\{\s*KE_FP_REASSOCIATE')
        self.assertIn("struct Welford", source)
        self.assertEqual(plan_of(source)["steps"][0]["args"], ["x", "norm_weight", "norm_bias", "buf0", "buf1", "out"])

    def test_a_reused_buffer_is_the_output(self):
        # `buf1 = buf0; del buf0  # reuse`, written in place (in_out_ptr0) and returned.
        result = translate_cpu(*fixture("mean_middle_dim.dynamic"))
        self.assertEqual(plan_of(result["source"]), {"steps": [
            {"kernel": "cpp_fused_mean_0", "args": ["out", "x", "batch_size", "dim2", "dim1"]}]})
        # c10::convert<float>(n) is a static_cast: the source names nothing of c10.
        self.assertIn("static_cast<float>(", result["source"])


class StridedOutputs(unittest.TestCase):
    """call() returns views (issue 52): a transposed one (scale_transpose) and three into one buffer at offsets 0, 48
    and 96 (split_heads: q, k and v of a [B, S, 3C] activation, as heads). The program writes Inductor's buffer as a
    temporary and a relayout kernel of ours copies each view into its dense output."""

    def test_a_transposed_output(self):
        result = translate_cpu(*fixture("scale_transpose.dynamic"))
        n = "batch_size * rows * cols"
        self.assertEqual(plan_of(result["source"]), {
            "temporaries": [{"name": "buf0", "dtype": "f32", "shape": ["batch_size", "rows", "cols"]}],
            "steps": [{"kernel": "cpp_fused_add_mul_0", "args": ["x", "buf0", "batch_size", "rows", "cols"]},
                      {"kernel": "ke_relayout_3d_f32",
                       "args": ["buf0", "out", n, "batch_size", "cols", "rows", "rows * cols", "1", "cols", "0"]}]})
        self.assertIn('extern "C" void ke_relayout_3d_f32(const float* src, float* dst, const int64_t numel',
                      result["source"])

    def test_a_split_into_three_views(self):
        result = translate_cpu(*fixture("split_heads.static"))
        plan = plan_of(result["source"])
        self.assertEqual(plan["temporaries"], [{"name": "buf0", "dtype": "f32", "shape": ["2", "16", "144"]}])
        self.assertEqual(plan["steps"][1:], [
            {"kernel": "ke_relayout_4d_f32",
             "args": ["buf0", out, "1536", "2", "4", "16", "12", "2304", "12", "144", "1", offset]}
            for out, offset in (("out0", "0"), ("out1", "48"), ("out2", "96"))])
        self.assertEqual(functions_of(result["source"]), ["cpp_fused_gelu_0", "ke_relayout_4d_f32"])

    def test_the_split_computes_the_module(self):
        """The static split's program compiled and called as the plan says (ctypes), against the module computed
        here in Python: each head of q, k and v, element by element."""
        compiler = shutil.which("clang++") or shutil.which("c++")
        if compiler is None:
            self.skipTest("no C++ compiler")
        result = translate_cpu(*fixture("split_heads.static"))
        plan = plan_of(result["source"])
        with tempfile.TemporaryDirectory() as folder:
            source, library = os.path.join(folder, "program.cpp"), os.path.join(folder, "program.so")
            with open(source, "w") as f:
                f.write(result["source"])
            done = subprocess.run([compiler, "-std=c++17", "-O1", "-shared", "-fPIC", source, "-o", library],
                                  capture_output=True, text=True, timeout=300)
            self.assertEqual(done.returncode, 0, done.stderr)
            program = ctypes.CDLL(library)
            b, s, heads, width = 2, 16, 4, 48
            x = [math.sin(i * 0.37) * 3 for i in range(b * s * 3 * width)]
            buffers = {"x": (ctypes.c_float * len(x))(*x), "buf0": (ctypes.c_float * len(x))()}
            for name in ("out0", "out1", "out2"):
                buffers[name] = (ctypes.c_float * (b * s * width))(*([float("nan")] * (b * s * width)))
            for step in plan["steps"]:
                args = [buffers[a] if a in buffers else ctypes.c_int64(int(a)) for a in step["args"]]
                getattr(program, step["kernel"])(*args)
        d = width // heads
        for j, name in enumerate(("out0", "out1", "out2")):
            got = buffers[name]
            for bi in range(b):
                for h in range(heads):
                    for si in range(s):
                        for di in range(d):
                            v = x[(bi * s + si) * 3 * width + j * width + h * d + di]
                            want = 0.5 * v * (1 + math.erf(v / math.sqrt(2)))
                            at = ((bi * heads + h) * s + si) * d + di
                            self.assertAlmostEqual(got[at], want, places=5, msg=f"{name}[{bi}, {h}, {si}, {di}]")

    def test_the_qkv_projection_is_refused_for_its_product(self):
        # On the CPU the product is what stops it (no library steps), not its views.
        with self.assertRaises(Untranslatable) as caught:
            translate_cpu(*fixture("qkv_projection.dynamic"))
        self.assertEqual(caught.exception.part, "extern_kernels.addmm")


class Helpers(unittest.TestCase):
    def test_c10_floor_division_is_carried(self):
        # A group norm's group of a channel: c10::div_floor_integer, rounding toward minus infinity.
        code, spec = fixture("gelu_tanh.dynamic")
        code = code.replace("auto tmp1 = static_cast<float>(0.5);",
                            "auto tmp1 = static_cast<float>(c10::div_floor_integer(static_cast<int64_t>(x0), "
                            "static_cast<int64_t>(-3L))) * 0.0f + 0.5f;")
        source = translate_cpu(code, spec)["source"]
        self.assertNotIn("c10::", source)
        self.assertIn("inline std::common_type_t<A, B> div_floor_integer(A a, B b)", source)
        self.assertNotIn("div_floor_floating", source)

    def test_an_index_bounds_check_traps(self):
        code, spec = fixture("gelu_tanh.dynamic")
        code = code.replace("auto tmp1 = static_cast<float>(0.5);", "auto tmp1 = static_cast<float>(0.5); "
                            'AOTI_TORCH_CHECK((0 <= x0) & (x0 < ks0*ks1), "index out of bounds");')
        source = translate_cpu(code, spec)["source"]
        self.assertIn("#define AOTI_TORCH_CHECK(cond, ...)", source)
        self.assertIn("__builtin_trap()", source)


class Refusals(unittest.TestCase):
    def gelu(self):
        return fixture("gelu_tanh.dynamic")

    def test_vectorized_kernel_is_refused(self):
        code, spec = self.gelu()
        code = code.replace("auto tmp0 = in_ptr0", "auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr0); auto u")
        with self.assertRaises(Untranslatable) as caught:
            translate_cpu(code, spec)
        self.assertEqual(caught.exception.part, "kernel cpp_fused_gelu_0")
        self.assertIn("simdlen", caught.exception.why)

    def test_openmp_is_refused(self):
        code, spec = self.gelu()
        code = code.replace("#pragma GCC ivdep", "#pragma omp for", 1)
        with self.assertRaises(Untranslatable) as caught:
            translate_cpu(code, spec)
        self.assertIn("OpenMP", caught.exception.why)

    def test_a_reduced_float_type_is_refused(self):
        code, spec = self.gelu()
        code = code.replace("auto tmp1 = static_cast<float>(0.5);", "auto tmp1 = static_cast<bfloat16>(0.5);")
        with self.assertRaises(Untranslatable) as caught:
            translate_cpu(code, spec)
        self.assertIn("bfloat16", caught.exception.why)

    def test_a_triton_kernel_in_a_cpu_capture_is_refused(self):
        code, spec = self.gelu()
        code = code.replace("async_compile.cpp_pybinding(['const float*', 'float*', 'const int64_t', "
                            "'const int64_t'], '''", "async_compile.triton('cpp_fused_gelu_0', '''")
        with self.assertRaises(Untranslatable) as caught:
            translate_cpu(code, spec)
        self.assertEqual(caught.exception.part, "async_compile.triton")

    def test_newer_inductor_form_translates(self):
        # Newer Inductor: call() a method of class Runner, the examples in get_args().
        code, spec = self.gelu()
        code = code.replace("def call(args):", "class Runner:\n    pass\n\ndef call(args):")
        code = re.sub(r"def benchmark_compiled_module\(times=10, repeat=10\):", "def get_args():", code)
        result = translate_cpu(code, spec)
        self.assertEqual(plan_of(result["source"])["steps"][0]["kernel"], "cpp_fused_gelu_0")


if __name__ == "__main__":
    sys.exit(unittest.main(verbosity=1).result.wasSuccessful() is False)
