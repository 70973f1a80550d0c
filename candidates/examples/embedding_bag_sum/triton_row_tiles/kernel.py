"""embedding_bag_sum as one Triton kernel (docs/design.md §3, problem 1).

    weight  [E, D] fp32, row-major
    indices [N]    int64
    offsets [B+1]  int64, CSR (offsets[0] = 0, offsets[B] = N); bags may be empty
    out     [B, D] fp32: out[b, :] = sum over j in offsets[b]..offsets[b+1] of weight[indices[j], :]

Program (b, c) pools bag b over columns c*BLOCK_D .. c*BLOCK_D + BLOCK_D - 1 (masked past D):
the bag's indices are read BLOCK_L at a time and the BLOCK_L rows loaded as one
[BLOCK_L, BLOCK_D] tile (BLOCK_L row loads in flight), summed over its rows into an fp32
accumulator. An empty bag writes zeros. Offsets, indices and D are int64, so no product
overflows at E = 8M rows.

Compiled ahead of time by tools/triton_compile.py (the runner never runs this file while it
checks or times the kernel).
"""
import triton
import triton.language as tl


@triton.jit
def ebs_triton(weight, indices, offsets, out, B, D,
               BLOCK_D: tl.constexpr, BLOCK_L: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1).to(tl.int64) * BLOCK_D + tl.arange(0, BLOCK_D)
    col_ok = cols < D
    start = tl.load(offsets + b)
    end = tl.load(offsets + b + 1)
    acc = tl.zeros((BLOCK_D,), dtype=tl.float32)
    for j0 in range(start, end, BLOCK_L):
        js = j0 + tl.arange(0, BLOCK_L)
        j_ok = js < end
        rows = tl.load(indices + js, mask=j_ok, other=0)
        tile = tl.load(weight + rows[:, None] * D + cols[None, :],
                       mask=j_ok[:, None] & col_ok[None, :], other=0.0)
        acc += tl.sum(tile, axis=0)
    tl.store(out + b * D + cols, acc, mask=col_ok)
