//! Problem 12, `fm_interaction` (DeepFM's second-order term): x [B, F, K] fp32 →
//! out [B] = ½ Σ_k ((Σ_f x[b, f, k])² − Σ_f x[b, f, k]²).
//!
//! The reference mirrors the eager `Model` of `bench-problems/kernelbench/12_fm_interaction.py`
//! launch for launch (seven launches, two [B, K] and one [B, F, K] temporaries in scratch):
//! 1. `s = torch.sum(x, dim=1)`: [`fm_interaction_sum_dim1_reference`] (PyTorch's
//!    `reduce_kernel` for a reduction over a non-innermost dimension: each thread reduces its
//!    outputs serially, four adjacent outputs with 16-byte loads when K allows);
//! 2. `s.pow(2)`: [`fm_interaction_square_reference`] (`pow_tensor_scalar_optimized_kernel`,
//!    x·x, vectorized);
//! 3. `x.pow(2)`: [`fm_interaction_square_reference`] over the whole [B, F, K] input;
//! 4. `torch.sum(…, dim=1)`: [`fm_interaction_sum_dim1_reference`] on that temporary;
//! 5. `square_of_sum - sum_of_square`: [`fm_interaction_sub_reference`];
//! 6. `torch.sum(…, dim=1)` over K: [`fm_interaction_sum_last_reference`] (a reduction over the
//!    innermost dimension: 16 lanes per row and warp shuffles);
//! 7. `0.5 * …`: [`fm_interaction_scale_reference`].
use crate::dev::*;

/// Runs `vec(e)` for each whole 4-element chunk [e, e+4) of 0..n this thread owns
/// (grid-stride over chunks) and `one(e)` for the elements of a chunk cut by n.
#[inline(always)]
unsafe fn for_each_chunk(n: u32, mut vec: impl FnMut(usize), mut one: impl FnMut(usize)) {
    let threads = grid_dim_x() * block_dim_x();
    let mut e = (block_idx_x() * block_dim_x() + thread_idx_x()) * 4;
    while e < n {
        if e + 4 <= n {
            vec(e as usize);
        } else {
            let mut q = e;
            while q < n {
                one(q as usize);
                q += 1;
            }
        }
        e += threads * 4;
    }
}

/// True when every pointer is 16-byte aligned.
#[inline(always)]
fn aligned16(ptrs: &[usize]) -> bool {
    ptrs.iter().all(|p| p.is_multiple_of(16))
}

kernel! {
    /// `out[o, c] = Σ_{f < r} x[o, f, c]` for x [outer, r, inner] (sum over dim 1).
    ///
    /// When inner % 4 == 0 (and both pointers are 16-byte aligned) each thread owns four
    /// adjacent outputs and reads them with one 16-byte load per f, four loads in flight
    /// before the adds; otherwise one output per thread. Summation over f is in order, fp32.
    /// Grid-stride over output groups.
    ///
    /// Launch: block (128, 1, 1), grid (ceil_div(outer·inner, 512), 1, 1).
    pub unsafe fn fm_interaction_sum_dim1_reference(
        x: *const f32,
        out: *mut f32,
        outer: u32,
        r: u32,
        inner: u32,
    ) {
        let threads = grid_dim_x() * block_dim_x();
        let tid = block_idx_x() * block_dim_x() + thread_idx_x();
        let (inner_, r_) = (inner as usize, r as usize);
        if inner.is_multiple_of(4) && aligned16(&[x as usize, out as usize]) {
            let groups = inner / 4;
            let units = outer * groups;
            let mut u = tid;
            while u < units {
                let (o, c) = ((u / groups) as usize, (u % groups) as usize * 4);
                let base = x.add(o * r_ * inner_ + c);
                let mut acc = [0.0f32; 4];
                let mut f = 0usize;
                while f + 4 <= r_ {
                    let v0 = load_nc_f32x4(base.add(f * inner_));
                    let v1 = load_nc_f32x4(base.add((f + 1) * inner_));
                    let v2 = load_nc_f32x4(base.add((f + 2) * inner_));
                    let v3 = load_nc_f32x4(base.add((f + 3) * inner_));
                    for q in 0..4 {
                        acc[q] = acc[q] + v0[q] + v1[q] + v2[q] + v3[q];
                    }
                    f += 4;
                }
                while f < r_ {
                    let v = load_nc_f32x4(base.add(f * inner_));
                    for q in 0..4 {
                        acc[q] += v[q];
                    }
                    f += 1;
                }
                store_f32x4(out.add(o * inner_ + c), acc);
                u += threads;
            }
        } else {
            let units = outer * inner;
            let mut u = tid;
            while u < units {
                let (o, c) = ((u / inner) as usize, (u % inner) as usize);
                let base = x.add(o * r_ * inner_ + c);
                let mut acc = 0.0f32;
                for f in 0..r_ {
                    acc += *base.add(f * inner_);
                }
                *out.add(o * inner_ + c) = acc;
                u += threads;
            }
        }
    }
}

