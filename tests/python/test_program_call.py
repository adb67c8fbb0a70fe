"""kernelevolve.Program's calls and loads refused by name (issue 49), on the column-sum run's database that
test_program_use.cmake makes (x M x N in, y N out; workloads 1024 x 1024 and 777 x 1531). Needs no PyTorch.

    KE_TEST_COLSUM_DB=... PYTHONPATH=build/python python3 -m unittest tests/python/test_program_call.py
"""
import array
import os
import shutil
import sqlite3
import tempfile
import unittest

import kernelevolve

COLSUM_DB = os.environ["KE_TEST_COLSUM_DB"]


def buffer(count, value=0.0):
    data = array.array("f", [value]) * count
    return data, data.buffer_info()[0]


class ProgramCallTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.program = kernelevolve.Program(COLSUM_DB)

    def setUp(self):
        self.x, self.x_at = buffer(777 * 1531, 1.0)
        self.y, self.y_at = buffer(1531)

    def refused(self, args, *parts, any_shape=False):
        with self.assertRaises(kernelevolve.Error) as caught:
            self.program.call(args, any_shape=any_shape)
        self.assertEqual(caught.exception.status, "invalid argument")
        for part in parts:
            self.assertIn(part, str(caught.exception))
        return str(caught.exception)

    def test_a_right_call_runs(self):
        self.program.call([self.x_at, self.y_at, 777, 1531])
        self.assertAlmostEqual(self.y[0], 777.0, places=2)

    def test_null_data_is_refused_not_a_crash(self):
        self.refused([0, self.y_at, 777, 1531], "'x' is NULL")
        self.refused([self.x_at, 0, 777, 1531], "'y' is NULL")
        self.program.call([self.x_at, self.y_at, 777, 1531])  # the same sizes again, after the refusals
        self.refused([0, self.y_at, 777, 1531], "'x' is NULL")

    def test_an_int_its_dtype_cannot_hold_is_refused_not_wrapped(self):
        self.refused([self.x_at, self.y_at, 2**70, 1531], "'M' is 1180591620717411303424", "i64")
        self.refused([self.x_at, self.y_at, 777, -2**64], "'N'", "does not fit i64")
        self.refused([-1, self.y_at, 777, 1531], "'x'", "no address")
        self.refused([2**64, self.y_at, 777, 1531], "'x'", "no address")
        with self.assertRaises(kernelevolve.Error):
            self.program.verified([self.x_at, self.y_at, 2**70, 1531])

    def test_sizes_are_compared_as_integers(self):
        why = self.refused([self.x_at, self.y_at, 2**63 - 1, 1531], "M = 9223372036854775807")
        self.assertNotIn("-9223372036854775808", why)
        self.refused([self.x_at, self.y_at, 2**63 - 1, 1531], "'x' would hold more than 2^63 bytes", any_shape=True)
        self.refused([self.x_at, self.y_at, -1, 1531], "size 'M' is -1", any_shape=True)

    def test_a_database_edited_after_the_run_is_not_loaded(self):
        folder = tempfile.mkdtemp()
        try:
            best = self.program.provenance["node"]
            for sql, field in (("UPDATE sources SET text = text || ' ' WHERE id = "
                                "(SELECT source_id FROM nodes WHERE seq = ?)", "sources.hash"),
                               ("UPDATE nodes SET tunables = '{\"BLOCK\": 3}' WHERE seq = ?", "nodes.key")):
                path = os.path.join(folder, field + ".db")
                source, db = sqlite3.connect(COLSUM_DB), sqlite3.connect(path)
                source.backup(db)  # what the write-ahead log holds too
                source.close()
                with db:
                    db.execute(sql, (best,))
                db.close()
                with self.assertRaises(kernelevolve.Error) as caught:
                    kernelevolve.Program(path, node=best)
                self.assertEqual(caught.exception.status, "invalid argument")
                self.assertIn(field, str(caught.exception))
                self.assertIn(f"node {best}", str(caught.exception))
        finally:
            shutil.rmtree(folder)


if __name__ == "__main__":
    unittest.main()
