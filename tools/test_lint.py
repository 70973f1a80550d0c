"""pyflakes over tools/*.py (unused imports and names, undefined names), when pyflakes is
importable; skipped otherwise (it is not one of the GPU host's packages).

    python3 -m unittest discover -s tools -p 'test_*.py'
"""

import io
import pathlib
import unittest

HERE = pathlib.Path(__file__).resolve().parent

try:
    from pyflakes import api as pyflakes_api
    from pyflakes import reporter as pyflakes_reporter
except ImportError:  # pragma: no cover - depends on the machine
    pyflakes_api = None


@unittest.skipIf(pyflakes_api is None, "pyflakes is not installed")
class Pyflakes(unittest.TestCase):
    def test_tools_have_no_pyflakes_warnings(self):
        out, err = io.StringIO(), io.StringIO()
        report = pyflakes_reporter.Reporter(out, err)
        warnings = sum(pyflakes_api.checkPath(str(p), report) for p in sorted(HERE.glob("*.py")))
        self.assertEqual(warnings, 0, out.getvalue() + err.getvalue())


if __name__ == "__main__":
    unittest.main()
