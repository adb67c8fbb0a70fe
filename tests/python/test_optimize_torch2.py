"""`kernelevolve optimize` under PyTorch 2.x (issue 30's torch.export, torch.compile and custom-op paths), on the CPU.

What only PyTorch 2.x has: the graph captured by torch.export (its factories folded into constants, its flat output
the model's own), torch.compile measured as the regions' baseline, each put-back operator registered with a fake,
the A/B of torch.compile against torch.compile of the optimized model (with its graph breaks), and the optimized
model through torch.export (optimized.pt2, the operator one node of it), loaded back and run. The checks of
test_optimize.py that hold on every PyTorch (it says what differs by version) run here too, on 2.x. Run by ctest
(tests/test_optimize_torch2.cmake) with a Python whose torch is 2.x:
    KE_CLI=build/kernelevolve KE_WORK=/tmp/w python3 tests/python/test_optimize_torch2.py
"""

import os
import sys
import unittest

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_optimize as base  # noqa: E402  (its helpers and the checks that hold on every PyTorch)

if not base.TORCH2:
    print(f"SKIPPED: torch {torch.__version__} is not 2.x (this test is for torch.export and torch.compile)")
    sys.exit(0)


class ExportCaptureTest(base.Optimized, unittest.TestCase):
    MODEL, NAME = base.MLP, "torch2_mlp"

    def test_captured_by_torch_export(self):
        self.assertTrue(self.report["capture"].startswith("torch.export"), self.report["capture"])
        regions = sorted(self.report["regions"], key=lambda r: -r["count"])
        self.assertEqual([r["count"] for r in regions], [3, 1])
        self.assertEqual(regions[0]["ops"], ["linear", "layer_norm", "gelu"])
        self.assertFalse(self.report["graph"]["output_is_tuple"])


class ConvnetTest(base.ConvnetTest):
    """convnet.py through torch.export: the linspace and the LSTM's zero states constants, no region of their own."""
    NAME = "torch2_convnet"


class EndToEndTest(base.EndToEndTest):
    """block_linear.py evolved, put back as a dispatcher operator, compiled and exported."""

    def test_the_operator_is_a_custom_op(self):
        if base.SANITIZED:
            self.skipTest("no uninstrumented Python loads a library built with AddressSanitizer")
        module = base.load(os.path.join(self.out, "optimized.py"), "optimized_torch2")
        import kernelevolve.torch as ket
        self.assertTrue(ket.HAS_CUSTOM_OP)
        model = module.load()
        guard = next(iter(module.operators(model).values()))
        self.assertTrue(guard.op.qualname.startswith("kernelevolve::"))
        # torch.compile of the optimized model: the result the model's, and the operator called within it unless the
        # optimizer measured the compiled model faster without it (its guards then step aside under compile).
        proof = self.second["put_back"]
        self.assertEqual(module.UNDER_COMPILE, proof["under_compile"])
        if proof["under_compile"] == "original":
            with_operators = proof["ab_compile"]["with_operators"]
            self.assertLess(with_operators["speedup"], 1)
            self.assertGreater(proof["ab_compile"]["speedup"], with_operators["speedup"])
            self.assertIn("step aside under torch.compile", proof["ab_compile"]["verdict"])
        eager, _ = base.model_of(base.BLOCK_LINEAR, self.second)
        x = torch.randn(16, 64)
        with torch.no_grad():
            model(x)
            compiled = torch.compile(model)
            launches = guard.op.calls
            base.assert_close(self, compiled(x), eager(x), "torch.compile of the optimized model")
        if proof["under_compile"] == "operator":
            self.assertGreater(guard.op.calls, launches)
        else:
            self.assertEqual(guard.op.calls, launches)
        # The other choice on request (the report measures reduce-overhead mode both ways): the operator inside.
        other = "original" if proof["under_compile"] == "operator" else "operator"
        torch._dynamo.reset()
        model = module.load(under_compile=other)
        guard = next(iter(module.operators(model).values()))
        self.assertEqual(guard.compiled, other)
        with torch.no_grad():
            launches = guard.op.calls
            base.assert_close(self, torch.compile(model)(x), eager(x), f"torch.compile, under_compile={other!r}")
        self.assertEqual(guard.op.calls > launches, other == "operator")

    def test_the_exported_program_holds_the_operator(self):
        proof = self.second["put_back"]
        if base.SANITIZED:
            self.assertEqual(proof["regions"], [])
            return
        self.assertIn("graph_breaks", proof["ab_compile"])
        self.assertEqual(proof["export"]["status"], "done", proof["export"])
        # The optimized module first: it finds the kernelevolve package, and registers the operator the program calls.
        base.load(os.path.join(self.out, "optimized.py"), "optimized_torch2_export").load()
        program = torch.export.load(proof["export"]["file"])
        targets = [str(n.target) for n in program.graph.nodes if n.op == "call_function"]
        self.assertEqual([t for t in targets if t.startswith("kernelevolve.")], proof["export"]["operators"])
        eager, _ = base.model_of(base.BLOCK_LINEAR, self.second)
        x = torch.randn(16, 64)
        with torch.no_grad():
            base.assert_close(self, program.module()(x), eager(x), "the exported program")


if __name__ == "__main__":
    os.makedirs(base.WORK, exist_ok=True)
    unittest.main(argv=sys.argv, verbosity=2)
