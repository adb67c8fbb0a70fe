"""`kernelevolve optimize`'s step 4 over several devices and over MPI ranks (issue 30's scale), on the CPU.

tests/fixtures/optimize/chain.py has three distinct regions; the test's command mutator (kernel_writer.py) writes a
C kernel for each. The same model is optimized three times, each into its own folder: regions one after another (one
device); `--devices cpu,cpu` (two regions at once, each run on the CPU); `mpirun -n 2 ... --mpi` (each rank evolves
the regions it claims first, rank 0 puts back and proves). Each must evolve every kept region exactly once (one run
per region in the database, none lost, none doubled), reach the same winners as the sequential run, and the parallel
ones must have run regions at once (their runs' clock times overlap), MPI's on both ranks. A second MPI optimize in
the same folder resumes every region from the database. On a CPU the runs share its cores: this tests the wiring, not
the speedup (bench/optimize_devices.sh measures that on GPUs). Run by ctest (tests/test_optimize_parallel.cmake):
    KE_CLI=build/kernelevolve KE_WORK=/tmp/w [KE_MPIRUN=mpirun] python3 tests/python/test_optimize_parallel.py
"""

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import unittest

CLI = os.environ["KE_CLI"]
WORK = os.environ["KE_WORK"]
MPIRUN = os.environ.get("KE_MPIRUN", "")  # empty: this build or machine has no MPI (the MPI tests skip, saying so)
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "optimize")
CHAIN = os.path.join(FIXTURES, "chain.py")
WRITER = os.path.join(FIXTURES, "kernel_writer.py")
# One evaluation per region (the writer's kernel), every region kept, little timing: the wiring is what is tested.
OPTIONS = ["--budget", "0.3", "--min-share", "0", "--max-evals", "1", "--mutator", "command",
           "--command", f"{sys.executable} {WRITER}", "--json"]


def optimize(out, *extra, mpi=0):
    command = [CLI, "optimize", CHAIN, "--out", out, *OPTIONS, *extra]
    env = None
    if mpi:
        command = [MPIRUN, "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", str(mpi)] + command + ["--mpi"]
        # Under AddressSanitizer (CI's sanitize stage), as test_mpi there: Open MPI never frees what MPI_Init
        # allocates, leaks no suppression can name; memory errors are still caught.
        env = dict(os.environ, ASAN_OPTIONS=":".join(filter(None, [os.environ.get("ASAN_OPTIONS"), "detect_leaks=0"])))
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(command)} failed ({done.returncode}): {done.stderr[-3000:]}")
    return json.loads(done.stdout), done.stderr


def runs(report):
    """Each region's runs in the optimize's database: {region hash: [run ids]}."""
    with sqlite3.connect(report["database"]) as db:
        rows = db.execute("SELECT spec_name, id FROM runs").fetchall()
    out = {}
    for name, run in rows:
        out.setdefault(name[len("region_"):], []).append(run)
    return out


def overlapping(report):
    """Whether two of its regions' runs were under way at once, by their clock times."""
    spans = sorted((r["evolve"]["started_at"], r["evolve"]["finished_at"]) for r in report["regions"]
                   if r["evolve"] and "started_at" in r["evolve"])
    return any(b[0] < a[1] for a, b in zip(spans, spans[1:]))


