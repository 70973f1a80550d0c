"""CPU tests of tools/phase_totals.py on hand-made records."""
import unittest

from phase_totals import answer_rows, totals


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

    def test_an_answers_row_puts_each_protocols_phases_in_its_columns(self):
        records = [
            {"problem": "p", "candidate": "reference", "status": "correct",
             "phases": {"time": 1.0}},
            {"problem": "p", "group": "g", "status": "correct", "kernelbench": {"passed": True},
             "phases": {"answer_build": 9.0, "answer_ours": 1.0, "answer_ours_check": 0.25,
                        "answer_ours_time": 0.5, "answer_kernel_bench": 0.75,
                        "answer_kernel_bench_check": 0.125, "answer_kernel_bench_time": 0.375,
                        "evaluator_start": 4.0}},
        ]
        (row,) = answer_rows(records)
        self.assertEqual(row[:3], ("p", "g", "correct"))
        self.assertEqual(row[3], [9.0, 1.0, 0.25, 0.5, 0.75, 0.125, 0.375])
        self.assertEqual(row[4], 3.0)


if __name__ == "__main__":
    unittest.main()
