//! Problem 10, `dot_interaction` (DLRM): dense x [B, D] and embeddings emb [B, F, D] fp32,
//! T = [x; emb] [B, M = F+1, D], out [B, D + P] = cat(x, the strictly lower triangle of T·Tᵀ),
//! P = M(M−1)/2 pairs in DLRM's row-major order (for i in 1..M, for j in 0..i).
//!
//! The reference mirrors the eager `Model` of `bench-problems/kernelbench/10_dot_interaction.py`
//! launch for launch (four launches):
//! 1. `T = torch.cat([x.unsqueeze(1), emb], dim=1)`: [`dot_interaction_cat_reference`], PyTorch's
//!    `CatArrayBatchedCopy_vectorized` (rows of x and emb are whole 16-byte chunks: 16-byte loads
//!    and stores, 128-thread blocks, grid (min(32·SMs, ceil(numel/512)), 2 inputs)).
//! 2. `Z = torch.bmm(T, T.transpose(1, 2))`: [`dot_interaction_bmm_nt_reference`], a tiled
//!    shared-memory batched SGEMM standing in for cuBLAS `sgemmStridedBatched` (fp32 FFMA, no
//!    TF32, as PyTorch's default `allow_tf32 = False`): 32×32 output tiles, 64 threads each
//!    holding a 4×4 register tile, k staged 32 at a time through shared memory, LDS.128 reads.
//! 3. `Zflat = Z[:, li, lj]`: [`dot_interaction_tril_gather_reference`], the gather of
//!    `index_elementwise_kernel` (one read of Z and one write of Zflat per pair).
//! 4. `torch.cat([x, Zflat], dim=1)`: [`dot_interaction_cat_reference`] again, now PyTorch's
//!    `CatArrayBatchedCopy_alignedK_contig` path (output rows of D + P floats are not 16-byte
//!    multiples: 16-byte loads, scalar stores).
//!
//! The batched GEMM core ([`bmm_tile`]) is shared with problem 11's backward product.
use crate::dev::*;

/// Rows and columns of one block's output tile in the batched GEMMs.
pub const BMM_TILE: u32 = 32;
/// k-depth of one shared-memory stage.
pub const BMM_BK: usize = 32;
/// Threads of a GEMM block: 8 × 8, each owning a 4 × 4 micro-tile of the 32 × 32 output tile.
pub const BMM_THREADS: u32 = 64;
/// Row stride (floats) of the k-major shared tiles `s[k][i]`: a multiple of 4, so every row
/// starts on 16 bytes (LDS.128 reads of four consecutive i), and ≡ 4 (mod 32), so the
/// transposing stores of a k-contiguous operand (lanes: 8 consecutive k × 4 consecutive i) fall
/// in 32 distinct banks.
pub const BMM_LD: usize = 36;
/// Floats of one operand's shared stage.
pub const BMM_STAGE: usize = BMM_BK * BMM_LD;

/// Threads of the elementwise, cat and gather kernels' blocks (PyTorch's `num_threads()`).
pub const EW_THREADS: u32 = 128;

