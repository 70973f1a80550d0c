"""Summarises Nsight Compute CSVs (gpu__time_duration.sum): kernel, grid, microseconds, in launch
order, with the total. Usage: python3 tools/ncu_summary.py A.csv [B.csv ...]"""
import csv
import sys


def rows(path):
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]  # ncu prints its own log lines too
    for r in csv.DictReader(lines):
        if r.get("Metric Name") == "gpu__time_duration.sum":
            yield r["Kernel Name"], r["Grid Size"], float(r["Metric Value"].replace(",", "")) / 1e3


for path in sys.argv[1:]:
    print(f"== {path}")
    total = 0.0
    for name, grid, us in rows(path):
        total += us
        print(f"{us:10.1f} us  {grid:>16}  {name[:110]}")
    print(f"{total:10.1f} us  total")
