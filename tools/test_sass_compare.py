"""CPU tests of tools/sass_compare.py's reading of `cuobjdump -sass` (no CUDA needed)."""
import unittest

from sass_compare import loops, parse_sass

SASS = """
        code for sm_90
                Function : k_one
        .headerflags    @"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90"
        /*0000*/                   LDC R1, c[0x0][0x28] ;            /* 0x00000a00ff017b82 */
        /*0010*/                   LDG.E.64.CONSTANT R2, desc[UR6][R4.64] ;  /* 0x0 */
        /*0020*/                   LDG.E.64.CONSTANT R6, desc[UR6][R8.64] ;  /* 0x0 */
        /*0030*/                   FADD R10, R10, R2 ;               /* 0x0 */
        /*0040*/              @!P3 BRA 0x10 ;                        /* 0x0 */
        /*0050*/                   BRA 0x0 ;                         /* 0x0 */
        /*0060*/                   NOP;                              /* 0x0 */
                Function : k_two
        /*0000*/               @P0 EXIT ;                            /* 0x0 */
"""


class SassReading(unittest.TestCase):
    def test_kernels_instructions_and_predicates_are_read(self):
        kernels = parse_sass(SASS)
        self.assertEqual(list(kernels), ["k_one", "k_two"])
        self.assertEqual(len(kernels["k_one"]), 7)
        addr, pred, op, mods, rest = kernels["k_one"][1]
        self.assertEqual((addr, pred, op, mods), (0x10, "", "LDG", ".E.64.CONSTANT"))
        self.assertEqual(kernels["k_two"][0][1:3], ("@P0", "EXIT"))

    def test_a_loop_is_a_conditional_backward_branch_with_its_loads_counted(self):
        # The unconditional `BRA 0x0` is a divergent path's return, not a loop.
        self.assertEqual(loops(parse_sass(SASS)["k_one"]), [(0x10, 0x40, 4, 2)])


if __name__ == "__main__":
    unittest.main()
