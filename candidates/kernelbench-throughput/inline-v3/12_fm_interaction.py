"""Throughput answer p12v3 (fm_interaction): written by tools/inline_set.py."""

"""DLRM-Bench problem 12, `fm_interaction`, in KernelBench format.

Problem
-------
DeepFM's factorization-machine second-order term, float32 throughout:

    x    [B, F, K]  float32  F fields, each a K-wide embedding
    out  [B]        float32  out[b] = 0.5 * sum_k ((sum_f x[b, f, k])^2 - sum_f x[b, f, k]^2)

which equals the sum over every pair of fields f < g of <x[b, f], x[b, g]>. The ``full``
preset is B = 262144, F = 39 (Criteo's fields), K = 16: a 654 MB input read for a [B] output,
so the problem is memory-bound.

The Model is the usual eager formulation (DeepFM / DeepCTR's FM layer): sum, pow, pow, sum,
sub, sum, mul -- seven kernels and a full [B, F, K] temporary for x^2. The Rust reference
mirrors them launch for launch.

Inputs
------
``get_inputs()`` loads the exact tensor written by
``dlrm-bench gen fm_interaction --preset {ci,small,full} --out DIR``. Name the file with the
environment variable ``DLRM_BENCH_INPUTS``. The file is safetensors holding:

    x  F32  [B, F, K]

The tensor is moved to CUDA when a CUDA device is available.
"""

import os

import torch
import torch.nn as nn

INPUTS_ENV = "DLRM_BENCH_INPUTS"
PROBLEM = "fm_interaction"
INPUT_NAMES = ("x",)


class _Eager(nn.Module):
    """DeepFM's FM second-order term (PyTorch eager)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        square_of_sum = torch.sum(x, dim=1).pow(2)  # [B, K]
        sum_of_square = torch.sum(x.pow(2), dim=1)  # [B, K]
        return 0.5 * torch.sum(square_of_sum - sum_of_square, dim=1)  # [B]


def load_inputs(path, device=None):
    """Load one input set written by `dlrm-bench gen` and return [x]."""
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
    x = tensors["x"]
    if x.dtype != torch.float32 or x.dim() != 3:
        raise ValueError(f"{PROBLEM}: x must be float32 [B, F, K], got {x.dtype} {list(x.shape)}")
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return [x.contiguous().to(device)]


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

__global__ void copy_bytes_p12v3(const unsigned char* __restrict__ src,
                                  unsigned char* __restrict__ dst, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (; i < n; i += stride) dst[i] = src[i];
}

torch::Tensor copy_p12v3(torch::Tensor t) {
    auto c = t.contiguous();
    auto out = torch::empty_like(c);
    const long long n = (long long)c.numel() * (long long)c.element_size();
    if (n > 0) {
        const int threads = 1024;
        const long long want = (n + threads - 1) / threads;
        const int blocks = (int)(want < 65536 ? want : 65536);
        copy_bytes_p12v3<<<blocks, threads>>>((const unsigned char*)c.data_ptr(),
                                              (unsigned char*)out.data_ptr(), n);
    }
    return out;
}
"""

_ext = load_inline(
    name="dlrm_throughput_p12v3",
    cpp_sources="torch::Tensor copy_p12v3(torch::Tensor t);",
    cuda_sources=_CUDA,
    functions=["copy_p12v3"],
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
            return tuple(_ext.copy_p12v3(o) if torch.is_tensor(o) else o for o in out)
        return _ext.copy_p12v3(out)
