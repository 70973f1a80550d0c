"""Summarises Nsight Compute CSVs (gpu__time_duration.sum): kernel, grid, microseconds, in launch
order, with the total, for the first call only: the list stops where the first two kernels'
names come round again (the next call of the same plan). `--all` lists every launch.

    python3 tools/ncu_summary.py [--all] A.csv [B.csv ...]
"""
import csv
import sys


def rows(path):
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]  # ncu prints its own log lines too
    for r in csv.DictReader(lines):
        if r.get("Metric Name") == "gpu__time_duration.sum":
            yield r["Kernel Name"], r["Grid Size"], float(r["Metric Value"].replace(",", "")) / 1e3


def first_call(launches):
    names = [name for name, _, _ in launches]
    for i in range(1, len(names) - 1):
        if names[i:i + 2] == names[:2]:
            return launches[:i]
    return launches


def main():
    args = sys.argv[1:]
    every = "--all" in args
    for path in (a for a in args if a != "--all"):
        launches = list(rows(path))
        shown = launches if every else first_call(launches)
        print(f"== {path} ({len(shown)} of {len(launches)} launches)")
        for name, grid, us in shown:
            print(f"{us:10.1f} us  {grid:>16}  {name[:110]}")
        print(f"{sum(us for _, _, us in shown):10.1f} us  total")


main()
