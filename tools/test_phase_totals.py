"""CPU tests of tools/phase_totals.py on hand-made records."""
import unittest

from phase_totals import totals


class PhaseTotals(unittest.TestCase):
    def test_units_are_problem_and_shape_and_phases_add_up(self):
        records = [
            {"problem": "p", "phases": {"generate": 2.0, "time": 1.0}},
            {"problem": "p", "shape": "default", "phases": {"time": 0.5}},
            {"problem": "p", "shape": "d64", "phases": {"oracle": 3.0}},
            {"problem": "q", "phases": None},
        ]
        units, every = totals(records)
        self.assertEqual(list(units), ["p@default", "p@d64", "q@default"])
        self.assertEqual(units["p@default"], {"generate": 2.0, "time": 1.5})
        self.assertEqual(every["oracle"], 3.0)
        self.assertAlmostEqual(sum(every.values()), 6.5)


if __name__ == "__main__":
    unittest.main()
