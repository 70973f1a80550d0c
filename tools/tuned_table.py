"""Prints a markdown table of one candidate group's records in a result set, generated from its
results.jsonl (so that figures quoted in notes and predictions files come from the committed
set, never by hand): per problem the candidate, status, median ms, % of the physical floor,
the paired speedup over the reference with its 95% interval, and the speedup over eager
(eager's median over the candidate's, as the summary's unpaired figure).

    python3 tools/tuned_table.py RESULT_DIR [GROUP]     (GROUP: tuned by default)
"""
import json
import sys
from pathlib import Path


def rows(records, group="tuned"):
    """(problem, candidate, status, ms, % floor, speedup, ci_low, ci_high, over eager) per record
    of `group`, in the set's order; missing figures are None."""
    eager = {}
    for r in records:
        if r["candidate"] == "reference" and isinstance(r.get("pytorch"), dict):
            eager[r["problem"]] = r["pytorch"].get("median_ms")
    out = []
    for r in records:
        if r.get("group") != group:
            continue
        timing = r.get("timing") or {}
        ms = timing.get("median_ms")
        floor = timing.get("floor_fraction")
        speedup = r.get("speedup") or {}
        e = eager.get(r["problem"])
        out.append((
            r["problem"], r["candidate"], r["status"], ms,
            None if floor is None else 100 * floor,
            speedup.get("median"), speedup.get("ci_low"), speedup.get("ci_high"),
            None if (e is None or not ms) else e / ms,
        ))
    return out


def markdown(table):
    def f(x, digits):
        return "-" if x is None else f"{x:.{digits}f}"
    lines = ["| problem | candidate | status | ms | % of floor | over reference [95% CI] | over eager |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for p, c, s, ms, floor, sp, lo, hi, eager in table:
        ci = "" if lo is None else f" [{f(lo, 2)}, {f(hi, 2)}]"
        lines.append(f"| {p} | {c} | {s} | {f(ms, 4)} | {f(floor, 1)} | {f(sp, 2)}{ci} | {f(eager, 2)} |")
    return "\n".join(lines)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    path = Path(sys.argv[1]) / "results.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    print(markdown(rows(records, sys.argv[2] if len(sys.argv) > 2 else "tuned")))


if __name__ == "__main__":
    main()
