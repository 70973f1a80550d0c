//! Problem 11, `dot_interaction_backward`, tuned: the whole backward in one launch, one warp per
//! sample, T = [x; emb] in registers and the sample's pair gradients in shared memory; no dZ,
//! no T and no dT ever reach global memory.
//!
//! dT_i = Σ_{j≠i} G_ij·T_j with G symmetric, G_ij = grad_out[b, D + p(max(i,j), min(i,j))]
//! (problem 10's pair order p(i, j) = i(i−1)/2 + j); dx = grad_out[b, :D] + dT_0 and
//! d_emb[b] = dT_1.. .
//!
//! # The fast path (F + 1 = 27 rows, D = 128: DLRM's shape at `small` and `full`)
//! Lane l owns columns 4l .. 4l+4 of all 27 rows of T (27 coalesced 16-byte loads, 108
//! registers). The warp writes the sample's symmetric G (27 × 27, zero diagonal) into its
//! 3 KB slice of shared memory from grad_out's pair columns (coalesced loads, each pair
//! stored at (i, j) and (j, i)). Each output row i is then one FMA chain over j in order: G's
//! row i comes four entries at a time with seven broadcast 16-byte shared loads (every lane
//! reads the same address), 4 FMAs per entry, every T operand a register (row and column are
//! compile-time constants); the row goes out with one 16-byte store (dx's row adds
//! grad_out[b, :D] first). Per sample and lane: 2,808 FMAs and 189 shared loads.
//!
//! ptxas (sm_90) keeps it at 143 registers with no spills, 12 warps per SM under the launch
//! bounds. An earlier version broadcast G_ij with one shuffle each (702 per sample) from
//! registers: ptxas scheduled the shuffles early and needed 254 registers (8 warps per SM) or
//! spilled 992 bytes under these bounds.
//!
//! Memory: x, emb and grad_out read once, dx and d_emb written once: exactly the problem's
//! compulsory bytes (1.94 GB at `full`, 0.458 ms at 4.23 TB/s). The ≈ 3,100 warp instructions
//! per sample (≈ 0.2 ms over the H200's 528 schedulers) stay under the memory time.
//!
//! # Every other shape
//! Any F, D and alignment take a plain path in the same launch: for each row i, the lanes take
//! columns l, l+32, … and sum G_ij·T_j[c] from global memory, j in order.
use crate::dev::*;
use crate::kernels::dot_interaction::tril_pair;
use seq_macro::seq;

/// Rows of T = [x; emb] on the fast path: DLRM's 26 sparse features and the dense one.
pub const FAST_ROWS: usize = 27;
/// Columns on the fast path: 32 lanes × 4.
pub const FAST_DIM: usize = 128;
/// Pairs of the strictly lower triangle on the fast path.
const FAST_PAIRS: usize = FAST_ROWS * (FAST_ROWS - 1) / 2;
/// Row stride (floats) of the shared G matrix: 27 entries and a zero pad, so every row starts
/// on 16 bytes and is read with seven 16-byte loads.
const G_STRIDE: usize = FAST_ROWS + 1;
/// Floats of one warp's G.
const G_SLICE: usize = FAST_ROWS * G_STRIDE;
/// Floats of a block's G slices (static shared memory: 12,096 bytes).
pub const G_SHARED: usize = SAMPLES_PER_BLOCK as usize * G_SLICE;
const _: () = assert!(FAST_ROWS == 27, "the seq! ranges below assume 27 rows");

/// Samples (warps) per block.
pub const SAMPLES_PER_BLOCK: u32 = 4;

/// Column of G_ij (i ≠ j) among the pair gradients: problem 10's p(max, min).
const fn pair_of(i: usize, j: usize) -> usize {
    let (hi, lo) = if i > j { (i, j) } else { (j, i) };
    hi * (hi - 1) / 2 + lo
}

kernel! {
    /// Launch: block (128, 1, 1), grid ceil_div(B, 4); no dynamic shared memory, no scratch.
    /// Takes the register fast path (12,096 bytes of static shared memory) when F + 1 = 27,
    /// D = 128 and x, emb, dx and d_emb are 16-byte aligned, the plain path otherwise.
    pub unsafe fn dot_interaction_backward_tuned_warp_per_sample(
        x: *const f32,
        emb: *const f32,
        grad_out: *const f32,
        dx: *mut f32,
        d_emb: *mut f32,
        batch: i64,
        features: i64,
        dim: i64,
    ) {
        let sample = ((block_idx_x() * block_dim_x() + thread_idx_x()) / WARP_SIZE) as i64;
        if sample >= batch {
            return; // whole warps leave together
        }
        let aligned = ((x as usize) | (emb as usize) | (dx as usize) | (d_emb as usize)).is_multiple_of(16);
        if features as usize + 1 == FAST_ROWS && dim as usize == FAST_DIM && aligned {
            fast_sample(x, emb, grad_out, dx, d_emb, sample as usize);
        } else {
            let (f, d) = (features as usize, dim as usize);
            plain_sample(x, emb, grad_out, dx, d_emb, sample as usize, f, d);
        }
    }
}
launch_bounds!(dot_interaction_backward_tuned_warp_per_sample, 128, 3);

