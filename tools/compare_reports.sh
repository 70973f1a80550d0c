#!/usr/bin/env bash
# Behaviour check for refactors (issue 33): renders every committed result set with two builds
# of dlrm-bench and diffs everything they write — `report DIR --out --html` per set (stdout,
# stderr, exit status, summary.md/csv, results.jsonl, the HTML page and plots), the ci shards
# pooled, and their `report --merge` (run.json included), and one set with a workload profile
# in every output format — with the two binaries' commit
# (in the HTML footer) and paths normalised. Exit 0 when identical.
#   tools/compare_reports.sh OLD_BINARY NEW_BINARY [SCRATCH_DIR]
set -u
old=${1:?usage: tools/compare_reports.sh OLD_BINARY NEW_BINARY [SCRATCH_DIR]}
new=${2:?usage: tools/compare_reports.sh OLD_BINARY NEW_BINARY [SCRATCH_DIR]}
work=${3:-$(mktemp -d)}
cd "$(dirname "$0")/.."
render() { # side binary
  local side=$1 bin=$2 out=$work/$1
  mkdir -p "$out/m"
  for f in $(find results -name results.jsonl | sort); do
    local d name
    d=$(dirname "$f"); name=$(echo "$d" | tr '/' '_')
    "$bin" report "$d" --out "$out/$name" --html "$out/$name.html" >"$out/$name.stdout" 2>"$out/$name.stderr"
    echo "rc=$?" >>"$out/$name.stdout"
  done
  # One set with a workload profile, in each output format.
  local full=results/20261204T213806Z-gpu-full w=workloads/dlrm-dot-mlperf-tables-train-h200.toml
  "$bin" report "$full" --workload "$w" --out "$out/w" --html "$out/w.html" >"$out/w.stdout" 2>&1
  "$bin" report "$full" --workload "$w" --csv >"$out/w.csv" 2>&1
  "$bin" report "$full" --workload "$w" --json >"$out/w.json" 2>&1
  "$bin" report "$full" --basis eager --wide >"$out/eager.stdout" 2>&1
  local shards
  shards=$(ls -d results/20261202T003800Z-gpu-ci-shards/*-shard?of2 | sort)
  "$bin" report $shards --html "$out/pooled.html" >"$out/pooled.stdout" 2>&1
  "$bin" report --merge $shards --out "$out/m/merged" >"$out/merged.stdout" 2>&1
  find "$out" -type f -print0 | xargs -0 sed -i "s#$work/$side#SCRATCH#g"
  # The page's footer names the binary's own commit.
  find "$out" -name '*.html' -print0 | xargs -0 sed -i -E 's/Made by dlrm-bench [0-9a-f]{40}(-dirty)?/Made by dlrm-bench COMMIT/'
}
rm -rf "$work/old" "$work/new"
render old "$old"
render new "$new"
# Each side's own binary path (in merged run.json's command) reads the same; recorded commands
# of committed sets mention neither or both.
find "$work/old" "$work/new" -type f -print0 | xargs -0 sed -i "s#$old#BINARY#g; s#$new#BINARY#g"
echo "sets: $(find results -name results.jsonl | wc -l), scratch: $work"
if diff -r "$work/old" "$work/new" >"$work/diff.txt"; then echo IDENTICAL; else echo "DIFFERENT (see $work/diff.txt)"; head -40 "$work/diff.txt"; exit 1; fi