kernel! {
    /// `out[i] = x[i] · x[i]` for i < n (`pow(2)`), 16-byte loads and stores.
    ///
    /// Launch: block (128, 1, 1), grid (ceil_div(n, 512), 1, 1).
    pub unsafe fn fm_interaction_square_reference(x: *const f32, out: *mut f32, n: u32) {
        if aligned16(&[x as usize, out as usize]) {
            for_each_chunk(
                n,
                |e| {
                    let v = load_nc_f32x4(x.add(e));
                    store_f32x4(out.add(e), [v[0] * v[0], v[1] * v[1], v[2] * v[2], v[3] * v[3]]);
                },
                |e| *out.add(e) = *x.add(e) * *x.add(e),
            );
        } else {
            for_each_chunk(
                n,
                |e| {
                    for q in e..e + 4 {
                        *out.add(q) = *x.add(q) * *x.add(q);
                    }
                },
                |e| *out.add(e) = *x.add(e) * *x.add(e),
            );
        }
    }
}

kernel! {
    /// `out[i] = a[i] − b[i]` for i < n, 16-byte loads and stores.
    ///
    /// Launch: block (128, 1, 1), grid (ceil_div(n, 512), 1, 1).
    pub unsafe fn fm_interaction_sub_reference(a: *const f32, b: *const f32, out: *mut f32, n: u32) {
        if aligned16(&[a as usize, b as usize, out as usize]) {
            for_each_chunk(
                n,
                |e| {
                    let (u, v) = (load_nc_f32x4(a.add(e)), load_nc_f32x4(b.add(e)));
                    store_f32x4(out.add(e), [u[0] - v[0], u[1] - v[1], u[2] - v[2], u[3] - v[3]]);
                },
                |e| *out.add(e) = *a.add(e) - *b.add(e),
            );
        } else {
            for_each_chunk(
                n,
                |e| {
                    for q in e..e + 4 {
                        *out.add(q) = *a.add(q) - *b.add(q);
                    }
                },
                |e| *out.add(e) = *a.add(e) - *b.add(e),
            );
        }
    }
}

kernel! {
    /// `out[o] = Σ_{c < r} x[o, c]` for x [outer, r] (sum over the innermost dimension): a
    /// block of (16, 16) threads handles 16 rows, the 16 lanes of a row stride over it and
    /// combine by shuffles (xor 8, 4, 2, 1 stays inside the half-warp).
    ///
    /// Launch: block (16, 16, 1), grid (ceil_div(outer, 16), 1, 1).
    pub unsafe fn fm_interaction_sum_last_reference(x: *const f32, out: *mut f32, outer: u32, r: u32) {
        let o = block_idx_x() * 16 + thread_idx_y();
        let mut acc = 0.0f32;
        if o < outer {
            let mut c = thread_idx_x();
            while c < r {
                acc += *x.add(o as usize * r as usize + c as usize);
                c += 16;
            }
        }
        // Every lane of the warp takes part in the shuffles, rows past `outer` included.
        let mut mask = 8;
        while mask > 0 {
            acc += shfl_xor_f32(acc, mask);
            mask /= 2;
        }
        if o < outer && thread_idx_x() == 0 {
            *out.add(o as usize) = acc;
        }
    }
}

