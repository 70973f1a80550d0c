"""Throughput answer p09v0 (unique_indices): written by tools/inline_set.py."""

"""DLRM-Bench problem 9, `unique_indices`, in KernelBench format.

Problem
-------
Deduplicate a batch of embedding lookups:

    indices [N]  int64  row ids (Zipf(1.15) over a table of E rows, hot rows scattered)

Returns ``torch.unique(indices, sorted=True, return_inverse=True, return_counts=True)``: the
sorted distinct ids ``unique`` [U], ``inverse`` [N] (position of each id in ``unique``) and
``counts`` [U]. The Rust runner's signature allocates ``unique`` and ``counts`` at N, checks their
first U elements, and reports U in a one-element int64 output ``num_unique``. Checked exactly.
The ``full`` preset is N = 10M, E = 16M.

The eager ``Model`` is PyTorch's CUDA unique: arange, CUB radix sort of (id, position) over all
64 key bits, adjacent difference, CUB inclusive scan, the inverse scatter, CUB run-length encode,
and a device-to-host copy of U. The Rust reference mirrors that sequence.

Inputs
------
``get_inputs()`` loads the tensor written by ``dlrm-bench gen unique_indices --preset
{ci,small,full} --out DIR`` (set ``DLRM_BENCH_INPUTS``).
"""

import os

import torch
import torch.nn as nn

INPUTS_ENV = "DLRM_BENCH_INPUTS"
PROBLEM = "unique_indices"
INPUT_NAMES = ("indices",)


class _Eager(nn.Module):
    """Sorted unique ids with inverse and counts (PyTorch eager)."""

    def __init__(self):
        super().__init__()

    def forward(self, indices: torch.Tensor):
        return torch.unique(indices, sorted=True, return_inverse=True, return_counts=True)


def load_inputs(path, device=None):
    """[indices] of one `dlrm-bench gen` file."""
    from safetensors.torch import load_file

    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"{PROBLEM}: input file {path!r} does not exist; write it with "
            f"`dlrm-bench gen {PROBLEM} --preset full --out DIR`"
        )
    tensors = load_file(path)
    if "indices" not in tensors:
        raise KeyError(f"{PROBLEM}: {path!r} lacks `indices`; it holds {sorted(tensors)}")
    indices = tensors["indices"]
    if indices.dtype != torch.int64 or indices.dim() != 1:
        raise ValueError(f"{PROBLEM}: indices must be int64 [N], got {indices.dtype} "
                         f"{list(indices.shape)}")
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return [indices.contiguous().to(device)]


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

__global__ void copy_bytes_p09v0(const unsigned char* __restrict__ src,
                                  unsigned char* __restrict__ dst, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (; i < n; i += stride) dst[i] = src[i];
}

torch::Tensor copy_p09v0(torch::Tensor t) {
    auto c = t.contiguous();
    auto out = torch::empty_like(c);
    const long long n = (long long)c.numel() * (long long)c.element_size();
    if (n > 0) {
        const int threads = 128;
        const long long want = (n + threads - 1) / threads;
        const int blocks = (int)(want < 65536 ? want : 65536);
        copy_bytes_p09v0<<<blocks, threads>>>((const unsigned char*)c.data_ptr(),
                                              (unsigned char*)out.data_ptr(), n);
    }
    return out;
}
"""

_ext = load_inline(
    name="dlrm_throughput_p09v0",
    cpp_sources="torch::Tensor copy_p09v0(torch::Tensor t);",
    cuda_sources=_CUDA,
    functions=["copy_p09v0"],
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
            return tuple(_ext.copy_p09v0(o) if torch.is_tensor(o) else o for o in out)
        return _ext.copy_p09v0(out)
