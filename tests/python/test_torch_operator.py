"""The PyTorch operator of a stored program (issue 29), on real runs' databases that test_program_use.cmake makes:
the linear_relu problem (relu(nn.Linear(x)), a PyTorch module with weights) and the column-sum spec (no module).

    KE_TEST_LINEAR_DB=... KE_TEST_LINEAR_MODEL=.../model.py KE_TEST_COLSUM_DB=... KE_TEST_EXPORTED=op.py \
        PYTHONPATH=build/python python3 -m unittest tests/python/test_torch_operator.py

Runs on the CPU (the runs are CPU runs) under any PyTorch: 1.13 registers through torch.library.Library, 2.4 and
later through torch.library.custom_op, where opcheck, torch.compile(fullgraph=True) and torch.export are checked.
"""
import importlib.util
import os
import unittest
import warnings

import torch

import kernelevolve
import kernelevolve.torch as ket

LINEAR_DB = os.environ["KE_TEST_LINEAR_DB"]
LINEAR_MODEL = os.environ["KE_TEST_LINEAR_MODEL"]
COLSUM_DB = os.environ["KE_TEST_COLSUM_DB"]
EXPORTED = os.environ.get("KE_TEST_EXPORTED")


def import_file(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


problem = import_file(LINEAR_MODEL, "linear_relu_problem")
OP = ket.load(LINEAR_DB)  # one operator per program: registered once for the whole module's tests


def model(in_features=None, out_features=None):
    torch.manual_seed(0)
    args = problem.get_init_inputs()
    if in_features:
        args = [in_features, out_features]
    return problem.Model(*args).eval()


class Wrapper(torch.nn.Module):
    """A model with the problem's module inside, as a user's model holds it."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.scale = 2.0

    def forward(self, x):
        return self.inner(x) * self.scale


def close(a, b, program):
    return torch.allclose(a, b, atol=program.atol, rtol=program.rtol)


class ProgramTest(unittest.TestCase):
    def test_signature_and_provenance(self):
        p = OP.program
        self.assertEqual([q.name for q in p.params],
                         ["x", "fc_weight", "fc_bias", "out", "batch_size", "in_features", "out_features"])
        self.assertEqual(OP.signature, ["x", "fc_weight", "fc_bias"])
        self.assertEqual(p.provenance["problem"], "linear_relu")
        self.assertTrue(p.provenance["device_class"].startswith("cpu "))
        self.assertEqual(p.shape(3, {"batch_size": 51, "in_features": 301, "out_features": 97}), [51, 97])
        self.assertIn("linear_relu", repr(OP))
        self.assertTrue(kernelevolve.library_path())

    def test_bad_database_is_an_error(self):
        with self.assertRaises(kernelevolve.Error) as caught:
            kernelevolve.Program(COLSUM_DB, node=9999)
        self.assertEqual(caught.exception.status, "invalid argument")
        self.assertIn("has no node 9999", str(caught.exception))


class ReplaceTest(unittest.TestCase):
    def test_parity_and_engagement_at_both_workloads(self):
        for shape in [(None, None), (301, 97)]:
            m = Wrapper(model(*shape))
            w = OP.program.workloads[0 if shape[0] is None else 1]
            x = torch.randn(w["batch_size"], w["in_features"])
            with torch.no_grad():
                expected = m(x)
                replaced = ket.replace(m, "inner", OP)
                self.assertEqual(replaced, [m.inner])
                calls, runs = OP.calls, OP.program.calls
                got = m(x)
            # Engagement: the replaced model called the program, once; parity within the problem's tolerance.
            self.assertEqual(OP.calls, calls + 1, "the replaced model never called the operator")
            self.assertEqual(OP.program.calls, runs + 1)
            self.assertTrue(close(got, expected, OP.program), (got - expected).abs().max())

    def test_replace_by_class_and_errors(self):
        m = torch.nn.Sequential(model(), torch.nn.ReLU(), model(384, 384))
        found = ket.replace(m, problem.Model, OP)
        self.assertEqual(len(found), 2)
        with self.assertRaises(ValueError):
            ket.replace(torch.nn.Sequential(torch.nn.ReLU()), problem.Model, OP)

    def test_unverified_shape_falls_back_and_warns_once(self):
        m = Wrapper(model())
        x = torch.randn(3, 512)
        with torch.no_grad():
            expected = m(x)
            ket.replace(m, "inner", OP)
            calls, fallbacks = OP.calls, OP.fallbacks
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                got1, got2 = m(x), m(x)
        self.assertEqual(OP.calls, calls, "the program ran on a shape it was not verified on")
        self.assertEqual(OP.fallbacks, fallbacks + 2)
        said = [str(w.message) for w in caught if "not a workload it was verified on" in str(w.message)]
        self.assertLessEqual(len(said), 1, said)
        self.assertTrue(torch.equal(got1, got2) and close(got1, expected, OP.program))

    def test_wrong_dtype_and_layout_fall_back(self):
        m = model()
        x = torch.randn(128, 512)
        with torch.no_grad():
            expected = m(x)
            w = m.fc.weight
            runs = OP.calls
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                got = OP(x.t().contiguous().t(), w, m.fc.bias)  # a transposed view: not contiguous
                got64 = OP(x.double(), w.double(), m.fc.bias.double())
        self.assertEqual(OP.calls, runs)
        self.assertTrue(close(got, expected, OP.program))
        self.assertEqual(got64.dtype, torch.float64)
        text = " ".join(str(w.message) for w in caught)
        self.assertIn("not contiguous", text)
        self.assertIn("torch.float64", text)

    def test_a_call_that_needs_gradients_goes_to_the_module(self):
        m = Wrapper(model())
        x = torch.randn(128, 512)
        ket.replace(m, "inner", OP)
        runs = OP.calls
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m(x).sum().backward()
        self.assertEqual(OP.calls, runs)
        self.assertIsNotNone(m.inner.fc.weight.grad)
        self.assertGreater(m.inner.fc.weight.grad.abs().sum().item(), 0)

    def test_strict_and_any_shape(self):
        strict = ket.load(LINEAR_DB, name="linear_relu_strict", strict=True)
        anyshape = ket.load(LINEAR_DB, name="linear_relu_any", any_shape=True)
        m = model()
        x = torch.randn(3, 512)
        with torch.no_grad():
            with self.assertRaises(ValueError):
                strict(x, m.fc.weight, m.fc.bias)
            got = anyshape(x, m.fc.weight, m.fc.bias)
            self.assertTrue(close(got, m(x), anyshape.program))
        self.assertEqual(anyshape.calls, 1)

    def test_no_module_to_fall_back_on(self):
        colsum = ket.load(COLSUM_DB)
        with torch.no_grad():
            y = colsum(torch.ones(1024, 1024))
            self.assertTrue(torch.allclose(y, torch.full((1024,), 1024.0)))
            with self.assertRaises(ValueError) as caught:
                colsum(torch.ones(5, 3))
        self.assertIn("any_shape", str(caught.exception))

    def test_meta_tensors_take_the_fake_implementation(self):
        x = torch.empty(51, 301, device="meta")
        w = torch.empty(97, 301, device="meta")
        b = torch.empty(97, device="meta")
        y = OP.op(x, w, b)
        self.assertEqual(y.shape, (51, 97))
        self.assertEqual(y.device.type, "meta")

    @unittest.skipUnless(EXPORTED, "no exported module given")
    def test_exported_module(self):
        found = import_file(EXPORTED, "exported_op")
        m = Wrapper(model())
        x = torch.randn(128, 512)
        with torch.no_grad():
            expected = m(x)
            found.replace(m, "inner")
            calls = found.op.calls
            got = m(x)
        self.assertEqual(found.op.calls, calls + 1)
        self.assertTrue(close(got, expected, found.op.program))


@unittest.skipUnless(ket.HAS_CUSTOM_OP, ket.MISSING or "")
class CustomOpTest(unittest.TestCase):
    def test_opcheck(self):
        m = model()
        x = torch.randn(128, 512)
        torch.library.opcheck(OP.op, (x, m.fc.weight.detach(), m.fc.bias.detach()))

    def test_compile_fullgraph(self):
        m = Wrapper(model())
        x = torch.randn(128, 512)
        with torch.no_grad():
            expected = m(x)
            ket.replace(m, "inner", OP)
            compiled = torch.compile(m, fullgraph=True)
            runs = OP.calls
            got = compiled(x)
        self.assertEqual(OP.calls, runs + 1)
        self.assertTrue(close(got, expected, OP.program))

    def test_export(self):
        m = Wrapper(model())
        x = torch.randn(128, 512)
        ket.replace(m, "inner", OP)
        with torch.no_grad():
            exported = torch.export.export(m, (x,))
        self.assertIn(OP.name, str(exported.graph))
        self.assertTrue(close(exported.module()(x), m(x), OP.program))


if __name__ == "__main__":
    unittest.main()
