#!/bin/bash
# A sharded dlrm-bench run on Slurm: an array of SHARD_COUNT tasks (tools/slurm/shards.sbatch),
# then, once every task succeeded, their merge into MERGED (`report --merge`):
#   DLRM_BENCH_SECRET_FILE=~/.dlrm-bench-secret SBATCH_GPUS=1 \
#     tools/slurm/submit.sh SHARD_COUNT OUT MERGED run --preset full
# (any dlrm-bench command that takes --shard: `run ...`, `sweep score sweeps/NAME ...`).
# Prints the two job ids ("ARRAY MERGE"). sbatch's own variables (SBATCH_GPUS,
# SBATCH_PARTITION, SBATCH_TIMELIMIT, ...) reach the tasks; the merge (tools/slurm/merge.sbatch)
# gets none of the GPU ones. OUT must hold no earlier submission's shards. Run it from the
# repository root. The merge is ended, not left
# pending, if a task fails (--kill-on-invalid-dep=yes); then resubmit the failed task alone
# with the same count (`sbatch --array=3 tools/slurm/shards.sbatch SHARD_COUNT OUT ARGS...`, which
# resumes its directory) and the merge alone (`tools/slurm/submit.sh --merge-only ...`).
set -euo pipefail
merge_only=0
if [[ ${1:-} == --merge-only ]]; then merge_only=1; shift; fi
count=${1:?usage: submit.sh [--merge-only] SHARD_COUNT OUT MERGED dlrm-bench-arguments...}
out=${2:?usage: submit.sh [--merge-only] SHARD_COUNT OUT MERGED dlrm-bench-arguments...}
merged=${3:?usage: submit.sh [--merge-only] SHARD_COUNT OUT MERGED dlrm-bench-arguments...}
shift 3
here=$(cd "$(dirname "$0")" && pwd)
# The merge needs no GPU: none of sbatch's GPU variables reach it.
merge_env=(env -u SBATCH_GPUS -u SBATCH_GRES -u SBATCH_GPUS_PER_NODE -u SBATCH_GPUS_PER_TASK)
if (( merge_only )); then
  "${merge_env[@]}" sbatch --parsable "$here/merge.sbatch" "$count" "$out" "$merged"
  exit
fi
# OUT is this submission's alone: a resubmitted task resumes what it finds there, and the merge
# takes every shard there.
shopt -s nullglob
earlier=("$out"/*-shard*)
if (( ${#earlier[@]} )); then
  echo "submit.sh: $out holds shards already (${earlier[0]}, ...): give each submission a new OUT" >&2
  exit 2
fi
array=$(sbatch --parsable --array=0-$((count - 1)) "$here/shards.sbatch" "$count" "$out" "$@")
merge_job=$("${merge_env[@]}" sbatch --parsable --dependency="afterok:$array" \
  --kill-on-invalid-dep=yes "$here/merge.sbatch" "$count" "$out" "$merged")
echo "$array $merge_job"
