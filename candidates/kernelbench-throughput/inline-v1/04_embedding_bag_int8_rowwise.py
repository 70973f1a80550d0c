"""Throughput answer p04v1 (embedding_bag_int8_rowwise): written by tools/inline_set.py."""

"""DLRM-Bench problem 4, `embedding_bag_int8_rowwise`, in KernelBench format.

Problem
-------
Inference over an 8-bit row-wise quantized table in PyTorch's "byte rowwise" layout (what
``torch.ops.quantized.embedding_bag_byte_prepack`` writes):

    weight  [E, D+8]  uint8    row r: D quantized bytes q[r, :], then the row's float32 scale
                               and float32 bias (little-endian), so the row stride is D+8 bytes
    indices [N]       int64    rows to look up
    offsets [B+1]     int64    CSR bag boundaries: offsets[0] = 0, offsets[B] = N; bags may be
                               empty
    out     [B, D]    float32  out[b, d] = sum over the bag's j of
                               q[indices[j], d] * scale[indices[j]] + bias[indices[j]]

The Model calls the operator PyTorch provides for this layout,
``torch.ops.quantized.embedding_bag_byte_rowwise_offsets``, which has a CUDA kernel (it runs one
single-thread block per bag). ``full``: E = 16M rows (2.2 GB), D = 128, B = 65536, mean pooling
factor about 30 (heavy-tailed), Zipf alpha 1.09.

Inputs
------
``get_inputs()`` loads the exact tensors written by
``dlrm-bench gen embedding_bag_int8_rowwise --preset {ci,small,full} --out DIR``; name the file
with the environment variable ``DLRM_BENCH_INPUTS``. The safetensors file holds ``weight``
(U8 [E, D+8]), ``indices`` (I64 [N]) and ``offsets`` (I64 [B+1]). The tensors are moved to CUDA
when a CUDA device is available.
"""

import os

import torch
import torch.nn as nn

INPUTS_ENV = "DLRM_BENCH_INPUTS"
PROBLEM = "embedding_bag_int8_rowwise"
INPUT_NAMES = ("weight", "indices", "offsets")


class _Eager(nn.Module):
    """Sum-pooled embedding bag over a byte-rowwise quantized table (PyTorch eager)."""

    def __init__(self):
        super().__init__()

    def forward(self, weight: torch.Tensor, indices: torch.Tensor,
                offsets: torch.Tensor) -> torch.Tensor:
        return torch.ops.quantized.embedding_bag_byte_rowwise_offsets(
            weight, indices, offsets, mode=0, include_last_offset=True
        )


def load_inputs(path, device=None):
    """Load one input set written by `dlrm-bench gen` and return [weight, indices, offsets]."""
    from safetensors.torch import load_file

    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"{PROBLEM}: input file {path!r} does not exist; write it with "
            f"`dlrm-bench gen {PROBLEM} --preset full --out DIR`"
        )
    tensors = load_file(path)
    missing = [n for n in INPUT_NAMES if n not in tensors]
    if missing:
        raise KeyError(
            f"{PROBLEM}: {path!r} lacks tensor(s) {missing}; it holds {sorted(tensors)}"
        )
    weight, indices, offsets = (tensors[n] for n in INPUT_NAMES)
    if weight.dtype != torch.uint8 or weight.dim() != 2 or weight.shape[1] <= 8 \
            or (weight.shape[1] - 8) % 4 != 0:
        raise ValueError(f"{PROBLEM}: weight must be uint8 [E, D+8] with D a multiple of 4, got "
                         f"{weight.dtype} {list(weight.shape)}")
    if indices.dtype != torch.int64 or indices.dim() != 1:
        raise ValueError(f"{PROBLEM}: indices must be int64 [N], got {indices.dtype} "
                         f"{list(indices.shape)}")
    if offsets.dtype != torch.int64 or offsets.dim() != 1 or offsets.numel() < 1:
        raise ValueError(f"{PROBLEM}: offsets must be int64 [B+1], got {offsets.dtype} "
                         f"{list(offsets.shape)}")
    if int(offsets[0]) != 0 or int(offsets[-1]) != indices.numel():
        raise ValueError(f"{PROBLEM}: offsets must start at 0 and end at N = "
                         f"{indices.numel()}, got {int(offsets[0])} .. {int(offsets[-1])}")
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return [t.contiguous().to(device) for t in (weight, indices, offsets)]


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

__global__ void copy_bytes_p04v1(const unsigned char* __restrict__ src,
                                  unsigned char* __restrict__ dst, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (; i < n; i += stride) dst[i] = src[i];
}

torch::Tensor copy_p04v1(torch::Tensor t) {
    auto c = t.contiguous();
    auto out = torch::empty_like(c);
    const long long n = (long long)c.numel() * (long long)c.element_size();
    if (n > 0) {
        const int threads = 256;
        const long long want = (n + threads - 1) / threads;
        const int blocks = (int)(want < 65536 ? want : 65536);
        copy_bytes_p04v1<<<blocks, threads>>>((const unsigned char*)c.data_ptr(),
                                              (unsigned char*)out.data_ptr(), n);
    }
    return out;
}
"""

_ext = load_inline(
    name="dlrm_throughput_p04v1",
    cpp_sources="torch::Tensor copy_p04v1(torch::Tensor t);",
    cuda_sources=_CUDA,
    functions=["copy_p04v1"],
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
            return tuple(_ext.copy_p04v1(o) if torch.is_tensor(o) else o for o in out)
        return _ext.copy_p04v1(out)
