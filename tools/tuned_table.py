"""Prints markdown tables generated from a result set's results.jsonl, so that figures quoted in
notes, the README and predictions files come from the committed set, never by hand.

    In a set run at several shapes, the first two read the default shape's records only.

    python3 tools/tuned_table.py RESULT_DIR [GROUP]   one group's records (tuned by default): per
        problem the candidate, status, median ms, % of the physical floor, the paired speedup
        over the reference with its 95% interval, and the speedup over eager (eager's median
        over the candidate's, as the summary's unpaired figure)
    python3 tools/tuned_table.py RESULT_DIR --best    per problem the reference against eager
        and torch.compile, and the fastest correct candidate with its speedups
    python3 tools/tuned_table.py RESULT_DIR --shapes  per problem, over its shapes (a set run
        with shapes: records carry "shape"): the candidate correct at every shape with the
        highest geometric-mean speedup over the reference, that geomean, its spread (the
        lowest and highest shape), the geomean % of the streaming and of the gather floor, and
        the best candidate at the default shape alone where it differs (a rank that changes
        once shapes count)
"""
import json
import math
import sys
from pathlib import Path


def _ms(record, key):
    """The median ms of a record's `key` ("pytorch", "pytorch_compile"), or None."""
    value = record.get(key)
    return value.get("median_ms") if isinstance(value, dict) else None


def _ratio(a, b):
    return None if (a is None or not b) else a / b


def _fmt(x, digits):
    return "-" if x is None else f"{x:.{digits}f}"


def _interval(lo, hi):
    return "" if lo is None else f" [{_fmt(lo, 2)}, {_fmt(hi, 2)}]"


def rows(records, group="tuned"):
    """(problem, candidate, status, ms, % floor, speedup, ci_low, ci_high, over eager) per record
    of `group` at the default shape, in the set's order; missing figures are None."""
    records = at_default_shape(records)
    eager = {r["problem"]: _ms(r, "pytorch") for r in records if r["candidate"] == "reference"}
    out = []
    for r in records:
        if r.get("group") != group:
            continue
        timing = r.get("timing") or {}
        ms = timing.get("median_ms")
        floor = timing.get("floor_fraction")
        speedup = r.get("speedup") or {}
        out.append((
            r["problem"], r["candidate"], r["status"], ms,
            None if floor is None else 100 * floor,
            speedup.get("median"), speedup.get("ci_low"), speedup.get("ci_high"),
            _ratio(eager.get(r["problem"]), ms),
        ))
    return out


def _problems(records):
    """The problems of `records`, in the order they first appear."""
    problems = []
    for r in records:
        if r["problem"] not in problems:
            problems.append(r["problem"])
    return problems


def at_default_shape(records):
    """The records measured at each problem's default shape (all of them in a set without
    shapes)."""
    return [r for r in records if r.get("shape", "default") == "default"]


def best_rows(records):
    """Per problem, in the set's order: (problem, reference ms, eager ms, compile ms, best
    candidate "group/name" or None, its ms, speedup, ci_low, ci_high, % floor), at the
    default shape."""
    records = at_default_shape(records)
    problems = _problems(records)
    out = []
    for p in problems:
        mine = [r for r in records if r["problem"] == p]
        ref = next((r for r in mine if r["candidate"] == "reference"), {})
        correct = [r for r in mine if r["candidate"] != "reference" and r["status"] == "correct"
                   and (r.get("timing") or {}).get("median_ms")]
        best = min(correct, key=lambda r: r["timing"]["median_ms"], default=None)
        row = [p, (ref.get("timing") or {}).get("median_ms"), _ms(ref, "pytorch"),
               _ms(ref, "pytorch_compile")]
        if best is None:
            row += [None] * 6
        else:
            sp = best.get("speedup") or {}
            floor = best["timing"].get("floor_fraction")
            row += [f'{best["group"]}/{best["candidate"]}', best["timing"]["median_ms"],
                    sp.get("median"), sp.get("ci_low"), sp.get("ci_high"),
                    None if floor is None else 100 * floor]
        out.append(tuple(row))
    return out