/// Row `i` and column `j` of pair `p` in DLRM's order of the strictly lower triangle of an
/// `m × m` matrix (row-major over i > j: p = i(i−1)/2 + j). `p` must be below m(m−1)/2. A
/// binary search over i (log₂ m steps), no floating point.
#[inline(always)]
pub fn tril_pair(p: u32, m: u32) -> (u32, u32) {
    let (mut lo, mut hi) = (1u32, m - 1);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if mid * (mid - 1) / 2 <= p {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    (lo, p - lo * (lo - 1) / 2)
}

/// One block's 32 × 32 tile of a batched fp32 GEMM, C[b] = A[b] · B[b], for batch
/// `block_idx_x()`, rows from `32·block_idx_y()`, columns from `32·block_idx_z()`; 64 threads.
///
/// * A(i, k) = `a[b·a_bs + i·a_rs + k]` (k contiguous), i < m, k < kdim.
/// * B(k, j) = `bm[b·b_bs + j·b_ld + k]` when `B_K_CONTIGUOUS` (the "T" operand of
///   bmm(T, Tᵀ)), else `bm[b·b_bs + k·b_ld + j]` (j contiguous), j < n.
/// * C(i, j) goes to `c[b·c_bs + i·c_rs + j]`; with `SPLIT_ROW0`, row 0 goes to
///   `c0[b·c0_bs + j]` instead and rows i ≥ 1 to `c[b·c_bs + (i−1)·c_rs + j]` (the two parts of
///   one [m, n] result stored apart).
///
/// Each k-stage: every thread loads its 16 A and 16 B elements into registers (32 LDG with
/// immediate offsets in a full stage; k past `kdim` zeroed in the last one; rows or columns
/// past the matrix read row/column 0, which only feeds outputs that are never stored), stores
/// them k-major into `as_` / `bs_` (shared, [`BMM_STAGE`] floats each, 32-bit shared
/// addresses so every STS/LDS takes an immediate offset), barrier, 32 steps of two LDS.128 and
/// 16 FFMA (4 steps per trip: ptxas keeps the kernel at 96 registers, no local memory),
/// barrier. Each output is one fp32 FMA chain in k order (no TF32, no split-k).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn bmm_tile<const B_K_CONTIGUOUS: bool, const SPLIT_ROW0: bool>(
    a: *const f32,
    a_bs: usize,
    a_rs: usize,
    bm: *const f32,
    b_bs: usize,
    b_ld: usize,
    c: *mut f32,
    c_bs: usize,
    c_rs: usize,
    c0: *mut f32,
    c0_bs: usize,
    m: u32,
    n: u32,
    kdim: u32,
    as_: *mut f32,
    bs_: *mut f32,
) {
    let t = thread_idx_x();
    let lane = t % 32;
    let warp = t / 32;
    let (tx, ty) = (t % 8, t / 8);
    let batch = block_idx_x() as usize;
    let i0 = block_idx_y() * BMM_TILE;
    let j0 = block_idx_z() * BMM_TILE;
    let a = a.add(batch * a_bs);
    let bm = bm.add(batch * b_bs);

    // Staging map of a k-contiguous operand: element (c, h) of a thread (c, h in 0..4) is row
    // `lane/8 + 4·warp + 8c` of the tile at k `lane%8 + 8h` of the stage, so a warp's load
    // covers 8 consecutive k (32 bytes) of 4 rows and its k-major store hits 32 distinct banks.
    // Rows past the matrix read row 0 instead: they only feed outputs that are never stored,
    // so they need no mask. k past `kdim` (last stage only) is zeroed.
    let srow = lane / 8 + 4 * warp;
    let kl = lane % 8;
    let mut a_row = [0usize; 4];
    let mut b_row = [0usize; 4];
    for c in 0..4 {
        let i = i0 + srow + 8 * c as u32;
        a_row[c] = if i < m { i as usize * a_rs } else { 0 };
        let j = j0 + srow + 8 * c as u32;
        b_row[c] = if j < n { j as usize * b_ld } else { 0 };
    }
    // Staging map of a j-contiguous operand: element q of a thread is k `warp + 2q` of the
    // stage at column `lane` of the tile (a warp reads 32 consecutive j of one k); columns past
    // the matrix read column 0 (never-stored outputs again).
    let jn = j0 + lane;
    let jn_col = if jn < n { jn as usize } else { 0 };

    // Shared byte addresses: this thread's staging stores, and its compute reads.
    const F4: u32 = 4; // bytes per f32
    let (sa, sb) = (shared_addr(as_), shared_addr(bs_));
    let st_k = ((kl as usize * BMM_LD + srow as usize) * 4) as SharedAddr;
    let st_j = ((warp as usize * BMM_LD + lane as usize) * 4) as SharedAddr;
    let rd_a = sa + (ty * 4 * F4) as SharedAddr;
    let rd_b = sb + (tx * 4 * F4) as SharedAddr;
    const ROW_BYTES: usize = BMM_LD * 4;

    let mut acc = [[0.0f32; 4]; 4];
    let mut ra = [0.0f32; 16];
    let mut rb = [0.0f32; 16];
    let mut k0 = 0u32;
    while k0 < kdim {
        // Global → registers, all 32 loads before any shared store.
        let kb = (k0 + kl) as usize;
        if k0 + BMM_BK as u32 <= kdim {
            for c in 0..4 {
                let pa = a.add(a_row[c] + kb);
                let pb = bm.add(b_row[c] + kb);
                for h in 0..4 {
                    ra[4 * h + c] = *pa.add(8 * h);
                    if B_K_CONTIGUOUS {
                        rb[4 * h + c] = *pb.add(8 * h);
                    }
                }
            }
            if !B_K_CONTIGUOUS {
                let pb = bm.add((k0 + warp) as usize * b_ld + jn_col);
                for (q, v) in rb.iter_mut().enumerate() {
                    *v = *pb.add(2 * q * b_ld);
                }
            }
        } else {
            // The last, partial stage: k past `kdim` reads k0 and is zeroed.
            for c in 0..4 {
                let pa = a.add(a_row[c]);
                let pb = bm.add(b_row[c]);
                for h in 0..4 {
                    let kg = k0 + kl + 8 * h as u32;
                    let at = if kg < kdim { kg } else { k0 } as usize;
                    let va = *pa.add(at);
                    ra[4 * h + c] = if kg < kdim { va } else { 0.0 };
                    if B_K_CONTIGUOUS {
                        let vb = *pb.add(at);
                        rb[4 * h + c] = if kg < kdim { vb } else { 0.0 };
                    }
                }
            }
            if !B_K_CONTIGUOUS {
                for (q, v) in rb.iter_mut().enumerate() {
                    let kg = k0 + warp + 2 * q as u32;
                    let at = if kg < kdim { kg } else { k0 } as usize;
                    let vb = *bm.add(at * b_ld + jn_col);
                    *v = if kg < kdim { vb } else { 0.0 };
                }
            }
        }
        // Registers → shared, k-major: s[k][row].
        for c in 0..4 {
            for h in 0..4 {
                let off = ((8 * h * BMM_LD + 8 * c) * 4) as SharedAddr;
                st_shared_f32(sa + st_k + off, ra[4 * h + c]);
                if B_K_CONTIGUOUS {
                    st_shared_f32(sb + st_k + off, rb[4 * h + c]);
                }
            }
        }
        if !B_K_CONTIGUOUS {
            for (q, &v) in rb.iter().enumerate() {
                st_shared_f32(sb + st_j + (2 * q * ROW_BYTES) as SharedAddr, v);
            }
        }
        sync_threads();
        let mut step = |kk: usize| {
            let off = (kk * ROW_BYTES) as SharedAddr;
            let av = ld_shared_f32x4(rd_a + off);
            let bv = ld_shared_f32x4(rd_b + off);
            for r in 0..4 {
                for q in 0..4 {
                    acc[r][q] = fma_f32(av[r], bv[q], acc[r][q]);
                }
            }
        };
        // Four k-steps per trip: enough independent LDS.128 in flight without letting the
        // scheduler hoist all 64 loads of the stage (which takes every register).
        let mut kk = 0;
        while kk < BMM_BK {
            step(kk);
            step(kk + 1);
            step(kk + 2);
            step(kk + 3);
            kk += 4;
        }
        sync_threads();
        k0 += BMM_BK as u32;
    }

    for (r, row) in acc.iter().enumerate() {
        let i = i0 + ty * 4 + r as u32;
        if i >= m {
            continue;
        }
        for (q, &v) in row.iter().enumerate() {
            let j = j0 + tx * 4 + q as u32;
            if j >= n {
                continue;
            }
            let dst = if SPLIT_ROW0 {
                if i == 0 {
                    c0.add(batch * c0_bs + j as usize)
                } else {
                    c.add(batch * c_bs + (i - 1) as usize * c_rs + j as usize)
                }
            } else {
                c.add(batch * c_bs + i as usize * c_rs + j as usize)
            };
            *dst = v;
        }
    }
}

