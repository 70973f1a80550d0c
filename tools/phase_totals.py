"""Seconds per phase summed over a result set's records (results.jsonl), per problem and shape
and in all: where a run's time went when it has no run.json phase table (a run cut short).

    python3 tools/phase_totals.py RESULT_DIR
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


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    path = Path(sys.argv[1]) / "results.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
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
