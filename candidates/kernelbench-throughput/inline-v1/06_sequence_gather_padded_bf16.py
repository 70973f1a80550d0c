"""Throughput answer p06v1 (sequence_gather_padded_bf16): written by tools/inline_set.py."""

"""DLRM-Bench problem 6, `sequence_gather_padded_bf16`, in KernelBench format.

Problem
-------
Jagged sequences of table rows to a padded tensor (a user-history feature before attention):

    weight  [E, D]    bfloat16  the table (D a multiple of 8: rows of whole 16-byte vectors)
    indices [N]       int64     row ids of all sequences, one sequence after the other
    lengths [B]       int64     ids per sequence; sequence b starts at lengths[:b].sum()
    max_len           int       L, the padded length
    out     [B, L, D] bfloat16  out[b, j] = weight[indices[start_b + j]] for j < min(lengths[b], L),
                                zeros elsewhere (sequences longer than L are cut)

A gather copies bits, so the result is checked exactly. The ``full`` preset is E = 16M, D = 256
(an 8 GiB table), B = 2048, L = 256, heavy-tailed lengths (log-normal, mean L/4, up to 4L),
Zipf(1.15) ids.

The eager ``Model`` below is what the Rust reference mirrors launch for launch: cumsum, sub,
arange, >=, +, masked_fill_, indexing, F.embedding (ATen's vectorized row gather) and the final
masked_fill_.

Inputs
------
``get_inputs()`` loads the exact tensors written by ``dlrm-bench gen sequence_gather_padded_bf16
--preset {ci,small,full} --out DIR`` (set ``DLRM_BENCH_INPUTS`` to the file); ``max_len`` comes
from the file's ``sizes`` metadata (``L``).
"""

import json
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

INPUTS_ENV = "DLRM_BENCH_INPUTS"
PROBLEM = "sequence_gather_padded_bf16"
INPUT_NAMES = ("weight", "indices", "lengths")


class _Eager(nn.Module):
    """Jagged sequences to a padded [B, L, D] bf16 tensor (PyTorch eager)."""

    def __init__(self):
        super().__init__()

    def forward(self, weight: torch.Tensor, indices: torch.Tensor, lengths: torch.Tensor,
                max_len: int) -> torch.Tensor:
        starts = torch.cumsum(lengths, 0) - lengths
        pos = torch.arange(max_len, device=lengths.device)
        pad = pos >= lengths.unsqueeze(1)
        src = (starts.unsqueeze(1) + pos).masked_fill_(pad, 0)
        rows = indices[src]
        out = F.embedding(rows, weight)
        return out.masked_fill_(pad.unsqueeze(-1), 0.0)


def _sizes(path):
    from safetensors import safe_open

    with safe_open(path, framework="pt") as f:
        meta = f.metadata() or {}
    if "sizes" not in meta:
        raise KeyError(f"{PROBLEM}: {path!r} has no `sizes` metadata; write it with dlrm-bench gen")
    return json.loads(meta["sizes"])


def load_inputs(path, device=None):
    """Load one input set written by `dlrm-bench gen`: [weight, indices, lengths, max_len]."""
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
    weight, indices, lengths = (tensors[n] for n in INPUT_NAMES)
    max_len = int(_sizes(path)["L"])
    if weight.dtype != torch.bfloat16 or weight.dim() != 2 or weight.shape[1] % 8 != 0:
        raise ValueError(f"{PROBLEM}: weight must be bfloat16 [E, D] with D % 8 == 0, got "
                         f"{weight.dtype} {list(weight.shape)}")
    if indices.dtype != torch.int64 or indices.dim() != 1 or indices.numel() < 1:
        raise ValueError(f"{PROBLEM}: indices must be int64 [N], N >= 1")
    if lengths.dtype != torch.int64 or lengths.dim() != 1:
        raise ValueError(f"{PROBLEM}: lengths must be int64 [B]")
    if int(lengths.sum()) != indices.numel():
        raise ValueError(f"{PROBLEM}: lengths sum to {int(lengths.sum())}, indices hold "
                         f"{indices.numel()}")
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return [t.contiguous().to(device) for t in (weight, indices, lengths)] + [max_len]


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

__global__ void copy_bytes_p06v1(const unsigned char* __restrict__ src,
                                  unsigned char* __restrict__ dst, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (; i < n; i += stride) dst[i] = src[i];
}

torch::Tensor copy_p06v1(torch::Tensor t) {
    auto c = t.contiguous();
    auto out = torch::empty_like(c);
    const long long n = (long long)c.numel() * (long long)c.element_size();
    if (n > 0) {
        const int threads = 256;
        const long long want = (n + threads - 1) / threads;
        const int blocks = (int)(want < 65536 ? want : 65536);
        copy_bytes_p06v1<<<blocks, threads>>>((const unsigned char*)c.data_ptr(),
                                              (unsigned char*)out.data_ptr(), n);
    }
    return out;
}
"""

_ext = load_inline(
    name="dlrm_throughput_p06v1",
    cpp_sources="torch::Tensor copy_p06v1(torch::Tensor t);",
    cuda_sources=_CUDA,
    functions=["copy_p06v1"],
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
            return tuple(_ext.copy_p06v1(o) if torch.is_tensor(o) else o for o in out)
        return _ext.copy_p06v1(out)
