"""Inductor's recorded output code (tests/fixtures/inductor) translates into the expected programs (issue 31).

Standard library only, no GPU: run with PYTHONPATH=src/pytorch (ctest does). Each problem's spec comes from
tests/fixtures/inductor/specs/NAME.json, the params `kernelevolve import problems/pytorch/NAME/model.py` derives.
"""

import ast
import json
import os
import re
import unittest

import inductor_program
from inductor_program import Untranslatable, translate

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "inductor")

# Those that translate; the others raise Untranslatable naming this part.
TRANSLATED = {
    "conv3x3_bias_relu.dynamic", "gelu_tanh.dynamic", "gelu_tanh.static", "layer_norm_affine.dynamic",
    "layer_norm_affine.static", "linear_gelu_scale.dynamic", "linear_gelu_scale.static", "linear_relu.dynamic",
    "linear_relu.static", "linear_residual_layernorm.dynamic", "linear_residual_layernorm.static",
    "matmul_ab.dynamic", "matmul_ab.static", "mean_middle_dim.dynamic", "mean_middle_dim.static",
    "relu_nchw.dynamic", "relu_nchw.static", "softmax_last_dim.dynamic", "softmax_last_dim.static",
}
REFUSED = {
    "conv3x3_bias_relu.static": "extern_kernels.convolution on a channels-last buffer",
    "dlrm_interaction.dynamic": "extern_kernels.bmm",
    "dlrm_interaction.static": "extern_kernels.bmm",
    "emb_bag_sum.dynamic": "aten._embedding_bag",
    "emb_bag_sum.static": "aten._embedding_bag",
}


def fixture(name):
    with open(os.path.join(FIXTURES, name + ".py")) as f:
        code = f.read()
    with open(os.path.join(FIXTURES, "specs", name.split(".")[0] + ".json")) as f:
        spec = json.load(f)
    return code, spec


def plan_of(source):
    """The plan block: the module's first statement, a string literal opening with the word."""
    first = ast.parse(source).body[0]
    text = first.value.value
    assert text.startswith("kernelevolve-plan"), text[:40]
    return json.loads(text[len("kernelevolve-plan"):])


class EveryFixture(unittest.TestCase):
    def test_each_translates_or_names_its_part(self):
        names = sorted(f[:-3] for f in os.listdir(FIXTURES) if f.endswith(".py"))
        self.assertEqual(len(names), 24)
        self.assertEqual(set(names), TRANSLATED | set(REFUSED))
        for name in names:
            code, spec = fixture(name)
            with self.subTest(name):
                if name in REFUSED:
                    with self.assertRaises(Untranslatable) as caught:
                        translate(code, spec)
                    self.assertEqual(caught.exception.part, REFUSED[name])
                    self.assertTrue(caught.exception.why)
                    continue
                result = translate(code, spec)
                tree = ast.parse(result["source"])
                plan = plan_of(result["source"])
                self.assertTrue(plan["steps"])
                # The plan first, then Triton's imports; nothing of PyTorch's runtime is left.
                self.assertEqual([ast.unparse(n) for n in tree.body[1:3]],
                                 ["import triton", "import triton.language as tl"])
                for word in ("triton_helpers.", "tl_math.", "triton_heuristics", "torch"):
                    self.assertNotIn(word, result["source"])
                kernels = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
                for step in plan["steps"]:
                    if "kernel" in step:
                        self.assertIn(step["kernel"], kernels)
                for tunable, values in result["tunables"].items():
                    self.assertTrue(values, tunable)
                    self.assertEqual(len(values), len(set(values)), tunable)
                self.assertTrue(result["notes"])

    def test_the_dynamic_pointwise_reduction_normalization_and_matmul_ones_translate(self):
        for name in ("relu_nchw", "gelu_tanh", "softmax_last_dim", "mean_middle_dim", "layer_norm_affine",
                     "linear_relu", "linear_gelu_scale", "linear_residual_layernorm", "matmul_ab",
                     "conv3x3_bias_relu"):
            self.assertIn(name + ".dynamic", TRANSLATED)


