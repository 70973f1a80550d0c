//! Problem 10, `dot_interaction`, tuned: the whole interaction in one launch, one warp per
//! sample, T = [x; emb] held in registers and never written anywhere.
//!
//! # The fast path (F + 1 = 27 rows, D = 128: DLRM's shape at `small` and `full`)
//! Lane l owns columns 4l .. 4l+4 of all 27 rows of T (27 coalesced 16-byte loads issued before
//! any use, 108 registers). The 351 pairs are taken 32 at a time: for each pair of a group the
//! lane forms the partial dot product over its four columns (an fp32 FMA chain, no shared
//! memory, pair rows known at compile time so every operand is a register), then one
//! reduce-scatter across the warp (five butterfly steps of 16, 8, 4, 2, 1 shuffles: 31
//! shuffles and 31 adds for 32 sums) leaves the full dot product of pair 32g + l in lane l,
//! which stores it: one coalesced 128-byte store per group. Per sample and lane that is 1,408
//! FMAs, 341 shuffles and 11 stores; x is copied to out[b, :D] from the same registers.
//! ptxas (sm_90) keeps it at 128 registers with no spills: 16 warps per SM under the launch
//! bounds.
//!
//! Memory: x and emb read once (16-byte loads), out written once: exactly the problem's
//! compulsory bytes (1.03 GB at `full`, 0.243 ms at the H200's 4.23 TB/s). The instruction
//! count (≈ 2,800 warp instructions per sample, ≈ 0.18 ms over 528 schedulers) stays under the
//! memory time, so the kernel is meant to stream at HBM speed.
//!
//! The same path takes D = 64 and D = 32 at F = 26 (lanes own 2 or 1 columns: 54 or 27
//! registers of T, 8-byte or 4-byte loads): an H200 run at every shape
//! (`results/20261205T110304Z-gpu-full-shapes-cut`) measured the plain path below at 0.20x the
//! reference for D = 64.
//!
//! # Every other shape
//! Any other F, D and alignment take a plain path in the same launch: lane l computes pairs l,
//! l+32, … from global memory (the sample's rows stay in L1), one FMA chain per pair in k
//! order.
use crate::dev::*;
use crate::kernels::dot_interaction::tril_pair;
use seq_macro::seq;

/// Rows of T = [x; emb] on the fast path: DLRM's 26 sparse features and the dense one.
pub const FAST_ROWS: usize = 27;
/// Columns on the widest fast path: 32 lanes × 4 (D = 64 and 32 take 2 and 1 a lane).
pub const FAST_DIM: usize = 128;
/// Pairs of the strictly lower triangle on the fast path.
const FAST_PAIRS: usize = FAST_ROWS * (FAST_ROWS - 1) / 2;
/// Groups of 32 pairs (the last one partial); `seq!` below spells the count out.
const FAST_GROUPS: usize = FAST_PAIRS.div_ceil(32);
const _: () = assert!(
    FAST_GROUPS == 11,
    "the seq! ranges below assume 11 groups of 32 pairs"
);

/// Samples (warps) per block.
pub const SAMPLES_PER_BLOCK: u32 = 4;

/// (i, j) of every pair slot in DLRM's order (p = i(i−1)/2 + j), padded to whole groups with
/// (0, 0), whose sums are computed and never stored.
const PAIR_ROWS: [(usize, usize); FAST_GROUPS * 32] = pair_rows();

const fn pair_rows() -> [(usize, usize); FAST_GROUPS * 32] {
    let mut rows = [(0, 0); FAST_GROUPS * 32];
    let (mut p, mut i) = (0, 1);
    while i < FAST_ROWS {
        let mut j = 0;
        while j < i {
            rows[p] = (i, j);
            p += 1;
            j += 1;
        }
        i += 1;
    }
    rows
}

kernel! {
    /// Launch: block (128, 1, 1), grid ceil_div(B, 4); no shared memory, no scratch. Takes the
    /// register fast path when F + 1 = 27 and D = 128, 64 or 32 with x and emb aligned to a
    /// lane's columns (16, 8 or 4 bytes), the plain path otherwise.
    pub unsafe fn dot_interaction_tuned_warp_per_sample(
        x: *const f32,
        emb: *const f32,
        out: *mut f32,
        batch: i64,
        features: i64,
        dim: i64,
    ) {
        let sample = ((block_idx_x() * block_dim_x() + thread_idx_x()) / WARP_SIZE) as i64;
        if sample >= batch {
            return; // whole warps leave together
        }
        let aligned = |bytes: usize| ((x as usize) | (emb as usize)).is_multiple_of(bytes);
        let rows = features as usize + 1 == FAST_ROWS;
        match dim {
            128 if rows && aligned(16) => fast_sample::<4>(x, emb, out, sample as usize),
            64 if rows && aligned(8) => fast_sample::<2>(x, emb, out, sample as usize),
            32 if rows => fast_sample::<1>(x, emb, out, sample as usize),
            _ => plain_sample(x, emb, out, sample as usize, features as usize, dim as usize),
        }
    }
}
launch_bounds!(dot_interaction_tuned_warp_per_sample, 128, 4);

