#!/usr/bin/env bash
# Builds the binary a cubin candidate's manifest names (`source = "kernel.cubin"` or
# `"kernel.fatbin"`) from the .cu of the same stem beside it, with nvcc, on a GPU host.
# Binaries are not committed (one GPU architecture each); a candidate whose binary is missing
# is `skipped` by `dlrm-bench run` with this command in its message.
#
#   tools/build_cubin.sh candidates/examples/embedding_bag_sum/cubin_warp_per_bag [DIR...]
#
# CUBIN_ARCH (default sm_90) picks the architecture; NVCC the compiler (default: nvcc on PATH,
# else /usr/local/cuda/bin/nvcc). A .fatbin gets SASS for CUBIN_ARCH and its PTX.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 CANDIDATE_DIR..." >&2; exit 2; }
arch="${CUBIN_ARCH:-sm_90}"
nvcc="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
[ -x "$nvcc" ] || { echo "$0: nvcc not found (set NVCC, or install the CUDA toolkit)" >&2; exit 1; }
for dir in "$@"; do
  manifest="$dir/candidate.toml"
  [ -f "$manifest" ] || { echo "$0: no $manifest" >&2; exit 1; }
  src=$(sed -n 's/^[[:space:]]*source[[:space:]]*=[[:space:]]*"\([^"]*\)".*/\1/p' "$manifest" | head -1)
  case "$src" in
    *.cubin) mode=-cubin; gencode="-arch=$arch" ;;
    *.fatbin) mode=-fatbin; gencode="-gencode=arch=compute_${arch#sm_},code=[$arch,compute_${arch#sm_}]" ;;
    *) echo "$0: $manifest: source \`$src\` is not a .cubin or .fatbin" >&2; exit 1 ;;
  esac
  cu="$dir/${src%.*}.cu"
  [ -f "$cu" ] || { echo "$0: $cu not found (the binary is built from it)" >&2; exit 1; }
  echo "$nvcc $mode $gencode -O3 -std=c++17 -o $dir/$src $cu"
  "$nvcc" "$mode" "$gencode" -O3 -std=c++17 -o "$dir/$src" "$cu"
done
