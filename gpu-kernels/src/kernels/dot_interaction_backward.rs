//! Problem 11, `dot_interaction_backward`: the gradient of problem 10 with respect to x and
//! emb, given grad_out [B, D + P]. With T = [x; emb] [B, M = F+1, D] and dZ [B, M, M] holding
//! grad_out's pair columns at the strictly-lower-triangle positions (zeros elsewhere):
//! dT = (dZ + dZᵀ)·T, dx = grad_out[:, :D] + dT[:, 0], d_emb = dT[:, 1:].
//!
//! The reference mirrors the eager `Model` of
//! `bench-problems/kernelbench/11_dot_interaction_backward.py` launch for launch (six launches):
//! 1. `T = torch.cat([x.unsqueeze(1), emb], dim=1)`: problem 10's
//!    [`dot_interaction_cat_reference`](super::dot_interaction::dot_interaction_cat_reference).
//! 2. `dZ = torch.zeros(B, M, M)`: [`dot_interaction_backward_zero_reference`] (the vectorized
//!    `FillFunctor` kernel).
//! 3. `dZ[:, li, lj] = grad_out[:, D:]`: [`dot_interaction_backward_tril_scatter_reference`]
//!    (`index_put_`'s elementwise scatter: one read of grad_out and one write of dZ per pair).
//! 4. `dZ + dZ.transpose(1, 2)`: [`dot_interaction_backward_add_transpose_reference`] (the
//!    non-contiguous `elementwise_kernel<128, 4>` path).
//! 5. `torch.bmm(…, T)`: [`dot_interaction_backward_bmm_nn_reference`], the tiled SGEMM core of
//!    problem 10 ([`bmm_tile`]) with a j-contiguous second operand. Eager returns
//!    `d_emb = dT[:, 1:]` as a view of the bmm's output and reads `dT[:, 0]` in place; here the
//!    GEMM writes those two parts of dT's storage straight to `d_emb` and to a [B, D] scratch
//!    row, so no byte moves that eager does not move.
//! 6. `grad_out[:, :D] + dT[:, 0]`: [`dot_interaction_backward_add_reference`] (again the
//!    non-contiguous elementwise path: both operands are strided rows).
use super::dot_interaction::{bmm_tile, tril_pair};
use crate::dev::*;

kernel! {
    /// `out[0..n] = 0`. Each thread zeroes one 4-element chunk with a 16-byte store (the
    /// chunk that straddles n element by element), grid-stride.
    ///
    /// Launch: block (128, 1, 1), grid (ceil_div(n, 512), 1, 1).
    pub unsafe fn dot_interaction_backward_zero_reference(out: *mut f32, n: u32) {
        let threads = grid_dim_x() * block_dim_x();
        let vec = (out as usize).is_multiple_of(16);
        let mut e = (block_idx_x() * block_dim_x() + thread_idx_x()) * 4;
        while e < n {
            if vec && e + 4 <= n {
                store_f32x4(out.add(e as usize), [0.0; 4]);
            } else {
                let mut q = e;
                while q < n && q < e + 4 {
                    *out.add(q as usize) = 0.0;
                    q += 1;
                }
            }
            e += threads * 4;
        }
    }
}

kernel! {
    /// `dz[b, i_p, j_p] = grad_out[b·ld_g + col0 + p]` for the P = m(m−1)/2 pairs of
    /// [`tril_pair`] (`dZ[:, li, lj] = grad_out[:, D:]`, col0 = D, ld_g = D + P).
    ///
    /// Launch: block (32, 8, 1), grid (ceil_div(P, 32), ceil_div(B, 32), 1): lanes take
    /// consecutive pairs (coalesced reads); each thread finds its pair once and scatters it for
    /// 4 samples, loads before stores.
    pub unsafe fn dot_interaction_backward_tril_scatter_reference(
        grad_out: *const f32,
        dz: *mut f32,
        batch: u32,
        m: u32,
        ld_g: u32,
        col0: u32,
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
                *slot = *grad_out.add(b as usize * ld_g as usize + (col0 + p) as usize);
            }
        }
        for (q, &x) in v.iter().enumerate() {
            let b = b0 + 8 * q as u32;
            if b < batch {
                *dz.add(b as usize * (m * m) as usize + (i * m + j) as usize) = x;
            }
        }
    }
}