/// One butterfly step of the reduce-scatter: `v` holds 2h partial sums; lanes with bit `h`
/// clear keep the lower h (adding their partner's), lanes with it set keep the upper h.
macro_rules! halve {
    ($v:expr, $h:literal, $lane:expr) => {{
        let upper = $lane & $h != 0;
        let mut kept = [0.0f32; $h];
        for i in 0..$h {
            let (low, high) = ($v[i], $v[i + $h]);
            let (keep, send) = if upper { (high, low) } else { (low, high) };
            kept[i] = keep + shfl_xor_f32(send, $h);
        }
        kept
    }};
}

/// Lane l gets Σ over the warp's lanes of `v[l]`: 31 shuffles and 31 adds for 32 sums.
#[inline(always)]
pub fn reduce_scatter_32(v: [f32; 32], lane: u32) -> f32 {
    let v = halve!(v, 16, lane);
    let v = halve!(v, 8, lane);
    let v = halve!(v, 4, lane);
    let v = halve!(v, 2, lane);
    let v = halve!(v, 1, lane);
    v[0]
}

/// Σ a[c]·b[c] over one lane's `C` columns: one FMA chain.
#[inline(always)]
fn dot<const C: usize>(a: [f32; C], b: [f32; C]) -> f32 {
    let mut sum = a[0] * b[0];
    for c in 1..C {
        sum = fma_f32(a[c], b[c], sum);
    }
    sum
}

/// A lane's `C` consecutive columns at `p` (C = 4, 2 or 1) in one read-only load of 16, 8 or
/// 4 bytes; `p` aligned to it. Indexed loops, not slice copies: they unroll and stay in
/// registers.
#[inline(always)]
#[allow(clippy::manual_memcpy)]
unsafe fn load_cols<const C: usize>(p: *const f32) -> [f32; C] {
    let mut v = [0.0f32; C];
    if C == 4 {
        let q = load_nc_f32x4(p);
        for c in 0..C.min(4) {
            v[c] = q[c];
        }
    } else if C == 2 {
        let q = load_nc_u32x2(p as *const u32);
        for c in 0..C.min(2) {
            v[c] = f32::from_bits(q[c]);
        }
    } else {
        v[0] = load_nc_f32(p);
    }
    v
}

/// The fast path for one sample (see the module doc) at D = 32·C: lane l owns columns
/// C·l .. C·l + C. Needs x and emb aligned to 4·C bytes. `seq!` spells out literal group and
/// slot numbers, so clippy sees `0 * 32` and the like in the expansion.
#[inline(always)]
#[allow(clippy::identity_op, clippy::erasing_op, clippy::eq_op)]
unsafe fn fast_sample<const C: usize>(
    x: *const f32,
    emb: *const f32,
    out: *mut f32,
    sample: usize,
) {
    let dim = WARP_SIZE as usize * C;
    let lane = lane_id();
    let col = C * lane as usize;
    let mut t = [[0.0f32; C]; FAST_ROWS];
    t[0] = load_cols::<C>(x.add(sample * dim + col));
    let rows = emb.add(sample * (FAST_ROWS - 1) * dim + col);
    for (r, row) in t.iter_mut().enumerate().skip(1) {
        *row = load_cols::<C>(rows.add((r - 1) * dim));
    }
    // Output rows are D + P floats (479 at D = 128): not aligned, so scalar stores.
    let o = out.add(sample * (dim + FAST_PAIRS));
    for (c, value) in t[0].iter().enumerate() {
        *o.add(col + c) = *value;
    }
    seq!(G in 0..11 {
        let mut partial = [0.0f32; 32];
        seq!(S in 0..32 {
            partial[S] = dot::<C>(t[PAIR_ROWS[G * 32 + S].0], t[PAIR_ROWS[G * 32 + S].1]);
        });
        let sum = reduce_scatter_32(partial, lane);
        let p = G * 32 + lane as usize;
        if p < FAST_PAIRS {
            *o.add(dim + p) = sum;
        }
    });
}

