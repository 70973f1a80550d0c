"""CPU tests of tools/tuned_table.py on hand-made records."""
import unittest

from tuned_table import best_markdown, best_rows, markdown, rows, shape_markdown, shape_rows


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

    def test_best_rows_take_the_fastest_correct_candidate_and_bold_parity_outside_ten_percent(self):
        ref = record("p", "reference", "reference", ms=2.0, eager=1.5)
        ref["pytorch_compile"] = {"median_ms": 1.0}
        records = [
            ref,
            record("p", "fast_but_wrong", "examples", ms=0.1, status="incorrect"),
            record("p", "slow", "examples", ms=1.0, floor=0.1),
            record("p", "fast", "tuned", ms=0.5, floor=0.4,
                   speedup={"median": 4.0, "ci_low": 3.9, "ci_high": 4.1}),
            record("q", "reference", "reference", ms=1.0, eager=1.05),
        ]
        table = best_rows(records)
        self.assertEqual(table[0][:5], ("p", 2.0, 1.5, 1.0, "tuned/fast"))
        self.assertEqual(table[1][4:], (None,) * 6)
        text = best_markdown(table).splitlines()
        self.assertIn("| 1 | p | 2.000 | 1.500 | **1.33** | 1.000 | tuned/fast | 0.500 | "
                      "4.00 [3.90, 4.10] | 3.00 | 2.00 | 40.0 |", text)
        self.assertIn("| 2 | q | 1.000 | 1.050 | 0.95 | - | - | - | - | - | - | - |", text)

    def test_best_and_group_rows_read_the_default_shape_only(self):
        ref = record("p", "reference", "reference", ms=2.0, eager=1.5)
        other_ref = dict(record("p", "reference", "reference", ms=0.2, eager=0.1), shape="b4")
        small = dict(record("p", "fast", "tuned", ms=0.05), shape="b4")
        records = [ref, record("p", "fast", "tuned", ms=1.0), other_ref, small]
        self.assertEqual(best_rows(records)[0][:6], ("p", 2.0, 1.5, None, "tuned/fast", 1.0))
        table = rows(records)
        self.assertEqual([(t[1], t[3]) for t in table], [("fast", 1.0)])
        self.assertAlmostEqual(table[0][8], 1.5)


def shaped(problem, candidate, group, shape, speedup, status="correct", floor=0.5):
    r = record(problem, candidate, group, ms=1.0, floor=floor,
               speedup={"median": speedup, "ci_low": speedup * 0.9, "ci_high": speedup * 1.1},
               status=status)
    r["shape"] = shape
    return r


class ShapeTable(unittest.TestCase):
    def test_the_best_is_by_geomean_over_every_shape_and_a_rank_change_is_named(self):
        records = [
            shaped("p", "reference", "reference", "default", 1.0),
            shaped("p", "reference", "reference", "d32", 1.0),
            # Fast at the default shape only.
            shaped("p", "spec", "tuned", "default", 8.0),
            shaped("p", "spec", "tuned", "d32", 0.5),
            # Steady: geomean 3 beats spec's 2.
            shaped("p", "steady", "examples", "default", 3.0),
            shaped("p", "steady", "examples", "d32", 3.0),
            # Faster still but wrong at one shape: never the best.
            shaped("p", "wrong", "tuned", "default", 9.0),
            shaped("p", "wrong", "tuned", "d32", 9.0, status="incorrect"),
        ]
        (row,) = shape_rows(records)
        self.assertEqual(row[:3], ("p", 2, "examples/steady"))
        self.assertAlmostEqual(row[3], 3.0)
        self.assertEqual((row[4], row[5]), (3.0, 3.0))
        self.assertAlmostEqual(row[6], 50.0)
        self.assertIsNone(row[7], "no gather floor in these records")
        self.assertEqual(row[8], "tuned/wrong")
        text = shape_markdown([row])
        self.assertIn("| 1 | p | 2 | examples/steady | 3.00 | 3.00 – 3.00 | 50.0 | - | tuned/wrong |", text)

    def test_a_candidate_missing_a_shape_is_not_the_best(self):
        records = [
            shaped("p", "reference", "reference", "default", 1.0),
            shaped("p", "reference", "reference", "d32", 1.0),
            shaped("p", "half", "tuned", "default", 5.0),
        ]
        (row,) = shape_rows(records)
        self.assertIsNone(row[2])
        self.assertIn("| 1 | p | 2 | - | - | - | - | - | tuned/half |", shape_markdown([row]))


if __name__ == "__main__":
    unittest.main()