kernel! {
    /// `out[i] = alpha · x[i]` for i < n (`0.5 * t`), 16-byte loads and stores.
    ///
    /// Launch: block (128, 1, 1), grid (ceil_div(n, 512), 1, 1).
    pub unsafe fn fm_interaction_scale_reference(x: *const f32, out: *mut f32, n: u32, alpha: f32) {
        if aligned16(&[x as usize, out as usize]) {
            for_each_chunk(
                n,
                |e| {
                    let v = load_nc_f32x4(x.add(e));
                    store_f32x4(out.add(e), [alpha * v[0], alpha * v[1], alpha * v[2], alpha * v[3]]);
                },
                |e| *out.add(e) = alpha * *x.add(e),
            );
        } else {
            for_each_chunk(
                n,
                |e| {
                    for q in e..e + 4 {
                        *out.add(q) = alpha * *x.add(q);
                    }
                },
                |e| *out.add(e) = alpha * *x.add(e),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::dot_interaction::tests::values;
    use super::*;
    use crate::emu::EmuLaunch;

    #[test]
    fn sum_dim1_matches_plain_rust_on_both_paths() {
        // inner 16 (vector path, r with a tail of 3), inner 10 (scalar path), outer 37.
        for (outer, r, inner) in [(37usize, 7usize, 16usize), (37, 5, 10), (3, 39, 4)] {
            let x = values(outer * r * inner, 12);
            let mut out = vec![f32::NAN; outer * inner];
            // One block only: the grid-stride loop must cover everything.
            unsafe {
                EmuLaunch::new(1, 128)
                    .ptr(&x)
                    .ptr_mut(&mut out)
                    .arg(outer)
                    .arg(r)
                    .arg(inner)
                    .run(&fm_interaction_sum_dim1_reference::EMU)
            };
            for o in 0..outer {
                for c in 0..inner {
                    let want: f64 = (0..r).map(|f| x[(o * r + f) * inner + c] as f64).sum();
                    let got = out[o * inner + c] as f64;
                    assert!(
                        (got - want).abs() < 1e-5,
                        "({outer},{r},{inner}) [{o},{c}] {got} vs {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn elementwise_kernels_cover_ragged_lengths() {
        for n in [1usize, 6, 515, 1029] {
            let a = values(n, 13);
            let b = values(n, 14);
            let grid = (n as u32).div_ceil(512);
            let mut sq = vec![f32::NAN; n];
            unsafe {
                EmuLaunch::new(grid, 128)
                    .ptr(&a)
                    .ptr_mut(&mut sq)
                    .arg(n)
                    .run(&fm_interaction_square_reference::EMU)
            };
            let mut diff = vec![f32::NAN; n];
            unsafe {
                EmuLaunch::new(grid, 128)
                    .ptr(&a)
                    .ptr(&b)
                    .ptr_mut(&mut diff)
                    .arg(n)
                    .run(&fm_interaction_sub_reference::EMU)
            };
            let mut half = vec![f32::NAN; n];
            unsafe {
                EmuLaunch::new(grid, 128)
                    .ptr(&a)
                    .ptr_mut(&mut half)
                    .arg(n)
                    .arg(0.5f32)
                    .run(&fm_interaction_scale_reference::EMU)
            };
            for i in 0..n {
                assert_eq!(sq[i], a[i] * a[i]);
                assert_eq!(diff[i], a[i] - b[i]);
                assert_eq!(half[i], 0.5 * a[i]);
            }
        }
    }

    #[test]
    fn sum_last_reduces_rows_with_shuffles() {
        // 37 rows: the last block holds rows past `outer`; r = 16 (one per lane) and r = 39.
        for (outer, r) in [(37usize, 16usize), (37, 39), (1, 3)] {
            let x = values(outer * r, 15);
            let mut out = vec![f32::NAN; outer];
            unsafe {
                EmuLaunch::new((outer as u32).div_ceil(16), [16, 16, 1])
                    .ptr(&x)
                    .ptr_mut(&mut out)
                    .arg(outer)
                    .arg(r)
                    .run(&fm_interaction_sum_last_reference::EMU)
            };
            for o in 0..outer {
                let want: f64 = x[o * r..(o + 1) * r].iter().map(|&v| v as f64).sum();
                assert!(
                    (out[o] as f64 - want).abs() < 1e-5,
                    "row {o}: {} vs {want}",
                    out[o]
                );
            }
        }
    }
}
