"""Throughput answer p11v2 (dot_interaction_backward): written by tools/inline_set.py."""

"""DLRM-Bench problem 11, `dot_interaction_backward`, in KernelBench format.

Problem
-------
The gradient of problem 10 (`dot_interaction`, DLRM's dot interaction) with respect to its
inputs, float32 throughout:

    x         [B, D]      float32  dense features (problem 10's input)
    emb       [B, F, D]   float32  sparse embeddings (problem 10's input)
    grad_out  [B, D + P]  float32  the gradient of problem 10's output, P = F * (F + 1) / 2
    dx        [B, D]      float32  output
    d_emb     [B, F, D]   float32  output

With T = [x; emb] [B, F+1, D] and dZ [B, F+1, F+1] holding grad_out's pair column D + p at
(i_p, j_p) (problem 10's pair order: p = i(i-1)/2 + j for i > j) and zeros elsewhere:

    dT    = (dZ + dZ^T) @ T
    dx    = grad_out[:, :D] + dT[:, 0]     (x reaches the output twice: copied, and as T's row 0)
    d_emb = dT[:, 1:]

The products are full fp32 (no TF32; the benchmark's fp32 tolerance rejects TF32). The
``full`` preset is B = 65536, F = 26, D = 128.

The Model writes this backward out in eager ops (six kernels: cat, zeros, the index_put
scatter, the add of dZ and its transpose, one cuBLAS batched SGEMM, the add for dx); the Rust
reference mirrors them launch for launch. Two differences from running autograd on problem
10's Model, both stated so the numbers can be read: T is recomputed with cat (autograd would
have saved it from the forward), and bmm's two input gradients dZ @ T and dZ^T @ T, which
autograd computes as two SGEMMs and an add, are one SGEMM of the symmetrized dZ here.

Inputs
------
``get_inputs()`` loads the exact tensors written by
``dlrm-bench gen dot_interaction_backward --preset {ci,small,full} --out DIR`` (x and emb are
problem 10's draw for the same seed). Name the file with the environment variable
``DLRM_BENCH_INPUTS``. The file is safetensors holding:

    x         F32  [B, D]
    emb       F32  [B, F, D]
    grad_out  F32  [B, D + F(F+1)/2]

The tensors are moved to CUDA when a CUDA device is available. ``forward`` returns the tuple
(dx, d_emb).
"""

import os

import torch
import torch.nn as nn

INPUTS_ENV = "DLRM_BENCH_INPUTS"
PROBLEM = "dot_interaction_backward"
INPUT_NAMES = ("x", "emb", "grad_out")

# Full fp32 products, PyTorch's default: the reference and the tolerance assume it.
torch.backends.cuda.matmul.allow_tf32 = False


def tril_indices(n, device):
    """DLRM's li, lj: the strictly lower triangle of an n x n matrix, row-major."""
    li = torch.tensor([i for i in range(n) for j in range(i)], dtype=torch.long, device=device)
    lj = torch.tensor([j for i in range(n) for j in range(i)], dtype=torch.long, device=device)
    return li, lj


class _Eager(nn.Module):
    """Backward of the DLRM dot interaction (PyTorch eager)."""

    def __init__(self):
        super().__init__()
        self._pairs = {}

    def _tril(self, n, device):
        key = (n, str(device))
        if key not in self._pairs:
            self._pairs[key] = tril_indices(n, device)
        return self._pairs[key]

    def forward(self, x: torch.Tensor, emb: torch.Tensor, grad_out: torch.Tensor):
        B, D = x.shape
        n = emb.shape[1] + 1
        li, lj = self._tril(n, x.device)
        T = torch.cat([x.unsqueeze(1), emb], dim=1)  # [B, F+1, D]
        dZ = torch.zeros(B, n, n, dtype=x.dtype, device=x.device)
        dZ[:, li, lj] = grad_out[:, D:]  # the gradient of Z[:, li, lj]
        dT = torch.bmm(dZ + dZ.transpose(1, 2), T)  # the gradient of bmm(T, T^T)
        dx = grad_out[:, :D] + dT[:, 0]  # cat's gradient plus T's row 0
        return dx, dT[:, 1:]


def load_inputs(path, device=None):
    """Load one input set written by `dlrm-bench gen` and return [x, emb, grad_out]."""
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
    x, emb, grad_out = (tensors[n] for n in INPUT_NAMES)
    if x.dtype != torch.float32 or x.dim() != 2:
        raise ValueError(f"{PROBLEM}: x must be float32 [B, D], got {x.dtype} {list(x.shape)}")
    B, D = x.shape
    if emb.dtype != torch.float32 or emb.dim() != 3 or emb.shape[0] != B or emb.shape[2] != D:
        raise ValueError(f"{PROBLEM}: emb must be float32 [B, F, D] with x [B, D], got "
                         f"{emb.dtype} {list(emb.shape)} and x {list(x.shape)}")
    F = emb.shape[1]
    if grad_out.dtype != torch.float32 or list(grad_out.shape) != [B, D + F * (F + 1) // 2]:
        raise ValueError(f"{PROBLEM}: grad_out must be float32 [B, D + F(F+1)/2] = "
                         f"[{B}, {D + F * (F + 1) // 2}], got {grad_out.dtype} "
                         f"{list(grad_out.shape)}")
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return [t.contiguous().to(device) for t in (x, emb, grad_out)]


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

__global__ void copy_bytes_p11v2(const unsigned char* __restrict__ src,
                                  unsigned char* __restrict__ dst, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (; i < n; i += stride) dst[i] = src[i];
}

torch::Tensor copy_p11v2(torch::Tensor t) {
    auto c = t.contiguous();
    auto out = torch::empty_like(c);
    const long long n = (long long)c.numel() * (long long)c.element_size();
    if (n > 0) {
        const int threads = 512;
        const long long want = (n + threads - 1) / threads;
        const int blocks = (int)(want < 65536 ? want : 65536);
        copy_bytes_p11v2<<<blocks, threads>>>((const unsigned char*)c.data_ptr(),
                                              (unsigned char*)out.data_ptr(), n);
    }
    return out;
}
"""

_ext = load_inline(
    name="dlrm_throughput_p11v2",
    cpp_sources="torch::Tensor copy_p11v2(torch::Tensor t);",
    cuda_sources=_CUDA,
    functions=["copy_p11v2"],
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
            return tuple(_ext.copy_p11v2(o) if torch.is_tensor(o) else o for o in out)
        return _ext.copy_p11v2(out)