/// acc + g·t, elementwise over one lane's four columns.
#[inline(always)]
fn fma4(g: f32, t: [f32; 4], acc: [f32; 4]) -> [f32; 4] {
    [
        fma_f32(g, t[0], acc[0]),
        fma_f32(g, t[1], acc[1]),
        fma_f32(g, t[2], acc[2]),
        fma_f32(g, t[3], acc[3]),
    ]
}

/// The fast path for one sample (see the module doc). Needs 16-byte aligned x, emb, dx, d_emb.
/// `seq!` spells out literal row and column numbers, so clippy sees `0 * 4`, `I == 0` and the
/// like in the expansion, and `t[27]` in the pad column's branch, which the constant test
/// `4 * Q + C < FAST_ROWS` removes.
#[inline(always)]
#[allow(
    clippy::identity_op,
    clippy::erasing_op,
    clippy::eq_op,
    clippy::out_of_bounds_indexing
)]
unsafe fn fast_sample(
    x: *const f32,
    emb: *const f32,
    grad_out: *const f32,
    dx: *mut f32,
    d_emb: *mut f32,
    sample: usize,
) {
    let lane = lane_id() as usize;
    let col = 4 * lane;
    let mut t = [[0.0f32; 4]; FAST_ROWS];
    t[0] = load_nc_f32x4(x.add(sample * FAST_DIM + col));
    let rows = emb.add(sample * (FAST_ROWS - 1) * FAST_DIM + col);
    for (r, row) in t.iter_mut().enumerate().skip(1) {
        *row = load_nc_f32x4(rows.add((r - 1) * FAST_DIM));
    }
    // The sample's symmetric G (zero diagonal, one zero pad column) in the warp's slice of
    // shared memory, built from grad_out's pair columns (coalesced scalar loads: its rows are
    // D + P = 479 floats, not 16-byte aligned).
    let go = grad_out.add(sample * (FAST_DIM + FAST_PAIRS));
    let slices = crate::static_shared!(DOT_BWD_TUNED_G: [f32; crate::kernels::dot_interaction_backward_tuned::G_SHARED]);
    let gs = slices.add((thread_idx_x() / WARP_SIZE) as usize * G_SLICE);
    let mut p = lane;
    while p < FAST_PAIRS {
        let g = load_nc_f32(go.add(FAST_DIM + p));
        let (i, j) = tril_pair(p as u32, FAST_ROWS as u32);
        let (i, j) = (i as usize, j as usize);
        st_shared_f32(shared_addr(gs.add(i * G_STRIDE + j)), g);
        st_shared_f32(shared_addr(gs.add(j * G_STRIDE + i)), g);
        p += WARP_SIZE as usize;
    }
    if lane < FAST_ROWS {
        st_shared_f32(shared_addr(gs.add(lane * G_STRIDE + lane)), 0.0);
        st_shared_f32(shared_addr(gs.add(lane * G_STRIDE + FAST_ROWS)), 0.0);
    }
    let mut dx_row = [0.0f32; 4];
    for (c, value) in dx_row.iter_mut().enumerate() {
        *value = load_nc_f32(go.add(col + c));
    }
    sync_warp();
    let emb_out = d_emb.add(sample * (FAST_ROWS - 1) * FAST_DIM + col);
    seq!(I in 0..27 {
        // dx's row starts from grad_out[b, :D]; the others from zero.
        let mut acc = if I == 0 { dx_row } else { [0.0f32; 4] };
        // G's row I, four entries per broadcast load (every lane reads the same address).
        seq!(Q in 0..7 {
            let g4 = ld_shared_f32x4(shared_addr(gs.add(I * G_STRIDE + 4 * Q)));
            seq!(C in 0..4 {
                if 4 * Q + C < FAST_ROWS && 4 * Q + C != I {
                    acc = fma4(g4[C], t[4 * Q + C], acc);
                }
            });
        });
        if I == 0 {
            store_f32x4(dx.add(sample * FAST_DIM + col), acc);
        } else {
            store_f32x4(emb_out.add((I - 1) * FAST_DIM), acc);
        }
    });
}

