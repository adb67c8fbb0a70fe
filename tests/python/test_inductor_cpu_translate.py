"""Inductor's recorded CPU output code (tests/fixtures/inductor_cpu) translates into the expected C++ programs
(issue 31, "the same on the CPU"), and what cannot be translated is refused naming its part.

Standard library only, no torch: run with PYTHONPATH=src/pytorch (ctest does). Each problem's spec is
tests/fixtures/inductor/specs/NAME.json, the params `kernelevolve import problems/pytorch/NAME/model.py` derives
(the same for every language). That the programs compile and compute the module is test_inductor_cpu_program's.
"""

import json
import os
import re
import sys
import unittest

from ke_inductor import Untranslatable, translate_cpu

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures", "inductor_cpu")
SPECS = os.path.join(HERE, "..", "fixtures", "inductor", "specs")

TRANSLATED = {
    "gelu_tanh.dynamic", "gelu_tanh.static", "layer_norm_affine.dynamic", "layer_norm_affine.static",
    "mean_middle_dim.dynamic", "mean_middle_dim.static", "relu_nchw.dynamic", "relu_nchw.static",
    "softmax_last_dim.dynamic", "softmax_last_dim.static",
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
}

DYNAMIC_FIXED = {"layer_norm_affine.dynamic": ["hidden == 768"]}


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