kernel! {
    /// `C[b] = A[b] · B[b]ᵀ` for contiguous A [batch, m, k], B [batch, n, k], C [batch, m, n]
    /// (cuBLAS `sgemmStridedBatched` with one transposed operand; `bmm(T, T.transpose(1, 2))`
    /// passes T as both).
    ///
    /// Launch: block (64, 1, 1), grid (batch, ceil_div(m, 32), ceil_div(n, 32)), no dynamic
    /// shared memory (2 × 4.5 KiB static).
    pub unsafe fn dot_interaction_bmm_nt_reference(
        a: *const f32,
        b: *const f32,
        c: *mut f32,
        m: u32,
        n: u32,
        k: u32,
    ) {
        let as_ = crate::static_shared!(DOT_INTERACTION_BMM_NT_A: [f32; crate::kernels::dot_interaction::BMM_STAGE]);
        let bs_ = crate::static_shared!(DOT_INTERACTION_BMM_NT_B: [f32; crate::kernels::dot_interaction::BMM_STAGE]);
        let (m_, n_, k_) = (m as usize, n as usize, k as usize);
        bmm_tile::<true, false>(
            a, m_ * k_, k_, b, n_ * k_, k_, c, m_ * n_, n_, c, 0, m, n, k, as_, bs_,
        );
    }
}