def _geomean(values):
    values = [v for v in values if v is not None and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def shape_rows(records):
    """Per problem, in the set's order: (problem, shapes, best by geomean "group/name" or None,
    geomean speedup, lowest, highest shape speedup, geomean % of floor, geomean % of gather
    floor, best at the default shape alone)."""
    problems = _problems(records)
    out = []
    for p in problems:
        mine = [r for r in records if r["problem"] == p]
        shapes = []
        for r in mine:
            if r.get("shape", "default") not in shapes:
                shapes.append(r.get("shape", "default"))
        by_candidate = {}
        for r in mine:
            if r["candidate"] != "reference":
                by_candidate.setdefault(f'{r["group"]}/{r["candidate"]}', []).append(r)

        def speedup(r):
            return (r.get("speedup") or {}).get("median")

        def fraction(rs, key):
            values = [(r.get("timing") or {}).get(key) for r in rs]
            g = _geomean(values) if all(v is not None for v in values) else None
            return None if g is None else 100 * g

        whole = {c: rs for c, rs in by_candidate.items()
                 if len(rs) == len(shapes) and all(r["status"] == "correct" and speedup(r)
                                                    for r in rs)}
        best = max(whole, key=lambda c: _geomean(speedup(r) for r in whole[c]), default=None)
        at_default = [(c, speedup(r)) for c, rs in by_candidate.items() for r in rs
                      if r.get("shape", "default") == "default" and r["status"] == "correct"
                      and speedup(r)]
        default_best = max(at_default, key=lambda cs: cs[1], default=(None, None))[0]
        if best is None:
            out.append((p, len(shapes), None, None, None, None, None, None, default_best))
            continue
        sp = [speedup(r) for r in whole[best]]
        out.append((p, len(shapes), best, _geomean(sp), min(sp), max(sp),
                    fraction(whole[best], "floor_fraction"),
                    fraction(whole[best], "gather_floor_fraction"), default_best))
    return out


def shape_markdown(table):
    f = _fmt
    lines = ["| # | problem | shapes | best over every shape | geomean over reference "
             "| lowest – highest shape | % of floor | % of gather floor | best at the default "
             "shape alone |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for i, (p, n, best, g, lo, hi, floor, gather, default_best) in enumerate(table, 1):
        spread = "-" if lo is None else f"{f(lo, 2)} – {f(hi, 2)}"
        changed = "same" if default_best == best else (default_best or "-")
        lines.append(f"| {i} | {p} | {n} | {best or '-'} | {f(g, 2)} | {spread} | "
                     f"{f(floor, 1)} | {f(gather, 1)} | {changed} |")
    return "\n".join(lines)


def best_markdown(table):
    f = _fmt
    lines = ["| # | problem | reference ms | eager ms | ref / eager | compile ms | best candidate | ms "
             "| over reference [95% CI] | over eager | over compile | % of floor |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for i, (p, ref, eager, comp, best, ms, sp, lo, hi, floor) in enumerate(table, 1):
        parity = _ratio(ref, eager)
        shown = f(parity, 2)
        if parity is not None and abs(parity - 1) > 0.10:
            shown = f"**{shown}**"
        ci = _interval(lo, hi)
        lines.append(f"| {i} | {p} | {f(ref, 3)} | {f(eager, 3)} | {shown} | {f(comp, 3)} | "
                     f"{best or '-'} | {f(ms, 3)} | {f(sp, 2)}{ci} | {f(_ratio(eager, ms), 2)} | "
                     f"{f(_ratio(comp, ms), 2)} | {f(floor, 1)} |")
    return "\n".join(lines)


def markdown(table):
    f = _fmt
    lines = ["| problem | candidate | status | ms | % of floor | over reference [95% CI] | over eager |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for p, c, s, ms, floor, sp, lo, hi, eager in table:
        ci = _interval(lo, hi)
        lines.append(f"| {p} | {c} | {s} | {f(ms, 4)} | {f(floor, 1)} | {f(sp, 2)}{ci} | {f(eager, 2)} |")
    return "\n".join(lines)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    path = Path(sys.argv[1]) / "results.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if sys.argv[2:3] == ["--best"]:
        print(best_markdown(best_rows(records)))
    elif sys.argv[2:3] == ["--shapes"]:
        print(shape_markdown(shape_rows(records)))
    else:
        print(markdown(rows(records, sys.argv[2] if len(sys.argv) > 2 else "tuned")))


if __name__ == "__main__":
    main()
