#!/usr/bin/env python3
"""Time PyTorch eager on the exact inputs written by `dlrm-bench gen`.

The peer is the yardstick the Rust reference kernels are held to (docs/design.md §4: the
reference must stay within +-10% of the KernelBench `Model` in eager PyTorch on identical
inputs). Timing follows docs/design.md §7: CUDA events around each `Model` forward call
only, after warm-up; L2 flushed before each timed call (a 256 MiB buffer zeroed, unless
--warm-l2); input sets rotated per iteration (set i % len(sets)). The record also holds
`stages_s`: the seconds spent loading, checking and timing. With --compile (a request's
"compile": true) the Model runs under torch.compile (inductor, default mode) instead: compiled
and warmed up on every set first (`stages_s.compile`, not timed), then checked and timed the
same way; the record's `impl` says which (`pytorch_eager` or `pytorch_compile`), and a Model
that fails to compile gives a record with `error` instead of times.

Example:
    target/release/dlrm-bench gen embedding_bag_sum --preset full --sets 2 --out inputs/
    python3 tools/torch_peer.py --problem embedding_bag_sum \
        --inputs inputs/embedding_bag_sum.full.set0.safetensors \
                 inputs/embedding_bag_sum.full.set1.safetensors --out peer.jsonl

Serve mode (`dlrm-bench run --torch` keeps one for the whole run): `--serve` imports torch
once, then reads one JSON request per line of stdin, e.g.
    {"problem": "embedding_bag_sum", "inputs": ["a.safetensors"], "out": "peer.jsonl",
     "check": true, "iters": 50, "warmup": 5, "warm_l2": false, "compile": false}
(`problem` and `inputs` required; the rest default as the options above), evaluates it as the
one-shot mode does (the same record, appended to `out` when given) and answers with exactly
one JSON line on stdout: {"ok": true, "record": {...}} or {"ok": false, "error": "..."}. A
failing request is an error answer, never the server's end. stdout carries the answers only;
every log line goes to stderr. EOF on stdin ends the server (exit 0); so does a broken CUDA
context, after its answer (exit 1). JSON has no infinity: a non-finite number in a record is
written as a string ("inf").

Needs torch, safetensors and numpy only (imported lazily: --help works without them). Exit
status: 0 ok; 2 no CUDA device (or torch not importable), and also argparse's usage errors (a
missing --inputs file among them); 1 for a missing or broken KernelBench file; any other failure
raises with a traceback.
"""

import argparse
import gc
import glob
import importlib.util
import json
import math
import os
import statistics
import sys
import time
import traceback

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNELBENCH_DIR = os.path.join(REPO_ROOT, "bench-problems", "kernelbench")
L2_FLUSH_BYTES = 256 << 20


def log(msg):
    """One line for a human: on stdout in the one-shot mode, on stderr in --serve (which points
    sys.stdout at stderr)."""
    print(msg, flush=True)


# ---------------------------------------------------------------------------------------
# Problems. Each entry: how many bytes one call moves (FBGEMM's logical count: every lookup
# counted) and an independent float64 oracle. The KernelBench file is found by glob on
# bench-problems/kernelbench/*_{problem}.py. A new problem is one entry here. Optional keys:
# "inout", positions of inputs the Model updates in place (restored to their initial values
# before every call, outside the timed region), and "error", a function (outputs, initial
# inputs) -> error used by --check instead of rel_l2 against "oracle_f64".
# ---------------------------------------------------------------------------------------

def _ebs_logical_bytes(inputs):
    weight, indices, offsets = inputs
    n = indices.numel()
    d = weight.shape[1]
    b = offsets.numel() - 1
    return n * d * 4 + b * d * 4 + n * 8 + (b + 1) * 8


def _ebs_oracle_f64(inputs):
    """out[b] = sum of weight[indices[j]] over the bag, in float64, without embedding_bag."""
    import torch

    weight, indices, offsets = inputs
    b = offsets.numel() - 1
    d = weight.shape[1]
    dev = weight.device
    lengths = offsets[1:] - offsets[:-1]
    bag_of = torch.repeat_interleave(torch.arange(b, device=dev), lengths)
    out = torch.zeros((b, d), dtype=torch.float64, device=dev)
    chunk = 1 << 20  # bounds the float64 gather to chunk * D * 8 bytes
    for s in range(0, indices.numel(), chunk):
        rows = weight.index_select(0, indices[s:s + chunk]).to(torch.float64)
        out.index_add_(0, bag_of[s:s + chunk], rows)
    return out


def _dot_pairs(n, device):
    """The strictly lower triangle of an n x n matrix in row-major order (DLRM's pair order),
    from torch.tril_indices rather than the Model's own lists."""
    import torch

    rows, cols = torch.tril_indices(n, n, offset=-1, device=device)
    return rows, cols