kernel! {
    /// `out[r, :] = [a[r, 0..cols_a], b[r, 0..cols_b]]` for r < rows (cat along dim 1 of two
    /// contiguous row-major inputs; a 3-D cat along dim 1 is this with rows = size(0)).
    ///
    /// Mirrors PyTorch's `parallel_cat` kernels: `blockIdx.y` picks the input; each thread
    /// copies 4-element chunks of it in a grid-stride loop with one 16-byte load. When every
    /// chunk lands whole and 16-byte aligned in the output (`CatArrayBatchedCopy_vectorized`:
    /// all row lengths multiples of 4) the store is one 16-byte store, otherwise four scalar
    /// stores (`CatArrayBatchedCopy_alignedK_contig`); the input's last numel % 4 elements are
    /// copied one by one. Unaligned inputs fall back to one element per step.
    ///
    /// Launch: block (128, 1, 1), grid (min(4224, ceil_div(max(rows·cols_a, rows·cols_b), 512)),
    /// 2, 1): PyTorch's `getCatGridContig`, 32 blocks per SM on the H200's 132 SMs.
    pub unsafe fn dot_interaction_cat_reference(
        a: *const f32,
        b: *const f32,
        out: *mut f32,
        rows: u32,
        cols_a: u32,
        cols_b: u32,
    ) {
        let (src, cols, col0) = if block_idx_y() == 0 { (a, cols_a, 0) } else { (b, cols_b, cols_a) };
        let out_cols = cols_a + cols_b;
        let n = rows * cols;
        let tid = block_idx_x() * block_dim_x() + thread_idx_x();
        let threads = grid_dim_x() * block_dim_x();
        let dst = |e: u32| out.add(((e / cols) * out_cols + col0 + e % cols) as usize);
        if (src as usize).is_multiple_of(16) {
            let vec_store =
                (out as usize).is_multiple_of(16)
                    && cols.is_multiple_of(4)
                    && out_cols.is_multiple_of(4)
                    && col0.is_multiple_of(4);
            let mut e = tid * 4;
            while e + 4 <= n {
                let v = load_nc_f32x4(src.add(e as usize));
                if vec_store {
                    store_f32x4(dst(e), v);
                } else {
                    for (q, &x) in v.iter().enumerate() {
                        *dst(e + q as u32) = x;
                    }
                }
                e += threads * 4;
            }
            while e < n {
                *dst(e) = *src.add(e as usize);
                e += 1;
            }
        } else {
            let mut e = tid;
            while e < n {
                *dst(e) = *src.add(e as usize);
                e += threads;
            }
        }
    }
}

