"""The throughput set (candidates/kernelbench-throughput/) is tools/inline_set.py's output, and
every answer parses, defines ModelNew and builds its own extension."""
import pathlib
import re
import unittest

import inline_set


class InlineSetTest(unittest.TestCase):
    def test_the_committed_files_are_the_scripts_output(self):
        problems = [p.stem[3:] for p in sorted(
            (inline_set.ROOT / "bench-problems/kernelbench").glob("[0-9][0-9]_*.py"))]
        names = set()
        count = 0
        for variant in range(inline_set.VARIANTS):
            for number, problem in enumerate(problems, start=1):
                path = inline_set.OUT / f"inline-v{variant}" / f"{number:02}_{problem}.py"
                want = inline_set.answer(number, problem, variant)
                self.assertEqual(path.read_text(), want, f"{path}: run tools/inline_set.py")
                compile(want, str(path), "exec")
                self.assertIn("class ModelNew(nn.Module):", want)
                self.assertNotRegex(want, r"(?m)^class Model\(")
                names.add(re.search(r'name="(dlrm_throughput_\w+)"', want).group(1))
                count += 1
        self.assertGreaterEqual(count, 60)
        self.assertEqual(len(names), count, "every answer is its own extension")


if __name__ == "__main__":
    unittest.main()
