"""Throughput answer p08v2 (block_bucketize_sparse_features): written by tools/inline_set.py."""

"""DLRM-Bench problem 8, `block_bucketize_sparse_features`, in KernelBench format.

Problem
-------
Row-wise sharding of a keyed jagged tensor's ids to W ranks (FBGEMM
``block_bucketize_sparse_features`` with ``sequence=True``):

    lengths      [T, B]  int32    ids per (feature, sample)
    indices      [N]     int64    the ids, feature by feature, sample by sample
    weights      [N]     float32  one weight per id
    block_sizes  [T]     int64    rows per rank of each feature's table
    world_size           int      W

An id of feature t with block size s below W*s goes to rank id // s as id - rank*s; past the last
block (FBGEMM's rule) it goes to rank id % W as id // W. Returns new_lengths [W, T, B] int32 (ids
per (rank, feature, sample)), new_indices [N] int64 and new_weights [N] float32 grouped by
(rank, feature, sample) with the original order kept inside each group, and unbucketize_permute
[N] int64 (input id i sits at output position unbucketize_permute[i]). Checked exactly. The
``full`` preset is the KJT of kjt_permute with half its batch (T = 856, B = 4096, about 56M ids)
and W = 8: at B = 8192 eager PyTorch takes 24 ms on an H200, past the 15 ms a ``full`` problem
should run.

The eager ``Model`` below is what the Rust reference mirrors launch for launch.

Inputs
------
``get_inputs()`` loads the tensors written by ``dlrm-bench gen block_bucketize_sparse_features
--preset {ci,small,full} --out DIR`` (set ``DLRM_BENCH_INPUTS``); ``world_size`` comes from the
file's ``sizes`` metadata (``W``).
"""

import json
import os

import torch
import torch.nn as nn

INPUTS_ENV = "DLRM_BENCH_INPUTS"
PROBLEM = "block_bucketize_sparse_features"
INPUT_NAMES = ("lengths", "indices", "weights", "block_sizes")


class _Eager(nn.Module):
    """Block bucketize of a KJT's ids to W ranks (PyTorch eager)."""

    def __init__(self):
        super().__init__()

    def forward(self, lengths: torch.Tensor, indices: torch.Tensor, weights: torch.Tensor,
                block_sizes: torch.Tensor, world_size: int):
        T, B = lengths.shape
        N = indices.numel()
        W = world_size
        seg = torch.repeat_interleave(lengths.view(-1), output_size=N)  # (t, b) of every id
        blk = block_sizes[seg // B]
        q = indices // blk
        small = q < W  # id < W * block size
        rank = torch.where(small, q, indices % W)
        new_id = torch.where(small, indices - q * blk, indices // W)
        key = rank * (T * B) + seg  # (rank, t, b)
        new_lengths = torch.bincount(key, minlength=W * T * B).to(lengths.dtype).view(W, T, B)
        order = torch.argsort(rank, stable=True)  # ids arrive in (t, b) order already
        unbucketize_permute = torch.empty_like(order).scatter_(
            0, order, torch.arange(N, device=indices.device))
        return new_lengths, new_id[order], weights[order], unbucketize_permute


def _sizes(path):
    from safetensors import safe_open

    with safe_open(path, framework="pt") as f:
        meta = f.metadata() or {}
    if "sizes" not in meta:
        raise KeyError(f"{PROBLEM}: {path!r} has no `sizes` metadata; write it with dlrm-bench gen")
    return json.loads(meta["sizes"])


def load_inputs(path, device=None):
    """[lengths, indices, weights, block_sizes, world_size] of one `dlrm-bench gen` file."""
    from safetensors.torch import load_file

    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"{PROBLEM}: input file {path!r} does not exist; write it with "
            f"`dlrm-bench gen {PROBLEM} --preset full --out DIR`"
        )
    tensors = load_file(path)
    missing = [n for n in INPUT_NAMES if n not in tensors]
    if missing:
        raise KeyError(f"{PROBLEM}: {path!r} lacks tensor(s) {missing}; it holds {sorted(tensors)}")
    lengths, indices, weights, block_sizes = (tensors[n] for n in INPUT_NAMES)
    world_size = int(_sizes(path)["W"])
    if lengths.dtype != torch.int32 or lengths.dim() != 2:
        raise ValueError(f"{PROBLEM}: lengths must be int32 [T, B]")
    if indices.dtype != torch.int64 or weights.dtype != torch.float32 or \
            indices.numel() != weights.numel() or indices.numel() != int(lengths.sum()):
        raise ValueError(f"{PROBLEM}: indices int64 [N] and weights float32 [N], N = lengths.sum()")
    if block_sizes.dtype != torch.int64 or block_sizes.numel() != lengths.shape[0] or \
            int(block_sizes.min()) < 1:
        raise ValueError(f"{PROBLEM}: block_sizes must be int64 [T], all >= 1")
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return [t.contiguous().to(device) for t in (lengths, indices, weights, block_sizes)] + \
        [world_size]


def get_inputs():
    path = os.environ.get(INPUTS_ENV)
    if not path:
        raise RuntimeError(
            f"{PROBLEM}: set {INPUTS_ENV} to a safetensors file written by "
            f"`dlrm-bench gen {PROBLEM} --preset full --out DIR` "
            f"(for example DIR/{PROBLEM}.full.set0.safetensors)"
        )
    return load_inputs(path)


def get_init_inputs():
    return []

# --- the answer: the eager Model above, each output copied by a load_inline CUDA kernel ---
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <torch/extension.h>

__global__ void copy_bytes_p08v2(const unsigned char* __restrict__ src,
                                  unsigned char* __restrict__ dst, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (; i < n; i += stride) dst[i] = src[i];
}

torch::Tensor copy_p08v2(torch::Tensor t) {
    auto c = t.contiguous();
    auto out = torch::empty_like(c);
    const long long n = (long long)c.numel() * (long long)c.element_size();
    if (n > 0) {
        const int threads = 512;
        const long long want = (n + threads - 1) / threads;
        const int blocks = (int)(want < 65536 ? want : 65536);
        copy_bytes_p08v2<<<blocks, threads>>>((const unsigned char*)c.data_ptr(),
                                              (unsigned char*)out.data_ptr(), n);
    }
    return out;
}
"""

_ext = load_inline(
    name="dlrm_throughput_p08v2",
    cpp_sources="torch::Tensor copy_p08v2(torch::Tensor t);",
    cuda_sources=_CUDA,
    functions=["copy_p08v2"],
    verbose=False,
)


class ModelNew(nn.Module):
    """The eager Model, its outputs passed through a load_inline copy kernel."""

    def __init__(self, *args):
        super().__init__()
        self.inner = _Eager(*args)

    def forward(self, *inputs):
        out = self.inner(*inputs)
        if isinstance(out, tuple):
            return tuple(_ext.copy_p08v2(o) if torch.is_tensor(o) else o for o in out)
        return _ext.copy_p08v2(out)
