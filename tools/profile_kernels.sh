#!/usr/bin/env bash
# Per-kernel times of a problem's Rust reference and of its PyTorch eager `Model`, on the same
# inputs, with Nsight Compute (each kernel once, caches flushed, clocks left alone):
#   [CANDIDATE=DIR] tools/profile_kernels.sh OUT_DIR PROBLEM [PRESET]
# Writes OUT_DIR/PROBLEM.{torch,reference}.csv (ncu's raw output) and prints both kernel lists in
# launch order, one call each, with totals (tools/ncu_summary.py). Needs a prebuilt dlrm-bench
# (DLRM_BENCH_BIN). With CANDIDATE (a candidate's directory, e.g. candidates/tuned/PROBLEM) it
# also profiles that candidate's kernels (the names its candidate.toml launches) into
# OUT_DIR/PROBLEM.candidate.csv; a kernel the reference launches too (the look-back scan) then
# shows the reference's launches of it as well.
set -euo pipefail
out=${1:?usage: tools/profile_kernels.sh OUT_DIR PROBLEM [PRESET]}
problem=${2:?problem name}
preset=${3:-full}
bin=${DLRM_BENCH_BIN:-target/release/dlrm-bench}
mkdir -p "$out"
inputs=$(mktemp -d /dev/shm/dlrm-profile.XXXX 2>/dev/null || mktemp -d)
trap 'rm -rf "$inputs"' EXIT
"$bin" gen "$problem" --preset "$preset" --sets 1 --out "$inputs" >/dev/null
file=$(ls "$inputs"/*.safetensors | head -1)
model=$(ls bench-problems/kernelbench/*_"$problem".py)
# NCU_METRICS (comma-separated) adds metrics to the raw CSVs beside the time (the summary prints
# the time only), e.g. dram__bytes_read.sum,smsp__inst_executed.sum.
ncu_args=(--clock-control none --metrics "gpu__time_duration.sum${NCU_METRICS:+,$NCU_METRICS}" --csv
          --print-units base)

# PyTorch: one warm-up call, then the profiled call (the summary shows one). SKIP_TORCH=1
# profiles only the reference.
[[ -n "${SKIP_TORCH:-}" ]] || DLRM_BENCH_INPUTS="$file" ncu "${ncu_args[@]}" python3 - "$model" > "$out/$problem.torch.csv" <<'PY'
import importlib.util, sys, torch
spec = importlib.util.spec_from_file_location("m", sys.argv[1]); m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
inputs = m.get_inputs(); model = m.Model()
for _ in range(2):
    model(*inputs); torch.cuda.synchronize()
PY

# The reference: its first (checking) execution; the regex admits the problems' kernels by their
# prefixes (not the runner's ceiling probes, compares or fingerprints; problems 2-5's
# `embedding_`, `tbe_` and `adagrad_` kernels were missing before 2026-12-02), and the summary
# cuts the list where the next execution starts.
LAUNCHES=${LAUNCHES:-80}
summaries=()
# SKIP_REFERENCE=1 (with CANDIDATE) profiles only the candidate's kernels.
[[ -n "${SKIP_REFERENCE:-}" ]] || ncu "${ncu_args[@]}" -k 'regex:^(aten_|radix_|inclusive_|scan_|unique_|kjt_|seq|bucket|block_bucketize|adagrad_|embedding_|tbe_|dot_|fm_)' \
    --launch-count "$LAUNCHES" \
    "$bin" run --problem "$problem" --preset "$preset" --no-candidates --public-sets 1 \
    --secret-sets 1 --rotation 1 --min-pairs 1 --max-pairs 2 --budget-s 0.1 --out "$inputs/results" \
    > "$out/$problem.reference.csv" || echo "ncu on dlrm-bench exited $?"
[[ -n "${SKIP_REFERENCE:-}" ]] || summaries=("$out/$problem.reference.csv")
if [[ -n "${CANDIDATE:-}" ]]; then
  names=$(sed -n 's/^kernel *= *"\(.*\)"/\1/p' "$CANDIDATE/candidate.toml" | sort -u | paste -sd'|' -)
  ncu "${ncu_args[@]}" -k "regex:^($names)\$" --launch-count "$LAUNCHES" \
      "$bin" run --problem "$problem" --preset "$preset" --candidates "$CANDIDATE" --public-sets 1 \
      --secret-sets 1 --rotation 1 --min-pairs 1 --max-pairs 2 --budget-s 0.1 --out "$inputs/results" \
      > "$out/$problem.candidate.csv" || echo "ncu on the candidate exited $?"
  summaries+=("$out/$problem.candidate.csv")
fi
[[ -n "${SKIP_TORCH:-}" ]] || summaries=("$out/$problem.torch.csv" "${summaries[@]}")
python3 tools/ncu_summary.py "${summaries[@]}"