/// Any shape: for each row i of dT, lane l takes columns l, l + 32, … and sums G_ij·T_j[c]
/// over j in order from global memory (dx's row from grad_out[b, c]).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn plain_sample(
    x: *const f32,
    emb: *const f32,
    grad_out: *const f32,
    dx: *mut f32,
    d_emb: *mut f32,
    sample: usize,
    features: usize,
    dim: usize,
) {
    let lane = lane_id() as usize;
    let go = grad_out.add(sample * (dim + features * (features + 1) / 2));
    let row = |r: usize| {
        if r == 0 {
            x.add(sample * dim)
        } else {
            emb.add((sample * features + r - 1) * dim)
        }
    };
    for i in 0..=features {
        let out_row = if i == 0 {
            dx.add(sample * dim)
        } else {
            d_emb.add((sample * features + i - 1) * dim)
        };
        let mut c = lane;
        while c < dim {
            let mut sum = if i == 0 { *go.add(c) } else { 0.0 };
            for j in 0..=features {
                if j != i {
                    sum = fma_f32(*go.add(dim + pair_of(i, j)), *row(j).add(c), sum);
                }
            }
            *out_row.add(c) = sum;
            c += WARP_SIZE as usize;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emu::EmuLaunch;

    /// (dx, d_emb) in f64 from the definition dT = (dZ + dZᵀ)·T, with dZ built by walking
    /// problem 10's pair order (for i in 1..m, for j in 0..i) independently of `pair_of`.
    fn backward_f64(
        x: &[f32],
        emb: &[f32],
        grad: &[f32],
        (b, f, d): (usize, usize, usize),
    ) -> (Vec<f64>, Vec<f64>) {
        let m = f + 1;
        let width = d + f * (f + 1) / 2;
        let (mut dx, mut d_emb) = (Vec::new(), Vec::new());
        for s in 0..b {
            let t = |r: usize, c: usize| -> f64 {
                if r == 0 {
                    x[s * d + c] as f64
                } else {
                    emb[(s * f + r - 1) * d + c] as f64
                }
            };
            let mut dz = vec![0.0f64; m * m];
            let mut p = 0;
            for i in 1..m {
                for j in 0..i {
                    let g = grad[s * width + d + p] as f64;
                    dz[i * m + j] += g;
                    dz[j * m + i] += g;
                    p += 1;
                }
            }
            for i in 0..m {
                for c in 0..d {
                    let dt: f64 = (0..m).map(|j| dz[i * m + j] * t(j, c)).sum();
                    if i == 0 {
                        dx.push(grad[s * width + c] as f64 + dt);
                    } else {
                        d_emb.push(dt);
                    }
                }
            }
        }
        (dx, d_emb)
    }

    fn check(b: usize, f: usize, d: usize, offset: usize) {
        let value = |i: usize, salt: usize| ((i * 7919 + salt) % 2003) as f32 / 1001.0 - 1.0;
        let width = d + f * (f + 1) / 2;
        // `offset` floats in front of x shift it off 16-byte alignment.
        let x_buf: Vec<f32> = (0..offset + b * d).map(|i| value(i, 1).abs()).collect();
        let x = &x_buf[offset..];
        let emb: Vec<f32> = (0..b * f * d).map(|i| value(i, 5)).collect();
        let grad: Vec<f32> = (0..b * width).map(|i| value(i, 11)).collect();
        let mut dx = vec![f32::NAN; b * d];
        let mut d_emb = vec![f32::NAN; b * f * d];
        unsafe {
            EmuLaunch::new(
                (b as u32).div_ceil(SAMPLES_PER_BLOCK),
                SAMPLES_PER_BLOCK * WARP_SIZE,
            )
            .ptr(x)
            .ptr(&emb)
            .ptr(&grad)
            .ptr_mut(&mut dx)
            .ptr_mut(&mut d_emb)
            .arg(b)
            .arg(f)
            .arg(d)
            .run(&dot_interaction_backward_tuned_warp_per_sample::EMU);
        }
        let (want_dx, want_emb) = backward_f64(x, &emb, &grad, (b, f, d));
        for (name, got, want) in [("dx", &dx, &want_dx), ("d_emb", &d_emb, &want_emb)] {
            assert_eq!(got.len(), want.len());
            for (k, (&g, &w)) in got.iter().zip(want.iter()).enumerate() {
                // Sums of ≤ 33 products of magnitude ≤ 1: fp32 rounding stays far below 1e-4.
                assert!(
                    (g as f64 - w).abs() <= 1e-4 * w.abs().max(1.0),
                    "B {b} F {f} D {d} offset {offset}: {name}[{k}]: got {g}, want {w}"
                );
            }
        }
    }

    #[test]
    fn the_register_path_matches_f64_at_dlrm_shape() {
        // B = 6: two blocks, the second with two idle warps.
        check(6, FAST_ROWS - 1, FAST_DIM, 0);
    }

    #[test]
    fn the_plain_path_matches_f64_on_uneven_and_unaligned_shapes() {
        for (b, f, d, offset) in [(5, 6, 36, 0), (3, 33, 20, 0), (5, 1, 8, 0), (3, 26, 128, 1)] {
            check(b, f, d, offset);
        }
    }

    #[test]
    fn pair_of_is_problem_10s_order_both_ways_round() {
        let mut p = 0;
        for i in 1..FAST_ROWS {
            for j in 0..i {
                assert_eq!((pair_of(i, j), pair_of(j, i)), (p, p));
                p += 1;
            }
        }
        assert_eq!(p, FAST_PAIRS);
    }
}
