"""CPU tests of tools/tuned_table.py on hand-made records."""
import unittest

from tuned_table import markdown, rows


def record(problem, candidate, group, ms=None, floor=None, speedup=None, eager=None, status="correct"):
    r = {"problem": problem, "candidate": candidate, "group": group, "status": status,
         "timing": {"median_ms": ms, "floor_fraction": floor}, "speedup": speedup}
    if eager is not None:
        r["pytorch"] = {"median_ms": eager}
    return r


class TunedTable(unittest.TestCase):
    def test_rows_take_the_groups_records_with_eager_from_the_reference(self):
        records = [
            record("p", "reference", "reference", ms=2.0, eager=3.0),
            record("p", "ex", "examples", ms=1.0),
            record("p", "rust", "tuned", ms=0.5, floor=0.25,
                   speedup={"median": 4.1, "ci_low": 4.0, "ci_high": 4.2}),
            record("q", "reference", "reference", ms=1.0),
            record("q", "rust_q", "tuned", status="incorrect"),
        ]
        table = rows(records)
        self.assertEqual([t[1] for t in table], ["rust", "rust_q"])
        p = table[0]
        self.assertEqual(p[3], 0.5)
        self.assertAlmostEqual(p[4], 25.0)
        self.assertEqual((p[5], p[6], p[7]), (4.1, 4.0, 4.2))
        self.assertAlmostEqual(p[8], 6.0)
        self.assertEqual(table[1][3:], (None,) * 6)

    def test_markdown_prints_dashes_for_missing_figures(self):
        text = markdown(rows([record("q", "rust_q", "tuned", status="timeout")]))
        self.assertIn("| q | rust_q | timeout | - | - | - | - |", text)


if __name__ == "__main__":
    unittest.main()
