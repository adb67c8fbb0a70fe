"""The PyTorch operator of a CUDA program, on the lent GPU with PyTorch 2.4 or later (issue 29): opcheck,
torch.compile(fullgraph=True), a CUDA graph, and a DLRM-style model (bench/operator/dlrm.py) with its interaction
replaced by the run's best, end to end; and a Triton program through the same launch. KE_TEST_DLRM_DB: a CUDA run
of problems/pytorch/dlrm_interaction; KE_TEST_TRITON_DB: a CUDA run of problems/level1/cumsum/triton.json.

    KE_TEST_DLRM_DB=dlrm.db PYTHONPATH=build/python:bench/operator python3 tests/python/test_torch_operator_gpu.py -v
"""
import os
import unittest

import torch

import kernelevolve.torch as ket

DB = os.environ.get("KE_TEST_DLRM_DB")
READY = torch.cuda.is_available() and DB and ket.HAS_CUSTOM_OP
if READY:
    import dlrm

    OP = ket.load(DB)


def close(a, b, atol=None, rtol=None):
    return torch.allclose(a, b, atol=atol or OP.program.atol, rtol=rtol or OP.program.rtol)


@unittest.skipUnless(READY, "needs a CUDA GPU, KE_TEST_DLRM_DB and PyTorch 2.4 or later")
class GpuOperatorTest(unittest.TestCase):
    def features(self, batch=4096, fields=27, dim=128):
        return torch.randn(batch, fields, dim, device="cuda")

    def test_opcheck(self):
        torch.library.opcheck(OP.op, (self.features(),))

    def test_parity_on_the_current_stream(self):
        module = dlrm.interaction_module()
        x = self.features()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), torch.no_grad():
            calls = OP.calls
            got = OP(x)
            expected = module(x)
        torch.cuda.synchronize()
        self.assertEqual(OP.calls, calls + 1)
        self.assertTrue(close(got, expected), (got - expected).abs().max())

    def test_cuda_graph_captures_it(self):
        module = dlrm.interaction_module()
        x = self.features()
        with torch.no_grad():
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                OP(x)  # warm: the program's launch for this size is made outside the capture
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                out = OP(x)
            x.copy_(self.features())
            graph.replay()
            torch.cuda.synchronize()
            self.assertTrue(close(out, module(x)), "the replayed graph did not run the program on the new input")

    def test_compile_fullgraph_and_the_model_end_to_end(self):
        torch.manual_seed(0)
        model = dlrm.DLRM().cuda().eval()
        args = dlrm.inputs("cuda")
        with torch.no_grad():
            features = torch.stack([model.bottom(args[0])] + [t(args[1][k], args[2][k])
                                                               for k, t in enumerate(model.tables)], dim=1)
            expected_pairs = model.interaction(features)
            expected = model(*args)
            ket.replace(model, "interaction", OP)
            calls = OP.calls
            self.assertTrue(close(model.interaction(features), expected_pairs))
            got = model(*args)
            self.assertEqual(OP.calls, calls + 2, "the replaced model never called the operator")
            self.assertTrue(close(got, expected, atol=1e-4, rtol=1e-3), (got - expected).abs().max())
            compiled = torch.compile(model, fullgraph=True)
            calls = OP.calls
            got = compiled(*args)
            self.assertGreater(OP.calls, calls, "the compiled model never called the operator")
            self.assertTrue(close(got, expected, atol=1e-3, rtol=1e-3), (got - expected).abs().max())


TRITON_DB = os.environ.get("KE_TEST_TRITON_DB")


@unittest.skipUnless(READY and TRITON_DB, "needs KE_TEST_TRITON_DB, a CUDA run of problems/level1/cumsum/triton.json")
class TritonOperatorTest(unittest.TestCase):
    def test_a_triton_program_runs_through_the_same_launch(self):
        op = ket.load(TRITON_DB)
        self.assertEqual(op.program.spec["language"], "triton")
        x = torch.randn(1531, 3001, device="cuda")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            y = op(x)
        torch.cuda.synchronize()
        self.assertEqual(op.calls, 1)
        expected = torch.cumsum(x.double(), dim=1).float()
        self.assertTrue(torch.allclose(y, expected, atol=op.program.atol, rtol=op.program.rtol),
                        (y - expected).abs().max())
        with self.assertRaises(ValueError):  # no PyTorch module to fall back on, and not verified at this shape
            op(torch.randn(5, 7, device="cuda"))


if __name__ == "__main__":
    unittest.main()