kernel! {
    /// `zflat[b, p] = z[b, i_p, j_p]` for the P = m(m−1)/2 pairs (i_p, j_p) of [`tril_pair`]:
    /// `Z[:, li, lj]` with DLRM's precomputed li, lj (PyTorch's `index_elementwise_kernel`: one
    /// read of Z and one write per element).
    ///
    /// Launch: block (32, 8, 1), grid (ceil_div(P, 32), ceil_div(B, 32), 1). Lanes take
    /// consecutive pairs (coalesced writes); each thread finds its pair's (i, j) once and
    /// gathers it for 4 samples, loads before stores.
    pub unsafe fn dot_interaction_tril_gather_reference(
        z: *const f32,
        zflat: *mut f32,
        batch: u32,
        m: u32,
    ) {
        let pairs = m * (m - 1) / 2;
        let p = block_idx_x() * 32 + thread_idx_x();
        if p >= pairs {
            return;
        }
        let (i, j) = tril_pair(p, m);
        let b0 = block_idx_y() * 32 + thread_idx_y();
        let mut v = [0.0f32; 4];
        for (q, slot) in v.iter_mut().enumerate() {
            let b = b0 + 8 * q as u32;
            if b < batch {
                *slot = *z.add(b as usize * (m * m) as usize + (i * m + j) as usize);
            }
        }
        for (q, &x) in v.iter().enumerate() {
            let b = b0 + 8 * q as u32;
            if b < batch {
                *zflat.add(b as usize * pairs as usize + p as usize) = x;
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::emu::EmuLaunch;

    /// Deterministic values in [-1, 1).
    pub(crate) fn values(n: usize, salt: u64) -> Vec<f32> {
        (0..n as u64)
            .map(|i| {
                let h = (i ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15))
                    .wrapping_mul(0xD134_2543_DE82_EF95)
                    .rotate_left(29)
                    .wrapping_mul(0x2545_F491_4F6C_DD1D);
                (h >> 40) as f32 / (1u64 << 23) as f32 - 1.0
            })
            .collect()
    }

    /// DLRM's li / lj lists, built the way its Python builds them.
    fn dlrm_pairs(m: u32) -> Vec<(u32, u32)> {
        let li: Vec<u32> = (0..m).flat_map(|i| (0..i).map(move |_| i)).collect();
        let lj: Vec<u32> = (0..m).flat_map(|i| 0..i).collect();
        li.into_iter().zip(lj).collect()
    }

    fn close(got: f32, want: f64, scale: f64) -> bool {
        (got as f64 - want).abs() <= 1e-5 * scale.max(1.0)
    }

    #[test]
    fn tril_pair_follows_dlrm_order() {
        for m in [2u32, 3, 7, 27, 34, 100] {
            let pairs = dlrm_pairs(m);
            assert_eq!(pairs.len() as u32, m * (m - 1) / 2);
            for (p, &(i, j)) in pairs.iter().enumerate() {
                assert_eq!(tril_pair(p as u32, m), (i, j), "m {m}, pair {p}");
                assert!(i > j);
            }
        }
        // DLRM's F = 26: 351 pairs, pair 0 is (1, 0), the last (26, 25).
        assert_eq!(tril_pair(0, 27), (1, 0));
        assert_eq!(tril_pair(350, 27), (26, 25));
    }

    /// Runs the NT GEMM on the emulator and compares with an f64 product.
    fn check_bmm_nt(batch: usize, m: usize, n: usize, k: usize) {
        let a = values(batch * m * k, 1);
        let b = values(batch * n * k, 2);
        let mut c = vec![f32::NAN; batch * m * n];
        unsafe {
            EmuLaunch::new(
                [
                    batch as u32,
                    (m as u32).div_ceil(BMM_TILE),
                    (n as u32).div_ceil(BMM_TILE),
                ],
                BMM_THREADS,
            )
            .ptr(&a)
            .ptr(&b)
            .ptr_mut(&mut c)
            .arg(m)
            .arg(n)
            .arg(k)
            .run(&dot_interaction_bmm_nt_reference::EMU)
        };
        for bb in 0..batch {
            for i in 0..m {
                for j in 0..n {
                    let want: f64 = (0..k)
                        .map(|kk| a[(bb * m + i) * k + kk] as f64 * b[(bb * n + j) * k + kk] as f64)
                        .sum();
                    let got = c[(bb * m + i) * n + j];
                    assert!(
                        close(got, want, k as f64),
                        "b {bb} ({i}, {j}): {got} vs {want} (m {m} n {n} k {k})"
                    );
                }
            }
        }
    }

    #[test]
    fn bmm_nt_matches_f64_on_uneven_tiles() {
        // m and n past one tile and not multiples of 32, k not a multiple of the stage nor of 4.
        check_bmm_nt(3, 34, 37, 45);
        // The DLRM shape at a small batch: one partial tile, 4 full k-stages.
        check_bmm_nt(2, 27, 27, 128);
        // Degenerate: one row, k < 4.
        check_bmm_nt(2, 1, 5, 3);
    }

    #[test]
    fn bmm_nt_is_one_fma_chain_in_k_order() {
        // Bit-exact against the sequential fp32 FMA chain the kernel documents.
        let (batch, m, k) = (2usize, 27usize, 96usize);
        let t = values(batch * m * k, 9);
        let mut z = vec![f32::NAN; batch * m * m];
        unsafe {
            EmuLaunch::new(batch as u32, BMM_THREADS)
                .ptr(&t)
                .ptr(&t)
                .ptr_mut(&mut z)
                .arg(m)
                .arg(m)
                .arg(k)
                .run(&dot_interaction_bmm_nt_reference::EMU)
        };
        for bb in 0..batch {
            for i in 0..m {
                for j in 0..m {
                    let mut acc = 0.0f32;
                    for kk in 0..k {
                        acc = t[(bb * m + i) * k + kk].mul_add(t[(bb * m + j) * k + kk], acc);
                    }
                    assert_eq!(z[(bb * m + i) * m + j].to_bits(), acc.to_bits());
                }
            }
        }
    }

    fn run_cat(rows: usize, ca: usize, cb: usize, blocks: u32) {
        let a = values(rows * ca, 3);
        let b = values(rows * cb, 4);
        let mut out = vec![f32::NAN; rows * (ca + cb)];
        unsafe {
            EmuLaunch::new([blocks, 2, 1], EW_THREADS)
                .ptr(&a)
                .ptr(&b)
                .ptr_mut(&mut out)
                .arg(rows)
                .arg(ca)
                .arg(cb)
                .run(&dot_interaction_cat_reference::EMU)
        };
        for r in 0..rows {
            let row = &out[r * (ca + cb)..(r + 1) * (ca + cb)];
            assert_eq!(&row[..ca], &a[r * ca..(r + 1) * ca], "row {r} ({ca}, {cb})");
            assert_eq!(&row[ca..], &b[r * cb..(r + 1) * cb], "row {r} ({ca}, {cb})");
        }
    }

    #[test]
    fn cat_copies_both_inputs_on_every_path() {
        run_cat(5, 8, 24, 2); // vectorized stores, grid-stride loop over several chunks
        run_cat(7, 12, 21, 1); // output rows of 33: scalar stores, inputs' numel % 4 tails
        run_cat(3, 5, 6, 3); // input a not a whole number of chunks per row
        run_cat(1, 1, 1, 1);
    }

    #[test]
    fn tril_gather_matches_an_independent_enumeration() {
        for (batch, m) in [(37usize, 7u32), (5, 34), (3, 2)] {
            let mm = m as usize;
            let z = values(batch * mm * mm, 5);
            let pairs = dlrm_pairs(m);
            let mut zflat = vec![f32::NAN; batch * pairs.len()];
            unsafe {
                EmuLaunch::new(
                    [
                        (pairs.len() as u32).div_ceil(32),
                        (batch as u32).div_ceil(32),
                        1,
                    ],
                    [32, 8, 1],
                )
                .ptr(&z)
                .ptr_mut(&mut zflat)
                .arg(batch)
                .arg(m)
                .run(&dot_interaction_tril_gather_reference::EMU)
            };
            for b in 0..batch {
                for (p, &(i, j)) in pairs.iter().enumerate() {
                    assert_eq!(
                        zflat[b * pairs.len() + p],
                        z[b * mm * mm + i as usize * mm + j as usize]
                    );
                }
            }
        }
    }
}
