#!/usr/bin/env bash
# One full GPU evaluation on a CUDA host with PyTorch, with a prebuilt dlrm-bench binary:
#   [PROBLEMS="a b"] [COMMAND=kernelbench] [TORCH=eager,compile] tools/gpu_run.sh OUT_DIR [PRESET] [extra arguments...]
# (COMMAND: the dlrm-bench subcommand, `run` by default; `kernelbench` takes answer directories
# among the extra arguments. TORCH: the PyTorch yardsticks, `eager` by default.)
# A thin wrapper: it finds libnvrtc (CUDA toolkit or the pip wheel PyTorch ships) for the loader,
# prints the GPU, and runs `dlrm-bench run --torch`, which times PyTorch eager beside each
# reference on the run's own input files (tools/torch_peer.py; nothing is generated twice).
# Leaves OUT_DIR/log.txt and OUT_DIR/results/<run-id>/ (with peer.jsonl).
set -euo pipefail
out=${1:?usage: tools/gpu_run.sh OUT_DIR [PRESET] [run args...]}
preset=${2:-full}
shift $(( $# >= 2 ? 2 : 1 ))
bin=${DLRM_BENCH_BIN:-target/release/dlrm-bench}
mkdir -p "$out"
exec > >(tee -a "$out/log.txt") 2>&1

nvrtc=$( (ldconfig -p 2>/dev/null | awk '/libnvrtc\.so/ {print $NF}'; \
          find /usr/local/cuda*/lib64 /usr/lib/x86_64-linux-gnu \
               "$(python3 -c 'import site; print(site.getsitepackages()[0])' 2>/dev/null)/nvidia" \
               -name 'libnvrtc.so*' 2>/dev/null) | grep -v stubs | head -1 || true)
if [[ -n "$nvrtc" ]]; then export LD_LIBRARY_PATH="$(dirname "$nvrtc")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi
echo "libnvrtc: ${nvrtc:-not found}"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv || true

problem_args=()
for p in ${PROBLEMS:-}; do problem_args+=(--problem "$p"); done
"$bin" "${COMMAND:-run}" --torch="${TORCH:-eager}" --preset "$preset" "${problem_args[@]}" --out "$out/results" "$@"