kernel! {
    /// `s[b, i, j] = dz[b, i, j] + dz[b, j, i]` over batch·m·m elements: PyTorch's
    /// `elementwise_kernel<128, 4>` (each thread 4 elements 128 apart, indices from the linear
    /// one by division).
    ///
    /// Launch: block (128, 1, 1), grid (ceil_div(batch·m·m, 512), 1, 1).
    pub unsafe fn dot_interaction_backward_add_transpose_reference(
        dz: *const f32,
        s: *mut f32,
        batch: u32,
        m: u32,
    ) {
        let mm = m * m;
        let n = batch * mm;
        let mut idx = block_idx_x() * 512 + thread_idx_x();
        for _ in 0..4 {
            if idx < n {
                let (b, r) = (idx / mm, idx % mm);
                let (i, j) = (r / m, r % m);
                *s.add(idx as usize) = *dz.add(idx as usize) + *dz.add((b * mm + j * m + i) as usize);
            }
            idx += 128;
        }
    }
}

kernel! {
    /// `C[b] = A[b] · B[b]` for contiguous A [batch, m, k] and B [batch, k, n] (cuBLAS
    /// `sgemmStridedBatched`, no transpose), C's row 0 written to `c_first` [batch, n] and rows
    /// 1.. to `c_rest` [batch, m−1, n]: `dT = bmm(dZ + dZᵀ, T)` stored as its `dT[:, 0]` and
    /// `dT[:, 1:]` parts.
    ///
    /// Launch: block (64, 1, 1), grid (batch, ceil_div(m, 32), ceil_div(n, 32)).
    pub unsafe fn dot_interaction_backward_bmm_nn_reference(
        a: *const f32,
        b: *const f32,
        c_rest: *mut f32,
        c_first: *mut f32,
        m: u32,
        n: u32,
        k: u32,
    ) {
        let as_ = crate::static_shared!(DOT_INTERACTION_BWD_BMM_A: [f32; crate::kernels::dot_interaction::BMM_STAGE]);
        let bs_ = crate::static_shared!(DOT_INTERACTION_BWD_BMM_B: [f32; crate::kernels::dot_interaction::BMM_STAGE]);
        let (m_, n_, k_) = (m as usize, n as usize, k as usize);
        bmm_tile::<false, true>(
            a, m_ * k_, k_, b, k_ * n_, n_, c_rest, (m_ - 1) * n_, n_, c_first, n_, m, n, k, as_, bs_,
        );
    }
}

