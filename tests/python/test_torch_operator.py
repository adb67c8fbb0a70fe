"""The PyTorch operator of a stored program (issue 29), on real runs' databases that test_program_use.cmake makes:
the linear_relu problem (relu(nn.Linear(x)), a PyTorch module with weights) and the column-sum spec (no module).

    KE_TEST_LINEAR_DB=... KE_TEST_LINEAR_MODEL=.../model.py KE_TEST_COLSUM_DB=... KE_TEST_EXPORTED=op.py \
        [KE_TEST_RMS_MODEL=rms_norm.py KE_TEST_RMS_FWD_DB=... KE_TEST_RMS_BWD_DB=...] \
        PYTHONPATH=build/python python3 -m unittest tests/python/test_torch_operator.py

With the RMSNorm runs (its forward, and its backward: --backward), a model with the operator in place trains, and
its loss curve matches eager's.

Runs on the CPU (the runs are CPU runs) under any PyTorch: 1.13 registers through torch.library.Library, 2.4 and
later adds register_fake (and register_autograd), where opcheck, torch.compile(fullgraph=True) and torch.export are
checked.
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


def linear_relu(x, w, b):
    """OP's region as the model's own code: what a guard falls back to, or runs under compile when it steps aside."""
    return torch.relu(torch.nn.functional.linear(x, w, b))


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

    def test_wrong_dtype_falls_back_and_a_strided_input_is_copied(self):
        m = model()
        x = torch.randn(128, 512)
        with torch.no_grad():
            expected = m(x)
            w = m.fc.weight
            runs, fallbacks = OP.calls, OP.fallbacks
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                strided = x.t().contiguous().t()  # a transposed view, as a model's attention gives: not contiguous
                self.assertFalse(strided.is_contiguous())
                self.assertIsNone(OP.why_not(strided, w, m.fc.bias))
                got = OP(strided, w, m.fc.bias)
                got64 = OP(x.double(), w.double(), m.fc.bias.double())
        self.assertEqual(OP.calls, runs + 1, "the program ran on the strided input, copied contiguous")
        self.assertEqual(OP.fallbacks, fallbacks + 1)
        self.assertTrue(close(got, expected, OP.program))
        self.assertEqual(got64.dtype, torch.float64)
        text = " ".join(str(w.message) for w in caught)
        self.assertNotIn("not contiguous", text)
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

    def test_a_guard_says_why_it_fell_back(self):
        # What kernelevolve optimize's report says of a place whose operator was not launched.
        inner = model()

        guard = ket.Guarded(OP, linear_relu)
        with torch.no_grad():
            verified = torch.randn(128, 512)
            self.assertTrue(close(guard(verified, inner.fc.weight, inner.fc.bias), inner(verified), OP.program))
            self.assertEqual((guard.calls, guard.fallbacks, guard.why_fallback), (1, 0, None))
            other = torch.randn(3, 512)  # a batch it was not verified at
            self.assertTrue(close(guard(other, inner.fc.weight, inner.fc.bias), inner(other), OP.program))
        self.assertEqual((guard.calls, guard.fallbacks), (1, 1))
        self.assertIn("not a workload it was verified on", guard.why_fallback)

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

    def test_loaded_again_on_its_device_by_another_name(self):
        # The optimizer loads a winner on "cuda:0", the optimized model on "cuda" (a Program's device 0): one
        # operator, not an error. No CUDA is needed to compare the spellings; the CPU has one.
        self.assertEqual(ket._device_key("cuda"), ket._device_key("cuda:0"))
        self.assertNotEqual(ket._device_key("cuda"), ket._device_key("cuda:1"))
        self.assertIs(ket.load(LINEAR_DB, device="cpu"), OP)
        with self.assertRaises(kernelevolve.Error) as caught:
            ket.load(LINEAR_DB, device="cpu", strict=True)
        self.assertIn("registered already", str(caught.exception))

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


RMS_MODEL = os.environ.get("KE_TEST_RMS_MODEL")
RMS_FWD_DB = os.environ.get("KE_TEST_RMS_FWD_DB")
RMS_BWD_DB = os.environ.get("KE_TEST_RMS_BWD_DB")
# torch.compile of a model that trains through the operator: PyTorch 2.4 and later (register_autograd).
COMPILES = ket.HAS_CUSTOM_OP and hasattr(torch, "compile")


@unittest.skipUnless(RMS_MODEL and RMS_FWD_DB and RMS_BWD_DB,
                     "KE_TEST_RMS_MODEL, KE_TEST_RMS_FWD_DB and KE_TEST_RMS_BWD_DB name no RMSNorm runs")
class TrainingTest(unittest.TestCase):
    """RMSNorm's forward and backward programs (two CPU runs of tests/test_program_use.cmake) as one operator, in
    a model that trains."""

    @classmethod
    def setUpClass(cls):
        cls.rms = import_file(RMS_MODEL, "rms_norm_problem")
        cls.op = ket.load(RMS_FWD_DB, backward=RMS_BWD_DB)

    def net(self):
        rms = self.rms

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = torch.nn.Linear(rms.hidden, rms.hidden)
                self.norm = rms.Model(rms.hidden)

            def forward(self, x):
                return self.norm(self.proj(x))

        torch.manual_seed(1)
        return Net()

    def train(self, net, x, target, steps=4):
        optimizer = torch.optim.SGD(net.parameters(), lr=0.5)
        losses = []
        for _ in range(steps):
            optimizer.zero_grad()
            loss = ((net(x) - target) ** 2).mean()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        return losses

    def test_a_model_trains_with_the_backward_program(self):
        op, rms = self.op, self.rms
        x = torch.randn(rms.batch_size, rms.seq_len, rms.hidden)
        target = torch.randn_like(x)
        eager, replaced = self.net(), self.net()
        ket.replace(replaced, "norm", op)
        calls, backward_calls, fallbacks = op.calls, op.backward_calls, op.fallbacks
        expected = self.train(eager, x, target)
        got = self.train(replaced, x, target)
        # Engagement: each step ran the forward and the backward programs, and nothing fell back.
        self.assertEqual(op.calls - calls, 4)
        self.assertEqual(op.backward_calls - backward_calls, 4)
        self.assertEqual(op.fallbacks, fallbacks)
        # Parity: the loss curve, and the weights it trained, match eager's within the programs' tolerance.
        self.assertLess(got[-1], got[0])
        for a, b in zip(got, expected):
            self.assertAlmostEqual(a, b, delta=1e-4 * abs(b) + 1e-5)
        self.assertTrue(torch.allclose(replaced.norm.weight, eager.norm.weight, atol=1e-4, rtol=1e-4))
        self.assertTrue(torch.allclose(replaced.proj.weight, eager.proj.weight, atol=1e-4, rtol=1e-4))

    def test_a_shape_it_was_not_verified_on_differentiates_the_module(self):
        op, rms = self.op, self.rms
        x = torch.randn(2, 5, rms.hidden)
        target = torch.randn_like(x)
        eager, replaced = self.net(), self.net()
        ket.replace(replaced, "norm", op)
        backward_calls, fallbacks = op.backward_calls, op.fallbacks
        expected = self.train(eager, x, target, steps=2)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = self.train(replaced, x, target, steps=2)
        self.assertEqual(op.backward_calls, backward_calls)
        self.assertEqual(op.fallbacks - fallbacks, 4)  # each step's forward and backward
        self.assertTrue(any("differentiating the problem's own module" in str(w.message) for w in caught))
        for a, b in zip(got, expected):
            self.assertAlmostEqual(a, b, delta=1e-5 * abs(b) + 1e-6)

    @unittest.skipUnless(COMPILES, ket.MISSING or "this PyTorch has no torch.compile")
    def test_a_compiled_model_runs_the_backward_program_at_every_step(self):
        # Issue 49: under torch.compile the backward graph is traced once (the autograd formula on fake tensors)
        # and then calls the backward operator at each step; a count kept in the formula said only the first.
        op, rms = self.op, self.rms
        torch._dynamo.reset()
        x = torch.randn(rms.batch_size, rms.seq_len, rms.hidden)
        target = torch.randn_like(x)
        eager, replaced = self.net(), self.net()
        ket.replace(replaced, "norm", op)
        compiled = torch.compile(replaced)
        fallbacks = op.fallbacks
        expected = self.train(eager, x, target, steps=3)
        optimizer = torch.optim.SGD(replaced.parameters(), lr=0.5)
        for step, want in enumerate(expected):
            calls, backward_calls = op.calls, op.backward_calls
            optimizer.zero_grad()
            loss = ((compiled(x) - target) ** 2).mean()
            loss.backward()
            # Each step ran the forward program once and the backward program once, at the step itself.
            self.assertEqual((op.calls - calls, op.backward_calls - backward_calls), (1, 1), f"step {step}")
            # The gradients are this step's: the weights they trained stay with eager's.
            self.assertAlmostEqual(loss.item(), want, delta=1e-4 * abs(want) + 1e-5, msg=f"step {step}")
            optimizer.step()
        self.assertEqual(op.fallbacks, fallbacks)
        self.assertTrue(torch.allclose(replaced.norm.weight, eager.norm.weight, atol=1e-4, rtol=1e-4))
        self.assertTrue(torch.allclose(replaced.proj.weight, eager.proj.weight, atol=1e-4, rtol=1e-4))

    @unittest.skipUnless(COMPILES, ket.MISSING or "this PyTorch has no torch.compile")
    def test_a_compiled_model_at_a_shape_it_was_not_verified_on_differentiates_the_module(self):
        # The compiled backward graph calls the backward operator itself, whose kernel, where the program cannot
        # take the call, differentiates the problem's module as the eager formula does (it raised before).
        op, rms = self.op, self.rms
        torch._dynamo.reset()
        x = torch.randn(3, 5, rms.hidden)  # not the eager test's shape: each reason is warned once, and that test asks
        target = torch.randn_like(x)
        eager, replaced = self.net(), self.net()
        ket.replace(replaced, "norm", op)
        backward_calls, fallbacks = op.backward_calls, op.fallbacks
        expected = self.train(eager, x, target, steps=2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = self.train(torch.compile(replaced, dynamic=False), x, target, steps=2)
        self.assertEqual(op.backward_calls, backward_calls)
        self.assertEqual(op.fallbacks - fallbacks, 4)  # each step's forward and backward
        for a, b in zip(got, expected):
            self.assertAlmostEqual(a, b, delta=1e-5 * abs(b) + 1e-6)
        self.assertTrue(torch.allclose(replaced.norm.weight, eager.norm.weight, atol=1e-5, rtol=1e-5))

    def test_what_is_not_its_backward_is_refused(self):
        with self.assertRaisesRegex(kernelevolve.Error, "is not a backward problem"):
            ket.load(RMS_FWD_DB, name="rms_twice", backward=RMS_FWD_DB)
        with self.assertRaisesRegex(kernelevolve.Error, "is not a backward problem"):
            ket.load(LINEAR_DB, name="linear_with_a_backward", backward=LINEAR_DB)
        with self.assertRaisesRegex(kernelevolve.Error, "has a backward already"):
            ket.load(RMS_FWD_DB, backward=RMS_BWD_DB)

    def test_a_backward_program_alone_never_falls_back_on_the_forward_module(self):
        rms = self.rms
        alone = ket.load(RMS_BWD_DB, name="rms_backward_alone")
        x = torch.randn(rms.batch_size, rms.seq_len, rms.hidden)
        weight = torch.rand(rms.hidden) + 0.5
        grad_x, grad_weight = alone(x, weight, torch.randn_like(x))  # a verified shape: the program
        self.assertEqual((grad_x.shape, grad_weight.shape), (x.shape, weight.shape))
        small = torch.randn(2, 5, rms.hidden)
        with self.assertRaisesRegex(ValueError, "backward problem's, whose module computes the forward"):
            alone(small, weight, torch.randn_like(small))
        self.assertEqual(alone.fallbacks, 0)

    @unittest.skipUnless(ket.HAS_CUSTOM_OP, ket.MISSING or "")
    def test_opcheck_with_gradients(self):
        rms = self.rms
        x = torch.randn(rms.batch_size, rms.seq_len, rms.hidden, requires_grad=True)
        weight = (torch.rand(rms.hidden) + 0.5).requires_grad_()
        torch.library.opcheck(self.op.op, (x, weight))


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

    def test_a_guard_under_compile(self):
        # One graph, compiled once: the guard's Python (its counts, its cache) stays out of the trace, which made
        # Dynamo compile it again on the second and third calls. compiled="original": the region's own code instead.
        inner = model()

        class Placed(torch.nn.Module):
            def __init__(self, compiled):
                super().__init__()
                self.guard = ket.Guarded(OP, linear_relu, compiled=compiled)

            def forward(self, x):
                return self.guard(x, inner.fc.weight, inner.fc.bias) * 2

        x = torch.randn(128, 512)
        with torch.no_grad():
            expected = inner(x) * 2
            for compiled, launches in (("operator", 4), ("original", 0)):
                graphs = []

                def backend(gm, example_inputs):
                    graphs.append(gm)
                    return gm.forward

                torch._dynamo.reset()
                placed = torch.compile(Placed(compiled), backend=backend, fullgraph=True)
                runs = OP.calls
                for _ in range(4):
                    self.assertTrue(close(placed(x), expected, OP.program), compiled)
                self.assertEqual(len(graphs), 1, f"{compiled}: compiled {len(graphs)} times")
                self.assertEqual(OP.calls - runs, launches, compiled)
                self.assertEqual(OP.name in str(graphs[0].graph), compiled == "operator", str(graphs[0].graph))
        with self.assertRaises(ValueError):
            ket.Guarded(OP, linear_relu, compiled="sometimes")

    def test_a_guard_under_compile_in_training(self):
        # The operator has no backward program: a call autograd records runs the problem's module, compiled, and
        # the gradients are eager's.
        inner = model()

        guard = ket.Guarded(OP, linear_relu)
        x = torch.randn(128, 512)
        torch._dynamo.reset()
        loss = torch.compile(lambda x: guard(x, inner.fc.weight, inner.fc.bias).square().sum())(x)
        loss.backward()
        got = inner.fc.weight.grad.clone()
        inner.fc.weight.grad = None
        inner(x).square().sum().backward()
        self.assertTrue(torch.allclose(got, inner.fc.weight.grad, rtol=1e-4, atol=1e-4))

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
