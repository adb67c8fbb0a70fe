"""The Triton compile helper's signature (src/triton/compile_helper.py): what it tells Triton of a request's
arguments, pointers and the integers a caller vouches are multiples of 16 (tt.divisibility=16, as Triton's
launcher marks them). Standard library only, no Triton or GPU: run with PYTHONPATH=src/triton (ctest does).
"""

import unittest

from compile_helper import signature_of

DIV16 = [["tt.divisibility", 16]]

# The bf16 matmul seed's entry: three pointers, the sizes, then its tunables.
MATMUL = ["a", "b", "c", "M", "N", "K", "BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M"]
PARAMS = ["*bf16", "*bf16", "*bf16", "i64", "i64", "i64"]
CONSTEXPRS = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}


def request(**extra):
    return dict({"entry": "matmul", "params": PARAMS, "constexprs": CONSTEXPRS}, **extra)


class SignatureTest(unittest.TestCase):
    def test_pointers_only_without_divisible(self):
        signature, constexprs, attrs = signature_of(MATMUL, request())
        self.assertEqual(signature["a"], "*bf16")
        self.assertEqual(signature["K"], "i64")
        self.assertEqual(signature["BLOCK_M"], "constexpr")
        self.assertEqual(constexprs, CONSTEXPRS)
        self.assertEqual(attrs, {(0,): DIV16, (1,): DIV16, (2,): DIV16})

    def test_divisible_ints_are_marked_and_the_others_are_not(self):
        _, _, attrs = signature_of(MATMUL, request(divisible=[5]))
        self.assertEqual(attrs, {(0,): DIV16, (1,): DIV16, (2,): DIV16, (5,): DIV16})
        _, _, attrs = signature_of(MATMUL, request(divisible=[3, 4, 5]))
        self.assertEqual(sorted(attrs), [(0,), (1,), (2,), (3,), (4,), (5,)])
        self.assertTrue(all(value == DIV16 for value in attrs.values()))
        _, _, attrs = signature_of(MATMUL, request(divisible=[]))
        self.assertNotIn((3,), attrs)

    def test_indices_are_the_params_not_the_entrys_arguments(self):
        # A constexpr before the sizes: param 3 (M) is the entry's argument 4.
        names = ["a", "b", "c", "BLOCK_M", "M", "N", "K"]
        _, _, attrs = signature_of(names, request(divisible=[3], constexprs={"BLOCK_M": 64}))
        self.assertIn((4,), attrs)
        self.assertNotIn((3,), attrs)

    def test_i32_params_may_be_marked(self):
        _, _, attrs = signature_of(["x", "n"], {"entry": "f", "params": ["*fp32", "i32"], "divisible": [1]})
        self.assertEqual(attrs, {(0,): DIV16, (1,): DIV16})

    def test_a_pointer_float_or_missing_param_is_refused(self):
        for bad in ([0], [6], [-1], ["3"], [True]):
            with self.assertRaises(ValueError, msg=str(bad)):
                signature_of(MATMUL, request(divisible=bad))
        with self.assertRaisesRegex(ValueError, "not an integer"):
            signature_of(["x", "alpha"], {"entry": "f", "params": ["*fp32", "fp32"], "divisible": [1]})

    def test_a_wrong_argument_count_is_still_the_candidates_error(self):
        with self.assertRaisesRegex(TypeError, "the spec passes 6"):
            signature_of(MATMUL[:5] + MATMUL[6:], request(divisible=[5]))


if __name__ == "__main__":
    unittest.main()