class ExpectedPlans(unittest.TestCase):
    def translated(self, name):
        code, spec = fixture(name)
        result = translate(code, spec)
        return result, plan_of(result["source"])

    def test_relu_nchw_dynamic(self):
        result, plan = self.translated("relu_nchw.dynamic")
        n = "batch_size * channels * height * width"
        self.assertEqual(plan, {"steps": [{"kernel": "triton_poi_fused_relu_0", "grid": [f"cdiv({n}, XBLOCK)"],
                                           "args": ["x", "out", n]}]})
        self.assertEqual(result["tunables"], {"XBLOCK": [1024, 512], "num_warps": [4, 8], "num_stages": [1]})
        self.assertEqual(result["constraints"], [])
        # Inductor's NaN-propagating maximum, inlined as a plain Triton function.
        self.assertIn("def triton_helpers_maximum(a, b):", result["source"])
        self.assertIn("tmp2 = triton_helpers_maximum(tmp1, tmp0)", result["source"])

    def test_softmax_last_dim_dynamic(self):
        result, plan = self.translated("softmax_last_dim.dynamic")
        self.assertEqual(plan, {"steps": [{
            "kernel": "triton_red_fused__softmax_exp_prepare_softmax_online_sub_0",
            "grid": ["cdiv(batch_size * seq_len, XBLOCK)"],
            "args": ["x", "out", "num_classes", "batch_size * seq_len", "num_classes"]}]})
        # The autotuner's choice first (recorded in the fixture): two rows a program, each whole (1000 in a block
        # of 1024), 8 warps; ReductionHint.INNER's one row a program is among the others.
        self.assertEqual(result["tunables"]["XBLOCK"][0], 2)
        self.assertIn(1, result["tunables"]["XBLOCK"])
        self.assertEqual(result["tunables"]["R0_BLOCK"][0], 1024)
        self.assertEqual(result["tunables"]["num_warps"][0], 8)
        self.assertEqual(result["tunables"]["num_stages"], [1])
        self.assertIn("def triton_helpers_max2(a, dim):", result["source"])
        self.assertIn("from triton.language.extra import libdevice", result["source"])

    def test_the_autotuners_choice_comes_first(self):
        code, spec = fixture("softmax_last_dim.dynamic")
        code = re.sub(r"^# kernelevolve-chosen: .*$", "", code, flags=re.M)  # the fixture's own record
        kernel = "triton_red_fused__softmax_exp_prepare_softmax_online_sub_0"
        chosen = {kernel: {"XBLOCK": 8, "R0_BLOCK": 128, "num_warps": 4, "num_stages": 2}}
        given = translate(code, spec, chosen)
        # Recorded in the code by scripts/capture-inductor.py: the same.
        recorded = translate(code + "\n# kernelevolve-chosen: " + json.dumps(chosen) + "\n", spec)
        heuristic = translate(code, spec, {})
        for result in (given, recorded):
            tunables = result["tunables"]
            self.assertEqual([tunables[k][0] for k in ("XBLOCK", "R0_BLOCK", "num_warps", "num_stages")], [8, 128, 4, 2])
            # The heuristics' configurations stay the search's other values.
            for k in ("XBLOCK", "R0_BLOCK", "num_warps"):
                self.assertEqual(set(tunables[k]), set(heuristic["tunables"][k]) | {chosen[kernel][k]})
            self.assertIn("autotuner's choice", result["notes"])
        self.assertEqual(heuristic["tunables"]["R0_BLOCK"][0], 1024)
        # A record that says the capture could not read the choices is no choice.
        errored = translate(code + '\n# kernelevolve-chosen: {"error": "ReferenceError"}\n', spec)
        self.assertEqual(errored["tunables"], heuristic["tunables"])

    def test_softmax_last_dim_static_is_specialised(self):
        result, plan = self.translated("softmax_last_dim.static")
        self.assertEqual(len(plan["steps"]), 1)
        self.assertEqual(plan["steps"][0]["grid"], ["cdiv(512, XBLOCK)"])
        self.assertEqual(result["tunables"], {"XBLOCK": [1], "num_warps": [8], "num_stages": [1]})
        self.assertEqual(result["constraints"], ["batch_size == 16", "seq_len == 32", "num_classes == 1000"])

    def test_layer_norm_affine_dynamic(self):
        result, plan = self.translated("layer_norm_affine.dynamic")
        self.assertEqual(plan, {"steps": [{
            "kernel": "triton_per_fused_native_layer_norm_0", "grid": ["cdiv(batch_size * seq_len, XBLOCK)"],
            "args": ["x", "norm_weight", "norm_bias", "out", "batch_size * seq_len", "768"]}]})
        # A persistent reduction: its body fixes R0_BLOCK = 1024, so only XBLOCK is tuned. The autotuner kept one
        # row a program on one warp; the heuristics' first was 8 rows on 8 warps.
        self.assertEqual(result["tunables"], {"XBLOCK": [1, 8], "num_warps": [1, 8], "num_stages": [1]})
        self.assertEqual(result["constraints"], ["hidden == 768"])
        self.assertIn("libdevice.rsqrt", result["source"])

    def test_linear_relu_dynamic(self):
        result, plan = self.translated("linear_relu.dynamic")
        self.assertEqual(plan, {"steps": [
            {"library": "cublas.gemm", "args": ["x", "fc_weight", "out", "batch_size", "384", "512"],
             "options": {"b_transposed": "true"}},
            {"kernel": "triton_poi_fused_addmm_relu_0", "grid": ["cdiv(384 * batch_size, XBLOCK)"],
             "args": ["out", "fc_bias", "384 * batch_size"]}]})
        self.assertEqual(result["tunables"], {"XBLOCK": [512, 256], "num_warps": [4], "num_stages": [1]})
        self.assertEqual(result["constraints"], ["out_features == 384", "in_features == 512"])

    def test_two_kernels_tune_their_own_blocks_and_share_a_temporary(self):
        result, plan = self.translated("mean_middle_dim.dynamic")
        self.assertEqual(plan["temporaries"], [{"name": "buf0", "dtype": "f32", "shape": ["batch_size", "dim2", "2"]}])
        self.assertEqual([s["grid"] for s in plan["steps"]],
                         [["cdiv(2 * batch_size * dim2, K0_XBLOCK)"], ["cdiv(batch_size * dim2, K1_XBLOCK)"]])
        self.assertEqual(plan["steps"][0]["args"][-1], "(1 + dim1) / 2")
        self.assertEqual(sorted(result["tunables"]),
                         ["K0_R0_BLOCK", "K0_XBLOCK", "K1_XBLOCK", "num_stages", "num_warps"])
        self.assertIn("K0_XBLOCK : tl.constexpr", result["source"])
        self.assertNotIn(" XBLOCK", result["source"].replace("_XBLOCK", ""))

    def test_a_scalar_passed_by_item_is_the_spec_scalar(self):
        _, plan = self.translated("linear_gelu_scale.dynamic")
        self.assertEqual(plan["steps"][1]["args"], ["out", "fc_bias", "scale", "448 * batch_size"])

    def test_a_convolution_becomes_cudnn(self):
        _, plan = self.translated("conv3x3_bias_relu.dynamic")
        self.assertEqual(plan["steps"][0], {
            "library": "cudnn.conv2d", "args": ["x", "conv_weight", "out", "batch_size", "16", "height", "width",
                                                "32", "3", "3"],
            "options": {"stride": "1,1", "padding": "1,1", "dilation": "1,1", "groups": "1"}})

    def test_a_helper_without_a_counterpart_is_named(self):
        code, spec = fixture("relu_nchw.dynamic")
        with self.assertRaises(Untranslatable) as caught:
            translate(code.replace("triton_helpers.maximum", "triton_helpers.prod"), spec)
        self.assertEqual(caught.exception.part, "a kernel using triton_helpers.prod")

    def test_a_grouped_convolution_keeps_its_groups(self):
        code, spec = fixture("conv3x3_bias_relu.dynamic")
        result = translate(code.replace("groups=1, bias=None", "groups=2, bias=None"), spec)
        self.assertEqual(plan_of(result["source"])["steps"][0]["options"]["groups"], "2")

    def test_a_transposed_convolution_is_named(self):
        code, spec = fixture("conv3x3_bias_relu.dynamic")
        with self.assertRaises(Untranslatable) as caught:
            translate(code.replace("transposed=False", "transposed=True"), spec)
        self.assertEqual(caught.exception.part, "extern_kernels.convolution with transposed=True")

    def test_no_torch(self):
        with open(inductor_program.__file__) as f:
            tree = ast.parse(f.read())
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                    for a in n.names} | {n.module.split(".")[0] for n in ast.walk(tree)
                                         if isinstance(n, ast.ImportFrom) and n.module}
        self.assertFalse(imported & {"torch", "triton"})


if __name__ == "__main__":
    unittest.main()