def _dot_logical_bytes(inputs):
    x, emb = inputs
    b, d = x.shape
    f = emb.shape[1]
    return 4 * (b * d + b * f * d + b * (d + f * (f + 1) // 2))


def _dot_oracle_f64(inputs):
    """cat(x, strictly lower triangle of T T^T) in float64, T = [x; emb], pairs as elementwise
    products summed (no matmul), in chunks of samples (a [chunk, P, D] float64 temporary)."""
    import torch

    x, emb = inputs
    out = torch.empty((x.shape[0], x.shape[1] + emb.shape[1] * (emb.shape[1] + 1) // 2),
                      dtype=torch.float64, device=x.device)
    rows, cols = _dot_pairs(emb.shape[1] + 1, x.device)
    chunk = 4096
    for s in range(0, x.shape[0], chunk):
        t = torch.cat([x[s:s + chunk, None, :], emb[s:s + chunk]], dim=1).to(torch.float64)
        pairs = (t[:, rows, :] * t[:, cols, :]).sum(dim=2)  # [chunk, P]
        out[s:s + chunk] = torch.cat([t[:, 0, :], pairs], dim=1)
    return out


def _dot_bwd_logical_bytes(inputs):
    x, emb, grad_out = inputs
    b, d = x.shape
    f = emb.shape[1]
    return 4 * (2 * b * d + 2 * b * f * d + grad_out.numel())


def _dot_bwd_oracle_f64(inputs):
    """(dx, d_emb) by float64 autograd through an independent forward (the Model writes its
    backward out by hand, so autograd is the independent check), in chunks of samples."""
    import torch

    x, emb, grad_out = inputs
    chunk = 4096
    # Outside inference mode (the caller's): autograd needs normal tensors, the index lists
    # (saved for backward) included.
    with torch.inference_mode(False), torch.enable_grad():
        rows, cols = _dot_pairs(emb.shape[1] + 1, x.device)
        dx = torch.empty(x.shape, dtype=torch.float64, device=x.device)
        d_emb = torch.empty(emb.shape, dtype=torch.float64, device=x.device)
        for s in range(0, x.shape[0], chunk):
            x64 = x[s:s + chunk].detach().to(torch.float64).requires_grad_()
            e64 = emb[s:s + chunk].detach().to(torch.float64).requires_grad_()
            t = torch.cat([x64[:, None, :], e64], dim=1)
            out = torch.cat([x64, (t[:, rows, :] * t[:, cols, :]).sum(dim=2)], dim=1)
            g = grad_out[s:s + chunk].detach().to(torch.float64)
            gx, ge = torch.autograd.grad(out, (x64, e64), g)
            dx[s:s + chunk] = gx
            d_emb[s:s + chunk] = ge
    return dx, d_emb


def _fm_logical_bytes(inputs):
    (x,) = inputs
    return 4 * (x.numel() + x.shape[0])


def _fm_oracle_f64(inputs):
    """Sum over field pairs f < g of <x_f, x_g> in float64 (the definition, not the Model's
    square-of-sum formula), in chunks of samples."""
    import torch

    (x,) = inputs
    out = torch.empty(x.shape[0], dtype=torch.float64, device=x.device)
    chunk = 1 << 16
    for s in range(0, x.shape[0], chunk):
        xc = x[s:s + chunk].to(torch.float64)
        g = torch.bmm(xc, xc.transpose(1, 2))  # [c, F, F] Gram matrices
        out[s:s + chunk] = (g.sum(dim=(1, 2)) - g.diagonal(dim1=1, dim2=2).sum(dim=1)) / 2
    return out


def _bag_of(offsets):
    """The bag of every lookup, from CSR offsets [B+1]."""
    import torch

    lengths = offsets[1:] - offsets[:-1]
    return torch.repeat_interleave(
        torch.arange(offsets.numel() - 1, device=offsets.device), lengths
    )


def _ebw_logical_bytes(inputs):
    weight, indices, offsets, _ = inputs
    n, d, b = indices.numel(), weight.shape[1], offsets.numel() - 1
    return n * d * 2 + n * 2 + n * 8 + (b + 1) * 8 + b * d * 2


def _ebw_oracle_f64(inputs):
    """out[b] = sum of per_sample_weights[j] * weight[indices[j]] over the bag, in float64."""
    import torch

    weight, indices, offsets, psw = inputs
    bag_of = _bag_of(offsets)
    out = torch.zeros((offsets.numel() - 1, weight.shape[1]), dtype=torch.float64,
                      device=weight.device)
    chunk = 1 << 20
    for s in range(0, indices.numel(), chunk):
        rows = weight.index_select(0, indices[s:s + chunk]).to(torch.float64)
        rows *= psw[s:s + chunk].to(torch.float64)[:, None]
        out.index_add_(0, bag_of[s:s + chunk], rows)
    return out


def _tbe_logical_bytes(inputs):
    weight, table_offsets, indices, offsets = inputs
    t = table_offsets.numel() - 1
    b = (offsets.numel() - 1) // t
    n, d = indices.numel(), weight.shape[1]
    return n * d * 2 + n * 8 + (t * b + 1) * 8 + (t + 1) * 8 + b * t * d * 4


def _tbe_oracle_f64(inputs):
    """out[b, t*D:(t+1)*D] = sum of the global rows table_offsets[t] + idx over bag (t, b), in
    float64, all tables at once (no per-table loop)."""
    import torch

    weight, table_offsets, indices, offsets = inputs
    t = table_offsets.numel() - 1
    b = (offsets.numel() - 1) // t
    d = weight.shape[1]
    k = _bag_of(offsets)  # table-major bag id t * B + b of every lookup
    table, sample = k // b, k % b
    rows = indices + table_offsets[table]
    out = torch.zeros((b * t, d), dtype=torch.float64, device=weight.device)
    target = sample * t + table  # row of out viewed as [B * T, D]
    chunk = 1 << 20
    for s in range(0, indices.numel(), chunk):
        out.index_add_(0, target[s:s + chunk],
                       weight.index_select(0, rows[s:s + chunk]).to(torch.float64))
    return out.view(b, t * d)


def _int8_logical_bytes(inputs):
    weight, indices, offsets = inputs
    n, row, b = indices.numel(), weight.shape[1], offsets.numel() - 1
    return n * row + n * 8 + (b + 1) * 8 + b * (row - 8) * 4


def _int8_oracle_f64(inputs):
    """Each looked-up row dequantized in float64 (q * scale + bias, scale and bias read from the
    row's last 8 bytes), summed per bag."""
    import torch

    weight, indices, offsets = inputs
    d = weight.shape[1] - 8
    scale = weight[:, d:d + 4].contiguous().view(torch.float32).to(torch.float64)
    bias = weight[:, d + 4:].contiguous().view(torch.float32).to(torch.float64)
    bag_of = _bag_of(offsets)
    out = torch.zeros((offsets.numel() - 1, d), dtype=torch.float64, device=weight.device)
    chunk = 1 << 20
    for s in range(0, indices.numel(), chunk):
        idx = indices[s:s + chunk]
        q = weight.index_select(0, idx)[:, :d].to(torch.float64)
        out.index_add_(0, bag_of[s:s + chunk], q * scale[idx] + bias[idx])
    return out


def _adagrad_logical_bytes(inputs):
    grad_output, indices, offsets = inputs[:3]
    n = indices.numel()
    b, d = grad_output.shape
    return 2 * (n * d * 4 + b * d * 4) + n * 8 + (b + 1) * 8


def _adagrad_error(out, inputs):
    """The step's error: the worst relative L2 error of the updates (new - initial) of the
    looked-up rows, weight and momentum, against float64; infinite if any other row changed
    (those must stay bit-identical). `inputs` holds the initial weight and momentum."""
    import torch

    grad_output, indices, offsets, weight0, momentum0, lr, eps = inputs
    weight, momentum = out
    lr = float(torch.tensor(lr, dtype=torch.float32))  # as the float32 kernels see them
    eps = float(torch.tensor(eps, dtype=torch.float32))
    bag_of = _bag_of(offsets)
    rows, inverse = torch.unique(indices, return_inverse=True)
    g = torch.zeros((rows.numel(), grad_output.shape[1]), dtype=torch.float64,
                    device=grad_output.device)
    chunk = 1 << 20
    for s in range(0, indices.numel(), chunk):
        g.index_add_(0, inverse[s:s + chunk],
                     grad_output.index_select(0, bag_of[s:s + chunk]).to(torch.float64))
    dm = g.square().mean(dim=1)
    dw = -lr * g / ((momentum0[rows].to(torch.float64) + dm).sqrt() + eps)[:, None]
    untouched = torch.ones(momentum0.numel(), dtype=torch.bool, device=momentum0.device)
    untouched[rows] = False
    changed = ((weight.view(torch.int32) != weight0.view(torch.int32)).any(dim=1)
               | (momentum.view(torch.int32) != momentum0.view(torch.int32))) & untouched
    if bool(changed.any()):
        return float("inf")
    return max(
        rel_l2(weight[rows].to(torch.float64) - weight0[rows].to(torch.float64), dw),
        rel_l2(momentum[rows].to(torch.float64) - momentum0[rows].to(torch.float64), dm),
    )


# Sparse-lookup problems 6-9: integer (or copied) outputs, so "error" is the share of output
# elements that differ from an independent computation (0.0 when exact).


def _mismatch(pairs):
    """Share of elements that differ over (output, reference) pairs; shape mismatch counts 1."""
    bad, total = 0, 0
    for out, ref in pairs:
        ref = ref.to(out.device)
        if out.shape != ref.shape:
            return 1.0
        bad += int((out != ref).sum().item())
        total += out.numel()
    return bad / max(total, 1)


def _mismatch_all(outs, refs):
    """_mismatch over every output: fewer or more outputs than the reference's count as 1."""
    outs = tuple(outs) if isinstance(outs, (tuple, list)) else (outs,)
    if len(outs) != len(refs):
        return 1.0
    return _mismatch(zip(outs, refs))


def _seq_logical_bytes(inputs):
    weight, indices, lengths, max_len = inputs
    b, d = lengths.numel(), weight.shape[1]
    kept = int(lengths.clamp(max=max_len).sum())
    return kept * d * 2 + b * max_len * d * 2 + kept * 8 + b * 8


def _seq_error(out, inputs):
    """Scatter the kept rows into zeros, without the Model's padded-index construction."""
    import torch

    weight, indices, lengths, max_len = inputs
    b, dev = lengths.numel(), lengths.device
    kept = lengths.clamp(max=max_len)
    seq = torch.repeat_interleave(torch.arange(b, device=dev), kept)
    first = torch.cumsum(kept, 0) - kept
    pos = torch.arange(int(kept.sum()), device=dev) - first[seq]
    starts = torch.cumsum(lengths, 0) - lengths
    ref = torch.zeros((b, max_len, weight.shape[1]), dtype=weight.dtype, device=dev)
    ref[seq, pos] = weight[indices[starts[seq] + pos]]
    return _mismatch([(out, ref)])


def _kjt_logical_bytes(inputs):
    permute, lengths, values, weights, total = inputs
    t, b = lengths.shape
    return 2 * total * 12 + permute.numel() * b * 4 + t * b * 4 + permute.numel() * 8


def _kjt_error(out, inputs):
    """Split the values by feature on the host and concatenate the selected ones."""
    import torch

    permute, lengths, values, weights, total = inputs
    per_feature = lengths.sum(1).tolist()
    vals, wts = torch.split(values, per_feature), torch.split(weights, per_feature)
    order = permute.tolist()
    ref = (lengths[permute], torch.cat([vals[p] for p in order]),
           torch.cat([wts[p] for p in order]))
    return _mismatch_all(out, ref)


def _bucketize_logical_bytes(inputs):
    lengths, indices, weights, block_sizes, world_size = inputs
    t, b = lengths.shape
    n = indices.numel()
    return t * b * 4 + n * 12 + t * 8 + world_size * t * b * 4 + n * 12 + n * 8


def _bucketize_error(out, inputs):
    """FBGEMM's rule element by element, then a stable sort on the (rank, feature, sample) key
    (the Model sorts by rank alone), lengths by index_add_ (the Model uses bincount)."""
    import torch

    lengths, indices, weights, block_sizes, w = inputs
    t, b = lengths.shape
    n, dev = indices.numel(), indices.device
    seg = torch.repeat_interleave(torch.arange(t * b, device=dev), lengths.view(-1).long())
    s = block_sizes[seg // b]
    below = indices < w * s
    rank = torch.where(below, torch.div(indices, s, rounding_mode="floor"), indices % w)
    new_id = torch.where(below, indices - rank * s, torch.div(indices, w, rounding_mode="floor"))
    key = rank * (t * b) + seg
    new_lengths = torch.zeros(w * t * b, dtype=torch.int64, device=dev)
    new_lengths.index_add_(0, key, torch.ones_like(key))
    order = torch.sort(key, stable=True).indices
    back = torch.empty_like(order)
    back[order] = torch.arange(n, device=dev)
    ref = (new_lengths.to(lengths.dtype).view(w, t, b), new_id[order], weights[order], back)
    return _mismatch_all(out, ref)


def _unique_logical_bytes(inputs):
    import torch

    (indices,) = inputs
    u = torch.unique(indices).numel()
    return indices.numel() * 16 + 2 * u * 8


# numpy's answers, per input tensor (held, so its id is not reused): only an output that fails
# the proof below needs one, and np.unique of 10 M indices takes about 2 s on the host. Cleared
# after each request of the peer server; an evaluator job's process ends with its answer.
_UNIQUE_REFS = {}


def _unique_proven(out, indices):
    """Whether `out` is exactly torch.unique(indices, sorted, inverse, counts), proven on the
    device without computing a unique: `unique` strictly increasing, every id found at its
    inverse (`unique[inverse] == indices`: each id is in `unique`), `counts` the histogram of
    `inverse` and none 0 (each entry of `unique` is some id). Those fix all three outputs.
    Milliseconds where numpy's unique takes seconds; any doubt (a shape, a dtype, an exception)
    is False, and the caller measures the mismatch against numpy."""
    import torch

    try:
        # Exactly a tuple or list, read once (a subclass's __iter__ could give other tensors
        # each time it is read).
        if type(out) not in (tuple, list) or len(out) != 3:
            return False
        out = tuple(out)
        u, inv, cnt = out
        # Plain tensors without attributes of their own (a subclass, or an instance attribute
        # such as `reshape`, could answer the tests below as it likes), used through torch's
        # functions rather than their methods.
        if any(type(t) is not torch.Tensor or vars(t) or t.dtype != torch.int64
               or t.device != indices.device for t in out):
            return False
        if u.ndim != 1 or cnt.shape != u.shape or inv.shape != indices.shape:
            return False
        n, k = indices.numel(), torch.numel(u)
        if n == 0 or k == 0:
            return n == 0 and k == 0
        inv = torch.reshape(inv, (-1,))
        if k > 1 and not bool(torch.all(u[1:] > u[:-1])):
            return False
        if int(torch.min(inv)) < 0 or int(torch.max(inv)) >= k:
            return False
        if not torch.equal(u[inv], indices.reshape(-1)):
            return False
        return bool(torch.all(cnt > 0)) and torch.equal(torch.bincount(inv, minlength=k), cnt)
    except Exception:  # noqa: BLE001 - e.g. a tensor the ops refuse: measured the slow way
        return False


def _unique_error(out, inputs):
    """0 for an output proven exact on the device (`_unique_proven`); else the share of
    mismatched elements against numpy's unique on the host, once per input tensor (the
    evaluator checks against pristine copies of the inputs, which nothing writes)."""
    import numpy as np
    import torch

    (indices,) = inputs
    if _unique_proven(out, indices):
        return 0.0
    held = _UNIQUE_REFS.get(id(indices))
    if held is None or held[0] is not indices:
        u, inv, cnt = np.unique(indices.cpu().numpy(), return_inverse=True, return_counts=True)
        ref = tuple(torch.from_numpy(a).to(indices.device)
                    for a in (u, inv.reshape(-1).astype(np.int64), cnt.astype(np.int64)))
        held = _UNIQUE_REFS[id(indices)] = (indices, ref)
    return _mismatch_all(out, held[1])


PROBLEMS = {
    "embedding_bag_sum": {
        "logical_bytes": _ebs_logical_bytes,
        "oracle_f64": _ebs_oracle_f64,
    },
    "embedding_bag_weighted_sum_bf16": {
        "logical_bytes": _ebw_logical_bytes,
        "oracle_f64": _ebw_oracle_f64,
    },
    "tbe_forward_fp16": {
        "logical_bytes": _tbe_logical_bytes,
        "oracle_f64": _tbe_oracle_f64,
    },
    "embedding_bag_int8_rowwise": {
        "logical_bytes": _int8_logical_bytes,
        "oracle_f64": _int8_oracle_f64,
    },
    "embedding_backward_rowwise_adagrad": {
        "logical_bytes": _adagrad_logical_bytes,
        # In place: inputs 3 and 4 (weight, momentum) are restored before every call, outside
        # the timed region; the check compares the step's updates.
        "inout": (3, 4),
        "error": _adagrad_error,
    },
    "dot_interaction": {
        "logical_bytes": _dot_logical_bytes,
        "oracle_f64": _dot_oracle_f64,
    },
    "dot_interaction_backward": {
        "logical_bytes": _dot_bwd_logical_bytes,
        "oracle_f64": _dot_bwd_oracle_f64,
    },
    "fm_interaction": {
        "logical_bytes": _fm_logical_bytes,
        "oracle_f64": _fm_oracle_f64,
    },
    "sequence_gather_padded_bf16": {
        "logical_bytes": _seq_logical_bytes,
        "error": _seq_error,
    },
    "kjt_permute": {
        "logical_bytes": _kjt_logical_bytes,
        "error": _kjt_error,
    },
    "block_bucketize_sparse_features": {
        "logical_bytes": _bucketize_logical_bytes,
        "error": _bucketize_error,
    },
    "unique_indices": {
        "logical_bytes": _unique_logical_bytes,
        "error": _unique_error,
    },
}


class PeerError(Exception):
    """A request the peer cannot evaluate, with the one-shot mode's exit status: 2 for a bad
    request or no torch / CUDA, 1 for a missing or broken KernelBench file."""

    def __init__(self, message, status=1):
        super().__init__(message)
        self.status = status


def find_kernelbench_file(problem):
    matches = sorted(glob.glob(os.path.join(KERNELBENCH_DIR, f"*_{problem}.py")))
    if len(matches) != 1:
        raise PeerError(
            f"torch_peer: expected one KernelBench file {KERNELBENCH_DIR}/*_{problem}.py, "
            f"found {len(matches)}: {matches}"
        )
    return matches[0]


def import_kernelbench(path, problem):
    spec = importlib.util.spec_from_file_location(f"dlrm_bench_kb_{problem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(mod, name):
            raise PeerError(f"torch_peer: {path} has no `{name}`")
    return mod


def import_torch_cuda():
    """torch, once CUDA is usable (the first call imports torch and initialises CUDA; later
    calls cost nothing). PeerError (status 2) without torch or a CUDA device."""
    try:
        import torch
    except ImportError as e:
        raise PeerError(f"torch_peer: PyTorch is not importable ({e}); run this on a GPU host "
                        "with torch", status=2) from e
    if not torch.cuda.is_available():
        raise PeerError("torch_peer: no CUDA device visible to PyTorch; the peer times GPU "
                        "kernels only (run it on a GPU host)", status=2)
    torch.cuda.init()
    return torch


def shared_files(path):
    """Files holding tensors the set at `path` shares with other sets (a table), from its
    `shared` metadata: the run's input cache stores each shared tensor once, beside the sets
    (`dlrm-bench run --torch`); a file from `dlrm-bench gen` has none."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    shared = json.loads(header.get("__metadata__", {}).get("shared", "{}"))
    return {name: os.path.join(os.path.dirname(path), file) for name, file in shared.items()}


def load_set(mod, path, shared_on_device):
    """Load one input set through the KernelBench file (its load_inputs, else get_inputs).
    Tensors the set shares (see shared_files) are merged into what the file's
    safetensors.torch.load_file returns, so KernelBench files stay single-file readers.

    `shared_on_device` maps (shared file, tensor name) to that tensor on the GPU and is filled
    on first use: each shared file is read and copied to the device once per request, and every
    set gets that same tensor (a load_inputs's `t.contiguous().to(device)` returns a tensor
    that is already contiguous and on the device itself). A set that got its own copy anyway is
    logged."""
    shared = shared_files(path)
    if not shared:
        return load_set_file(mod, path)
    import safetensors.torch as st

    original = st.load_file

    def shared_tensor(name, file):
        key = (os.path.abspath(file), name)
        if key not in shared_on_device:
            shared_on_device[key] = original(file)[name].contiguous().to("cuda")
        return shared_on_device[key]

    def load_with_shared(p, *args, **kwargs):
        tensors = original(p, *args, **kwargs)
        if os.path.abspath(p) == os.path.abspath(path):
            for name, file in shared.items():
                tensors[name] = shared_tensor(name, file)
        return tensors

    st.load_file = load_with_shared
    try:
        inputs = load_set_file(mod, path)
    finally:
        st.load_file = original
    for name, file in shared.items():
        one = shared_on_device.get((os.path.abspath(file), name))
        if one is not None and not any(t is one for t in inputs):
            log(f"  note: {os.path.basename(path)}'s inputs do not hold the one device copy of "
                f"shared tensor `{name}` ({os.path.basename(file)}): its load_inputs copied it")
    return inputs


def load_set_file(mod, path):
    if hasattr(mod, "load_inputs"):
        return list(mod.load_inputs(path, device="cuda"))
    old = os.environ.get("DLRM_BENCH_INPUTS")
    os.environ["DLRM_BENCH_INPUTS"] = path
    try:
        return [t.cuda() if hasattr(t, "cuda") else t for t in mod.get_inputs()]
    finally:
        if old is None:
            del os.environ["DLRM_BENCH_INPUTS"]
        else:
            os.environ["DLRM_BENCH_INPUTS"] = old


def pristine_copies(sets, inout):
    """Each set's initial in-out tensors (positions `inout`), by position, to put back before
    every call: one clone per distinct tensor, so sets sharing a table share its clone (all of
    them start from the same values, the shared file's)."""
    clones = {}  # id(tensor) -> (tensor, its clone); the tensor is kept so the id stays its own
    pristine = []
    for s in sets:
        mine = {}
        for i in inout:
            if id(s[i]) not in clones:
                clones[id(s[i])] = (s[i], s[i].clone())
            mine[i] = clones[id(s[i])][1]
        pristine.append(mine)
    return pristine


def percentile(sorted_vals, q):
    """Linear-interpolated percentile, q in [0, 100], of an ascending list."""
    if not sorted_vals:
        return float("nan")
    pos = (len(sorted_vals) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


def rel_l2(out, ref):
    import torch

    if isinstance(out, (tuple, list)):
        # A Model with several outputs (a backward): the worst output's error.
        return max(rel_l2(o, r) for o, r in zip(out, ref, strict=True))
    diff = out.to(torch.float64) - ref.to(device=out.device, dtype=torch.float64)
    num = torch.linalg.vector_norm(diff).item()
    den = torch.linalg.vector_norm(ref.to(torch.float64)).item()
    if den == 0.0:
        return 0.0 if num == 0.0 else float("inf")
    return num / den


def json_safe(value):
    """`value` with every non-finite float written as a string ("inf", "nan"): JSON has no
    infinity (an in-place check's error is infinite when an untouched row changed)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


# ---------------------------------------------------------------------------------------
# One evaluation: what the one-shot CLI and each request of --serve run.
# ---------------------------------------------------------------------------------------

REQUEST_DEFAULTS = {"out": None, "check": False, "iters": 50, "warmup": 5, "warm_l2": False,
                    "compile": False, "shape": None}


def make_request(fields):
    """A request from a dict (a --serve line or the CLI's arguments): `problem` and `inputs`
    required, the rest from REQUEST_DEFAULTS. PeerError (status 2) names a bad field."""
    if not isinstance(fields, dict):
        raise PeerError("torch_peer: a request is a JSON object", status=2)
    unknown = sorted(set(fields) - {"problem", "inputs", *REQUEST_DEFAULTS})
    if unknown:
        raise PeerError(f"torch_peer: unknown request field(s) {unknown}", status=2)
    req = {**REQUEST_DEFAULTS, **fields}
    kinds = {"problem": str, "inputs": list, "out": (str, type(None)), "check": bool,
             "iters": int, "warmup": int, "warm_l2": bool, "compile": bool,
             "shape": (str, type(None))}
    for name, kind in kinds.items():
        if name not in req:
            raise PeerError(f"torch_peer: request field `{name}` is missing", status=2)
        if not isinstance(req[name], kind) or (kind is int and isinstance(req[name], bool)):
            raise PeerError(f"torch_peer: request field `{name}` has the wrong type: "
                            f"{req[name]!r}", status=2)
    if req["problem"] not in PROBLEMS:
        raise PeerError(f"torch_peer: unknown problem {req['problem']!r} (one of "
                        f"{sorted(PROBLEMS)})", status=2)
    if not req["inputs"] or not all(isinstance(f, str) for f in req["inputs"]):
        raise PeerError("torch_peer: request field `inputs` must be a non-empty list of file "
                        "names", status=2)
    if req["iters"] < 1 or req["warmup"] < 0:
        raise PeerError("--iters (`iters`) must be >= 1 and --warmup (`warmup`) >= 0", status=2)
    for f in req["inputs"]:
        if not os.path.isfile(f):
            raise PeerError(f"input file not found: {f}", status=2)
    return req


def check_sets(spec, model, sets, pristine, restore, names):
    """The worst error over the sets of the Model's output against the problem's oracle (or
    its `error`), each set from its initial values."""
    errs = []
    for k, (f, s) in enumerate(zip(names, sets)):
        restore(k)
        out = model(*s)
        initial = [pristine[k].get(i, t) for i, t in enumerate(s)]
        if "error" in spec:
            err = spec["error"](out, initial)
        else:
            err = rel_l2(out, spec["oracle_f64"](initial))
        errs.append(err)
        log(f"  check {os.path.basename(f)}: rel_l2_err = {err:.3e}")
        del out
    return max(errs)


def time_calls(torch, model, sets, restore, flush_buf, iters, warmup):
    """Milliseconds of `iters` calls (CUDA events around each call only, after `warmup`
    calls), ascending: set i % len(sets) for call i, restored and with L2 flushed before it."""
    for i in range(warmup):
        restore(i % len(sets))
        if flush_buf is not None:
            flush_buf.zero_()
        model(*sets[i % len(sets)])
    torch.cuda.synchronize()

    stream = torch.cuda.current_stream()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for i in range(iters):
        inputs = sets[i % len(sets)]
        restore(i % len(sets))
        if flush_buf is not None:
            flush_buf.zero_()
        starts[i].record(stream)
        model(*inputs)
        ends[i].record(stream)
    torch.cuda.synchronize()
    return sorted(s.elapsed_time(e) for s, e in zip(starts, ends))


def evaluate(req):
    """Times the problem's Model on the request's input sets (and checks it with
    req["check"], on the first req["check_sets"] sets when given); appends the record to req["out"] when given and returns it. The record's
    `stages_s` holds the seconds spent loading (inputs, copies of in-out tensors, the Model),
    checking and timing."""
    torch = import_torch_cuda()
    spec = PROBLEMS[req["problem"]]
    kb_path = find_kernelbench_file(req["problem"])
    mod = import_kernelbench(kb_path, req["problem"])
    device_name = torch.cuda.get_device_name()
    log(f"torch_peer: {req['problem']} via {os.path.relpath(kb_path, REPO_ROOT)} on "
        f"{device_name}, torch {torch.__version__}")

    stages = {}
    started = time.perf_counter()
    shared_on_device = {}
    sets = []
    for f in req["inputs"]:
        inputs = load_set(mod, f, shared_on_device)
        shapes = ", ".join(f"{list(t.shape)}" for t in inputs if hasattr(t, "shape"))
        log(f"  loaded {f}: {shapes}")
        sets.append(inputs)
    logical_bytes = sum(spec["logical_bytes"](s) for s in sets) / len(sets)
    # In-place problems: each set's initial in-out tensors, put back before every call.
    pristine = pristine_copies(sets, spec.get("inout", ()))

    def restore(k):
        for i, t in pristine[k].items():
            sets[k][i].copy_(t)

    model = mod.Model(*mod.get_init_inputs()).cuda().eval()
    flush_buf = None if req["warm_l2"] else torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8,
                                                        device="cuda")
    torch.cuda.synchronize()
    stages["load"] = time.perf_counter() - started
    impl = "pytorch_compile" if req["compile"] else "pytorch_eager"
    # torch.compile runs under no_grad (inference_mode tensors cannot be saved by its graphs);
    # eager under inference_mode, as before.
    grad_off = torch.no_grad if req["compile"] else torch.inference_mode

    with grad_off():
        if req["compile"]:
            # Inductor, default mode: compiled and warmed up on every set (one compilation per
            # distinct shape), outside the timed region; the seconds are recorded, not timed.
            started = time.perf_counter()
            try:
                # A fresh compiler state per request: the server compiles one Model at each of
                # a problem's shapes in turn, and Dynamo would otherwise mark the dimensions
                # that changed dynamic (or give up after its recompile limit), so a later
                # shape's time would not be that of the Model compiled for it.
                if hasattr(torch, "_dynamo"):
                    torch._dynamo.reset()
                model = torch.compile(model)
                for k in range(len(sets)):
                    restore(k)
                    model(*sets[k])
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001 - recorded: the Model does not compile
                stages["compile"] = time.perf_counter() - started
                log(traceback.format_exc().rstrip())
                record = {"tool": "torch_peer", "problem": req["problem"], "shape": req["shape"],
                          "impl": impl,
                          "torch": torch.__version__, "device": device_name,
                          "error": f"torch.compile failed: {type(e).__name__}: "
                                   f"{str(e).splitlines()[0] if str(e) else ''}",
                          "stages_s": stages}
                append_record(req, record)
                return record
            stages["compile"] = time.perf_counter() - started
        if req["check"]:
            started = time.perf_counter()
            # req["check_sets"]: check only the first that many sets (a problem's other
            # shapes: eager's code is the same, one set says it computes the problem).
            n = req.get("check_sets") or len(sets)
            record_err = check_sets(spec, model, sets[:n], pristine, restore, req["inputs"][:n])
            torch.cuda.synchronize()
            stages["check"] = time.perf_counter() - started
        started = time.perf_counter()
        times = time_calls(torch, model, sets, restore, flush_buf, req["iters"], req["warmup"])
        stages["time"] = time.perf_counter() - started

    median = statistics.median(times)
    record = {
        "tool": "torch_peer",
        "problem": req["problem"],
        "shape": req["shape"],
        "impl": impl,
        "torch": torch.__version__,
        "device": device_name,
        "inputs": [os.path.basename(f) for f in req["inputs"]],
        "median_ms": median,
        "p10_ms": percentile(times, 10),
        "p90_ms": percentile(times, 90),
        "mean_ms": statistics.fmean(times),
        "iters": req["iters"],
        "warmup": req["warmup"],
        "l2_flush": not req["warm_l2"],
        "logical_bytes": logical_bytes,
        "logical_gbps": logical_bytes / (median * 1e-3) / 1e9,
    }
    if req["check"]:
        record["rel_l2_err"] = record_err
    record["stages_s"] = stages

    summary = (f"torch_peer {req['problem']} {impl}: median {median:.4f} ms "
               f"(p10 {record['p10_ms']:.4f}, p90 {record['p90_ms']:.4f}, "
               f"mean {record['mean_ms']:.4f}, n={req['iters']}), "
               f"{record['logical_gbps']:.1f} GB/s logical, "
               f"L2 {'flushed' if record['l2_flush'] else 'warm'}, {len(sets)} input set(s)")
    if req["check"]:
        summary += f", rel_l2_err {record_err:.3e}"
    log(summary)
    log("  stages: " + ", ".join(f"{name} {s:.2f} s" for name, s in stages.items()))

    return append_record(req, record)


def append_record(req, record):
    """Appends `record` (JSON-safe) to req["out"] when given; returns it."""
    record = json_safe(record)
    if req["out"]:
        out_dir = os.path.dirname(os.path.abspath(req["out"]))
        os.makedirs(out_dir, exist_ok=True)
        with open(req["out"], "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")
        log(f"  appended record to {req['out']}")
    return record


# ---------------------------------------------------------------------------------------
# --serve: one process for a whole run.
# ---------------------------------------------------------------------------------------

def release_gpu_memory():
    """Frees what the last request left on the GPU (its sets are dropped by now)."""
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def cuda_is_broken():
    """Whether CUDA was initialised and its context no longer works (a sticky error such as
    an illegal address): nothing more can run in this process."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return False
    try:
        torch.cuda.synchronize()
        return False
    except Exception:  # noqa: BLE001 - any failure here means the context is gone
        return True


def answer(line):
    """The answer to one request line: {"ok": true, "record": ...} or {"ok": false, "error":
    ...}; an exception is an error answer (its traceback logged), never the server's end."""
    try:
        return {"ok": True, "record": evaluate(make_request(json.loads(line)))}
    except PeerError as e:
        log(str(e))
        return {"ok": False, "error": str(e)}
    except json.JSONDecodeError as e:
        log(f"torch_peer: a request is one JSON object per line: {e}")
        return {"ok": False, "error": f"torch_peer: the request is not JSON: {e}"}
    except (Exception, SystemExit) as e:  # noqa: BLE001 - one request's failure only
        log(traceback.format_exc().rstrip())
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}


def serve():
    """Answers one request per line of stdin with one JSON line on stdout until EOF (exit 0).
    stdout carries the answers only: everything else written to it (logs, a Model's or a
    library's prints) goes to stderr. Exits 1 after an answer when CUDA itself is broken, so
    that whoever drives the server starts a fresh one."""
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    started = time.perf_counter()
    try:
        torch = import_torch_cuda()
        log(f"torch_peer: serving (torch {torch.__version__} imported and CUDA initialised in "
            f"{time.perf_counter() - started:.1f} s)")
    except PeerError as e:
        log(f"{e}; every request will be answered with this error")
    while True:
        line = sys.stdin.readline()
        if not line:
            return 0
        if not line.strip():
            continue
        reply = answer(line)
        _UNIQUE_REFS.clear()  # a request's sets die with it; so do their references
        release_gpu_memory()
        answers.write(json.dumps(json_safe(reply)) + "\n")
        answers.flush()
        if not reply["ok"] and cuda_is_broken():
            log("torch_peer: the CUDA context is broken; exiting so that the next request "
                "gets a fresh server")
            return 1


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--serve", action="store_true",
                    help="serve JSON requests, one per line of stdin, answering each with one "
                         "JSON line on stdout (see the module docstring); no other option")
    ap.add_argument("--problem", choices=sorted(PROBLEMS),
                    help="problem name (default: embedding_bag_sum)")
    ap.add_argument("--inputs", nargs="+", metavar="FILE",
                    help="safetensors input sets from `dlrm-bench gen`; timing rotates among "
                         "them (required)")
    ap.add_argument("--iters", type=int, default=REQUEST_DEFAULTS["iters"],
                    help="timed iterations (default 50)")
    ap.add_argument("--warmup", type=int, default=REQUEST_DEFAULTS["warmup"],
                    help="warm-up iterations (default 5)")
    ap.add_argument("--warm-l2", action="store_true",
                    help="do not flush L2 before each timed call (default: flush)")
    ap.add_argument("--out", metavar="FILE.jsonl", help="append one JSON record to this file")
    ap.add_argument("--compile", action="store_true",
                    help="time the Model under torch.compile (inductor, default mode) instead "
                         "of eager; compiled and warmed up first, the compile time recorded "
                         "(stages_s.compile), not timed; a Model that fails to compile gives a "
                         "record with `error`")
    ap.add_argument("--check", action="store_true",
                    help="compare the Model output with a float64 oracle (relative L2 error)")
    args = ap.parse_args(argv)

    if args.serve:
        if args.problem or args.inputs or args.out or args.check or args.warm_l2 or args.compile:
            ap.error("--serve reads its requests from stdin; it takes no other option")
        return serve()
    if not args.inputs:
        ap.error("the following arguments are required: --inputs")
    try:
        req = make_request({
            "problem": args.problem or "embedding_bag_sum", "inputs": args.inputs,
            "out": args.out, "check": args.check, "iters": args.iters,
            "warmup": args.warmup, "warm_l2": args.warm_l2, "compile": args.compile,
        })
    except PeerError as e:
        ap.error(str(e))
    try:
        evaluate(req)
    except PeerError as e:
        print(e, file=sys.stderr, flush=True)
        return e.status
    return 0


if __name__ == "__main__":
    sys.exit(main())