kernel! {
    /// `dx[b, c] = grad_out[b·ld_g + c] + dt0[b·d + c]` over batch·d elements
    /// (`grad_out[:, :D] + dT[:, 0]`), PyTorch's `elementwise_kernel<128, 4>`.
    ///
    /// Launch: block (128, 1, 1), grid (ceil_div(batch·d, 512), 1, 1).
    pub unsafe fn dot_interaction_backward_add_reference(
        grad_out: *const f32,
        dt0: *const f32,
        dx: *mut f32,
        batch: u32,
        d: u32,
        ld_g: u32,
    ) {
        let n = batch * d;
        let mut idx = block_idx_x() * 512 + thread_idx_x();
        for _ in 0..4 {
            if idx < n {
                let (b, c) = (idx / d, idx % d);
                *dx.add(idx as usize) =
                    *grad_out.add(b as usize * ld_g as usize + c as usize) + *dt0.add(idx as usize);
            }
            idx += 128;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::dot_interaction::tests::values;
    use super::super::dot_interaction::{BMM_THREADS, BMM_TILE};
    use super::*;
    use crate::emu::EmuLaunch;

    fn cfg(grid: [u32; 3], block: [u32; 3]) -> EmuLaunch {
        EmuLaunch::new(grid, block)
    }

    #[test]
    fn zero_fill_writes_every_element() {
        for n in [1usize, 7, 512, 1030] {
            let mut out = vec![f32::NAN; n];
            unsafe {
                cfg([(n as u32).div_ceil(512), 1, 1], [128, 1, 1])
                    .ptr_mut(&mut out)
                    .arg(n)
                    .run(&dot_interaction_backward_zero_reference::EMU)
            };
            assert!(out.iter().all(|&v| v == 0.0), "n {n}");
        }
    }

    #[test]
    fn scatter_and_symmetrize_place_every_pair_twice() {
        // Scatter into a zeroed dZ, then s = dZ + dZᵀ: s[i][j] = s[j][i] = g of pair (max, min),
        // zero diagonal. m = 34 has pairs past one 32-lane block; batch 37 is not a multiple of
        // the 32 samples a block covers.
        for (batch, m, d) in [(37usize, 7u32, 5usize), (3, 34, 2)] {
            let mm = m as usize;
            let pairs = mm * (mm - 1) / 2;
            let ld = d + pairs;
            let g = values(batch * ld, 6);
            let mut dz = vec![0.0f32; batch * mm * mm];
            unsafe {
                cfg(
                    [(pairs as u32).div_ceil(32), (batch as u32).div_ceil(32), 1],
                    [32, 8, 1],
                )
                .ptr(&g)
                .ptr_mut(&mut dz)
                .arg(batch)
                .arg(m)
                .arg(ld)
                .arg(d)
                .run(&dot_interaction_backward_tril_scatter_reference::EMU)
            };
            let mut s = vec![f32::NAN; batch * mm * mm];
            unsafe {
                cfg(
                    [((batch * mm * mm) as u32).div_ceil(512), 1, 1],
                    [128, 1, 1],
                )
                .ptr(&dz)
                .ptr_mut(&mut s)
                .arg(batch)
                .arg(m)
                .run(&dot_interaction_backward_add_transpose_reference::EMU)
            };
            for b in 0..batch {
                let mut p = 0;
                for i in 0..mm {
                    assert_eq!(s[(b * mm + i) * mm + i], 0.0);
                    for j in 0..i {
                        let want = g[b * ld + d + p];
                        assert_eq!(dz[(b * mm + i) * mm + j], want);
                        assert_eq!(dz[(b * mm + j) * mm + i], 0.0, "upper triangle untouched");
                        assert_eq!(s[(b * mm + i) * mm + j], want);
                        assert_eq!(s[(b * mm + j) * mm + i], want);
                        p += 1;
                    }
                }
            }
        }
    }

    #[test]
    fn bmm_nn_split_matches_f64_on_uneven_tiles() {
        for (batch, m, n, k) in [
            (3usize, 34usize, 37usize, 34usize),
            (2, 27, 128, 27),
            (2, 2, 5, 2),
        ] {
            let a = values(batch * m * k, 7);
            let b = values(batch * k * n, 8);
            let mut rest = vec![f32::NAN; batch * (m - 1) * n];
            let mut first = vec![f32::NAN; batch * n];
            unsafe {
                cfg(
                    [
                        batch as u32,
                        (m as u32).div_ceil(BMM_TILE),
                        (n as u32).div_ceil(BMM_TILE),
                    ],
                    [BMM_THREADS, 1, 1],
                )
                .ptr(&a)
                .ptr(&b)
                .ptr_mut(&mut rest)
                .ptr_mut(&mut first)
                .arg(m)
                .arg(n)
                .arg(k)
                .run(&dot_interaction_backward_bmm_nn_reference::EMU)
            };
            for bb in 0..batch {
                for i in 0..m {
                    for j in 0..n {
                        let want: f64 = (0..k)
                            .map(|q| {
                                a[(bb * m + i) * k + q] as f64 * b[(bb * k + q) * n + j] as f64
                            })
                            .sum();
                        let got = if i == 0 {
                            first[bb * n + j]
                        } else {
                            rest[(bb * (m - 1) + i - 1) * n + j]
                        };
                        assert!(
                            (got as f64 - want).abs() <= 1e-5 * (k as f64),
                            "({batch},{m},{n},{k}) b {bb} ({i}, {j}): {got} vs {want}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn add_reads_strided_rows() {
        let (batch, d, ld) = (37usize, 20usize, 33usize);
        let g = values(batch * ld, 10);
        let t0 = values(batch * d, 11);
        let mut dx = vec![f32::NAN; batch * d];
        unsafe {
            cfg([((batch * d) as u32).div_ceil(512), 1, 1], [128, 1, 1])
                .ptr(&g)
                .ptr(&t0)
                .ptr_mut(&mut dx)
                .arg(batch)
                .arg(d)
                .arg(ld)
                .run(&dot_interaction_backward_add_reference::EMU)
        };
        for b in 0..batch {
            for q in 0..d {
                assert_eq!(dx[b * d + q], g[b * ld + q] + t0[b * d + q]);
            }
        }
    }
}
