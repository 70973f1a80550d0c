"""CPU tests of tools/triton_compile.py's import of Triton, with fake `triton` modules: a Triton
without `triton.backends.compiler.GPUTarget` (older than 3.0) or none at all is "not installed"
(the candidate is skipped), never a compile error.

    python3 -m unittest discover -s tools -p 'test_*.py'
"""

import os
import sys
import types
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import triton_compile as tc  # noqa: E402


def fake_triton(with_backends=True):
    """sys.modules entries of a fake Triton (3.x layout when `with_backends`)."""
    triton = types.ModuleType("triton")
    triton.compiler = types.ModuleType("triton.compiler")
    mods = {"triton": triton, "triton.compiler": triton.compiler}
    if with_backends:
        triton.backends = types.ModuleType("triton.backends")
        compiler = types.ModuleType("triton.backends.compiler")

        class GPUTarget:
            pass

        compiler.GPUTarget = GPUTarget
        triton.backends.compiler = compiler
        mods.update({"triton.backends": triton.backends, "triton.backends.compiler": compiler})
    else:
        mods.update({"triton.backends": None, "triton.backends.compiler": None})
    return mods


class ImportTriton(unittest.TestCase):
    def test_a_triton_3_gives_the_module_and_its_gpu_target(self):
        mods = fake_triton()
        with mock.patch.dict(sys.modules, mods):
            triton, target = tc.import_triton()
        self.assertIs(triton, mods["triton"])
        self.assertIs(target, mods["triton.backends.compiler"].GPUTarget)

    def test_no_triton_or_one_without_gpu_target_is_not_installed(self):
        for mods in ({"triton": None}, fake_triton(with_backends=False)):
            with mock.patch.dict(sys.modules, mods):
                with self.assertRaises(tc.NoTriton) as e:
                    tc.import_triton()
            self.assertTrue(str(e.exception).startswith(tc.NO_TRITON), str(e.exception))


if __name__ == "__main__":
    unittest.main()
