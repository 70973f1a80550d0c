"""Seconds per phase summed over a result set's records (results.jsonl), per problem and shape
and in all: where a run's time went when it has no run.json phase table (a run cut short).
With --answers, one line per KernelBench answer: its build wait and each protocol's start,
checks and timing.

    python3 tools/phase_totals.py [--answers] RESULT_DIR
"""
import collections
import json
import sys
from pathlib import Path


def totals(records):
    """{unit: Counter(phase -> seconds)} in the set's order, and the Counter over all units."""
    units = {}
    for r in records:
        unit = f'{r["problem"]}@{r.get("shape") or "default"}'
        units.setdefault(unit, collections.Counter()).update(r.get("phases") or {})
    every = collections.Counter()
    for c in units.values():
        every.update(c)
    return units, every


# An answer's phases: (column, phase names summed into it).
ANSWER_COLUMNS = (
    ("build wait", ("answer_build",)),
    ("ours: start", ("answer_ours",)),
    ("ours: checks", ("answer_ours_check",)),
    ("ours: timing", ("answer_ours_time",)),
    ("KernelBench: start", ("answer_kernel_bench",)),
    ("KernelBench: trials", ("answer_kernel_bench_check",)),
    ("KernelBench: timing", ("answer_kernel_bench_time",)),
)


def answer_rows(records):
    """(problem, group, status, [seconds per ANSWER_COLUMNS], both protocols' total) for each
    KernelBench answer's record (those with a `kernelbench` verdict)."""
    rows = []
    for r in records:
        if not r.get("kernelbench"):
            continue
        ph = r.get("phases") or {}
        cols = [sum(ph.get(p, 0.0) for p in names) for _, names in ANSWER_COLUMNS]
        rows.append((r["problem"], r.get("group", ""), r["status"], cols, sum(cols[1:])))
    return rows


def print_answers(records):
    print("| problem | group | status | " + " | ".join(c for c, _ in ANSWER_COLUMNS)
          + " | both protocols |")
    print("| --- " * (len(ANSWER_COLUMNS) + 4) + "|")
    for problem, group, status, cols, both in answer_rows(records):
        print(f"| {problem} | {group} | {status} | " + " | ".join(f"{c:.1f}" for c in cols)
              + f" | {both:.1f} |")


def main():
    args = sys.argv[1:]
    answers = "--answers" in args
    args = [a for a in args if a != "--answers"]
    if len(args) != 1:
        sys.exit(__doc__)
    path = Path(args[0]) / "results.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if answers:
        print_answers(records)
        return
    units, every = totals(records)
    print("| unit | seconds | largest phases |")
    print("| --- | --- | --- |")
    for unit, c in units.items():
        top = ", ".join(f"{p} {s:.1f}" for p, s in c.most_common(3))
        print(f"| {unit} | {sum(c.values()):.1f} | {top} |")
    print(f"\n{len(units)} units, {sum(every.values()):.1f} s in the records' phases: "
          + ", ".join(f"{p} {s:.1f}" for p, s in every.most_common()))


if __name__ == "__main__":
    main()