class Parallel:
    """Checks shared by the ways of running step 4, against the sequential run (SequentialTest's)."""

    sequential = None

    @classmethod
    def baseline(cls):
        if Parallel.sequential is None:
            out = os.path.join(WORK, "sequential")
            shutil.rmtree(out, ignore_errors=True)
            Parallel.sequential, _ = optimize(out)
        return Parallel.sequential

    def check_same_result(self, report):
        sequential = self.baseline()
        self.assertEqual(len(report["regions"]), 3)
        self.assertEqual(sorted(r["hash"] for r in report["regions"]), sorted(r["hash"] for r in sequential["regions"]))
        for r in report["regions"]:
            self.assertTrue(r["kept"], r)
            self.assertEqual(r["evolve"]["status"], "evolved", r["evolve"])
        # Every region once in the database: none lost, none evolved twice.
        self.assertEqual({h: len(ids) for h, ids in runs(report).items()}, {r["hash"]: 1 for r in report["regions"]})
        # The same winners, each the same kernel (the writer's: node 0 of one evaluation).
        before = {r["hash"]: r["evolve"]["node"] for r in sequential["regions"]}
        self.assertEqual({r["hash"]: r["evolve"]["node"] for r in report["regions"]}, before)
        # Whether a winner is put back is a timing verdict, and regions evolved at once on one CPU share its cores:
        # the same kernel can beat its region's PyTorch code in one run and not in the other (CI saw it flip under
        # load). What the wiring owes is a verdict that follows each run's own measurements, with its reason.
        for r in report["regions"]:
            e = r["evolve"]
            if r["put_back"]:
                self.assertGreater(e["speedup_vs_eager"], 1, r)
                for mark in ("speedup_vs_compile", "speedup_vs_best_baseline"):
                    if e.get(mark) is not None:
                        self.assertGreater(e[mark], 1, (mark, r))
            else:
                self.assertTrue(r["put_back_reason"], r)
        if report["put_back"]["regions"]:
            self.assertTrue(report["put_back"]["parity"]["ok"], report["put_back"]["parity"])
            self.assertTrue(report["put_back"]["engaged"])
        leftovers = [n for n in os.listdir(report["out_dir"]) if n.endswith(".claim.json")]
        self.assertEqual(leftovers, [])


class SequentialTest(Parallel, unittest.TestCase):
    def test_one_region_at_a_time(self):
        report = self.baseline()
        self.check_same_result(report)
        self.assertFalse(overlapping(report))
        self.assertEqual({r["evolve"]["device"] for r in report["regions"]}, {"cpu"})


class DevicesTest(Parallel, unittest.TestCase):
    """--devices cpu,cpu: two regions at once, each its own `kernelevolve run` on the CPU."""

    def test_regions_at_once_into_one_database(self):
        out = os.path.join(WORK, "devices")
        shutil.rmtree(out, ignore_errors=True)
        report, _ = optimize(out, "--devices", "cpu,cpu")
        self.check_same_result(report)
        self.assertTrue(overlapping(report), [r["evolve"] for r in report["regions"]])

    def test_a_device_list_it_cannot_take(self):
        done = subprocess.run([CLI, "optimize", CHAIN, "--out", os.path.join(WORK, "bad_devices"), "--devices",
                               "cpu,tpu:0"], capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn("--devices is a comma-separated list of cpu, cuda, cuda:N or cuda:all", done.stderr)
        self.assertIn("'tpu:0'", done.stderr)  # the item it refuses


@unittest.skipUnless(MPIRUN, "no mpirun, or this kernelevolve is built without MPI (KE_WITH_MPI)")
class MpiTest(Parallel, unittest.TestCase):
    """mpirun -n 2: rank 0 profiles, cuts and ranks; both ranks evolve the regions they claim; rank 0 puts back."""

    @classmethod
    def setUpClass(cls):
        cls.out = os.path.join(WORK, "mpi")
        shutil.rmtree(cls.out, ignore_errors=True)
        cls.report, cls.stderr = optimize(cls.out, mpi=2)

    def test_each_region_once_on_the_ranks(self):
        self.check_same_result(self.report)
        ranks = {r["evolve"]["rank"] for r in self.report["regions"]}
        self.assertEqual(ranks, {0, 1}, [r["evolve"] for r in self.report["regions"]])
        self.assertTrue(overlapping(self.report))
        ones = sum(1 for r in self.report["regions"] if r["evolve"]["rank"] == 1)
        self.assertIn(f"rank 1: evolved {ones} region(s)", self.stderr)
        self.assertGreater(self.report["steps_s"]["evolve"], 0)

    def test_a_second_optimize_resumes(self):
        again, _ = optimize(self.out, mpi=2)
        for r in again["regions"]:
            self.assertEqual(r["evolve"]["status"], "resumed", r["evolve"])
        self.assertEqual({h: len(ids) for h, ids in runs(again).items()}, {r["hash"]: 1 for r in again["regions"]})


if __name__ == "__main__":
    os.makedirs(WORK, exist_ok=True)
    unittest.main(argv=sys.argv, verbosity=2)
