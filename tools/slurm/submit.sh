#!/bin/bash
# A sharded dlrm-bench run on Slurm: an array of SHARD_COUNT tasks (tools/slurm/shards.sbatch),
# then, once every task succeeded, their merge into MERGED (`report --merge`):
#   DLRM_BENCH_SECRET_FILE=~/.dlrm-bench-secret SBATCH_GPUS=1 \
#     tools/slurm/submit.sh SHARD_COUNT OUT MERGED run --preset full
# (any dlrm-bench command that takes --shard: `run ...`, `sweep score sweeps/NAME ...`).
# Prints the two job ids ("ARRAY MERGE"). sbatch's own variables (SBATCH_GPUS,
# SBATCH_PARTITION, SBATCH_TIMELIMIT, ...) reach both jobs. The merge is ended, not left
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
bin=${DLRM_BENCH:-target/release/dlrm-bench}
secret=""
[[ -n ${DLRM_BENCH_SECRET_FILE:-} ]] && secret="--secret-seed-file $(printf %q "$DLRM_BENCH_SECRET_FILE")"
merge="$(printf %q "$bin") report --merge $(printf %q "$out")/*-shard*of$count \
--out $(printf %q "$merged") $secret"
if (( merge_only )); then
  env -u SBATCH_GPUS sbatch --parsable --job-name=dlrm-bench-merge --wrap "$merge"
  exit
fi
array=$(sbatch --parsable --array=0-$((count - 1)) "$here/shards.sbatch" "$count" "$out" "$@")
merge_job=$(env -u SBATCH_GPUS sbatch --parsable --job-name=dlrm-bench-merge --dependency="afterok:$array" \
  --kill-on-invalid-dep=yes --wrap "$merge")
echo "$array $merge_job"
