"""fm_interaction as one Triton kernel (docs/design.md §3, problem 12).

    x   [B, F, K] fp32
    out [B]       fp32: out[b] = 0.5 * sum_k ((sum_f x[b,f,k])^2 - sum_f x[b,f,k]^2)

Program p handles samples p*BLOCK_B .. p*BLOCK_B + BLOCK_B - 1 (masked past B). For each chunk
of BLOCK_K columns k (masked past K) it walks the F fields in order, loading one
[BLOCK_B, BLOCK_K] tile per field and accumulating s = sum_f x and q = sum_f x^2 in fp32,
then adds sum_k (s^2 - q) of the chunk to the sample's total; x is read once. F and K are
runtime sizes (ci, small and full differ), so nothing assumes F = 39 or K = 16.

Compiled ahead of time by tools/triton_compile.py (the runner never runs this file while it
checks or times the kernel).
"""
import triton
import triton.language as tl


@triton.jit
def fm_triton(x, out, B, F, K, BLOCK_B: tl.constexpr, BLOCK_K: tl.constexpr):
    samples = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    s_ok = samples < B
    base = samples.to(tl.int64) * F * K
    total = tl.zeros((BLOCK_B,), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        ok = s_ok[:, None] & (ks < K)[None, :]
        s = tl.zeros((BLOCK_B, BLOCK_K), dtype=tl.float32)
        q = tl.zeros((BLOCK_B, BLOCK_K), dtype=tl.float32)
        for f in range(0, F):
            v = tl.load(x + base[:, None] + f * K + ks[None, :], mask=ok, other=0.0)
            s += v
            q += v * v
        total += tl.sum(s * s - q, axis=1)
    tl.store(out + samples, 0.5 * total, mask=s_ok)
