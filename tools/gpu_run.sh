#!/usr/bin/env bash
# One full GPU evaluation on a CUDA host with PyTorch, with a prebuilt dlrm-bench binary:
#   [PROBLEMS="a b"] tools/gpu_run.sh OUT_DIR [PRESET] [extra `dlrm-bench run` arguments...]
# 1. finds libnvrtc (CUDA toolkit or the pip wheel PyTorch ships) for the loader;
# 2. writes the inputs of each problem's first two public sets (`dlrm-bench gen`) and times PyTorch
#    eager on exactly those (`tools/torch_peer.py`);
# 3. runs the suite with the peer timings beside the references.
# Leaves OUT_DIR/peer.jsonl, OUT_DIR/log.txt and OUT_DIR/results/<run-id>/.
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

# Inputs go to memory (/dev/shm) when it is there: the sets are gigabytes at `full`.
default_inputs=/tmp/dlrm-bench-inputs
[[ -d /dev/shm && -w /dev/shm ]] && default_inputs=/dev/shm/dlrm-bench-inputs
inputs=${INPUTS_DIR:-$default_inputs}
problems=${PROBLEMS:-$("$bin" list --names)}
problem_args=()
for p in $problems; do problem_args+=(--problem "$p"); done
for p in $problems; do
  rm -rf "$inputs"; mkdir -p "$inputs"
  echo "== $p: $(date +%T)"
  "$bin" gen "$p" --preset "$preset" --sets "${SETS:-2}" --out "$inputs"
  python3 tools/torch_peer.py --problem "$p" --inputs "$inputs"/*.safetensors --out "$out/peer.jsonl" --check \
    || echo "torch_peer failed for $p (continuing)"
done
rm -rf "$inputs"
"$bin" run --preset "$preset" "${problem_args[@]}" --peer "$out/peer.jsonl" --out "$out/results" "$@"