/// Any shape: x copied by the lanes in turn, then lane l takes pairs l, l + 32, … (DLRM's
/// order), each one FMA chain over k from global memory.
#[inline(always)]
unsafe fn plain_sample(
    x: *const f32,
    emb: *const f32,
    out: *mut f32,
    sample: usize,
    features: usize,
    dim: usize,
) {
    let lane = lane_id() as usize;
    let pairs = features * (features + 1) / 2;
    let o = out.add(sample * (dim + pairs));
    let xs = x.add(sample * dim);
    let row = |r: usize| {
        if r == 0 {
            xs
        } else {
            emb.add((sample * features + r - 1) * dim)
        }
    };
    let mut c = lane;
    while c < dim {
        *o.add(c) = *xs.add(c);
        c += WARP_SIZE as usize;
    }
    let mut p = lane;
    while p < pairs {
        let (i, j) = tril_pair(p as u32, features as u32 + 1);
        let (a, b) = (row(i as usize), row(j as usize));
        let mut sum = 0.0f32;
        for k in 0..dim {
            sum = fma_f32(*a.add(k), *b.add(k), sum);
        }
        *o.add(dim + p) = sum;
        p += WARP_SIZE as usize;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emu::EmuLaunch;

    /// out [B, D + P] in f64 by the definition, pairs enumerated independently of the kernel's
    /// tables (for i in 1..m, for j in 0..i).
    fn forward_f64(x: &[f32], emb: &[f32], b: usize, f: usize, d: usize) -> Vec<f64> {
        let mut out = Vec::new();
        for s in 0..b {
            let row = |r: usize| -> Vec<f64> {
                let src = if r == 0 {
                    &x[s * d..(s + 1) * d]
                } else {
                    &emb[(s * f + r - 1) * d..(s * f + r) * d]
                };
                src.iter().map(|&v| v as f64).collect()
            };
            out.extend(row(0));
            for i in 1..=f {
                for j in 0..i {
                    out.push(row(i).iter().zip(row(j)).map(|(u, v)| u * v).sum());
                }
            }
        }
        out
    }

    fn run(b: usize, f: usize, d: usize, offset: usize) -> (Vec<f32>, Vec<f64>) {
        let value = |i: usize, salt: usize| ((i * 7919 + salt) % 2003) as f32 / 1001.0 - 1.0;
        // `offset` floats of padding in front of x shift it off 16-byte alignment.
        let x_buf: Vec<f32> = (0..offset + b * d).map(|i| value(i, 1).abs()).collect();
        let emb: Vec<f32> = (0..b * f * d).map(|i| value(i, 5)).collect();
        let x = &x_buf[offset..];
        let width = d + f * (f + 1) / 2;
        let mut out = vec![f32::NAN; b * width];
        unsafe {
            EmuLaunch::new(
                (b as u32).div_ceil(SAMPLES_PER_BLOCK),
                SAMPLES_PER_BLOCK * WARP_SIZE,
            )
            .ptr(x)
            .ptr(&emb)
            .ptr_mut(&mut out)
            .arg(b)
            .arg(f)
            .arg(d)
            .run(&dot_interaction_tuned_warp_per_sample::EMU);
        }
        (out, forward_f64(x, &emb, b, f, d))
    }

    fn assert_close(got: &[f32], want: &[f64], what: &str) {
        assert_eq!(got.len(), want.len());
        for (k, (&g, &w)) in got.iter().zip(want).enumerate() {
            // Sums of ≤ 128 products of magnitude ≤ 1: fp32 rounding stays far below 1e-4.
            assert!(
                (g as f64 - w).abs() <= 1e-4 * w.abs().max(1.0),
                "{what}: element {k}: got {g}, want {w}"
            );
        }
    }

    #[test]
    fn the_register_path_matches_f64_at_dlrm_shape() {
        // B = 6: two blocks, the second with two idle warps.
        let (got, want) = run(6, FAST_ROWS - 1, FAST_DIM, 0);
        assert_close(&got, &want, "F = 26, D = 128");
    }

    #[test]
    fn the_register_path_matches_f64_at_d64_and_d32() {
        for d in [64, 32] {
            let (got, want) = run(6, FAST_ROWS - 1, d, 0);
            assert_close(&got, &want, &format!("F = 26, D = {d}"));
        }
    }

    #[test]
    fn the_plain_path_matches_f64_on_uneven_and_unaligned_shapes() {
        // (3, 26, 64, 1): D = 64 off 8-byte alignment takes the plain path.
        for (b, f, d, offset) in [
            (5, 6, 36, 0),
            (3, 33, 20, 0),
            (5, 1, 8, 0),
            (3, 26, 128, 1),
            (3, 26, 64, 1),
        ] {
            let (got, want) = run(b, f, d, offset);
            assert_close(&got, &want, &format!("B {b} F {f} D {d} offset {offset}"));
        }
    }

    #[test]
    fn the_pair_table_is_dlrm_order_padded_with_row_zero() {
        let mut seen = 0;
        for (p, &(i, j)) in PAIR_ROWS.iter().enumerate().take(FAST_PAIRS) {
            assert_eq!(tril_pair(p as u32, FAST_ROWS as u32), (i as u32, j as u32));
            seen += 1;
        }
        assert_eq!(seen, 351);
        assert!(PAIR_ROWS[FAST_PAIRS..].iter().all(|&r| r == (0, 0)));
    }
}
