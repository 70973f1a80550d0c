//! Problem 12, `fm_interaction`, tuned: one pass over x, four lanes per sample.
//!
//! out[b] = ½ Σ_k ((Σ_f x[b, f, k])² − Σ_f x[b, f, k]²). Lane j of a sample's group of four
//! owns a quarter of the K columns and sums x and x² over the F fields for each of them, then
//! forms its share Σ_k (s_k² − q_k) (the reference's per-column order, so a NaN or ±inf in x
//! gives the same non-finite output); two shuffles add the four shares and the group's first
//! lane stores ½ of the total. 8 samples per warp, 64 per 256-thread block.
//!
//! # Fast path (K = 16, x 16-byte aligned: Criteo's 39 fields at K = 16 at `small` and `full`)
//! Lane j owns columns 4j .. 4j+4 and reads them with one 16-byte non-coherent load per
//! field; the 4 lanes of a sample read its 64-byte field rows whole, so every sector of x is
//! read once and fully. Loads go out [`FIELDS_IN_FLIGHT`] fields at a time (13: three rounds
//! for F = 39, 208 bytes in flight per lane) before they are summed, fields in order.
//!
//! Memory: x read once and out written once, the problem's compulsory bytes (655 MB at
//! `full`: 0.155 ms at 4.23 TB/s); the arithmetic (three flops per element) is negligible. The
//! CUDA example with the same layout but four fields in flight ran at 69% of that floor.
//!
//! # Every other shape
//! Lane j takes columns j, j + 4, … with scalar loads (any K, any alignment).
use crate::dev::*;
use seq_macro::seq;

/// Lanes per sample.
pub const LANES_PER_SAMPLE: u32 = 4;
/// Fields whose loads are issued before any of them is summed, on the fast path.
pub const FIELDS_IN_FLIGHT: usize = 13;
const _: () = assert!(
    FIELDS_IN_FLIGHT == 13,
    "the seq! ranges in fast_share spell out 13"
);
/// Columns on the fast path: 4 lanes × 4.
const FAST_K: usize = 16;

kernel! {
    /// Launch: block (256, 1, 1), grid ceil_div(B·4, 256); no shared memory, no scratch.
    pub unsafe fn fm_interaction_tuned_four_lanes(
        x: *const f32,
        out: *mut f32,
        batch: i64,
        fields: i64,
        k: i64,
    ) {
        let thread = block_idx_x() * block_dim_x() + thread_idx_x();
        let sample = (thread / LANES_PER_SAMPLE) as usize;
        let part = (thread % LANES_PER_SAMPLE) as usize;
        let (f, k) = (fields as usize, k as usize);
        // Every lane of the warp takes part in the shuffles below; past B it adds nothing.
        let share = if (sample as i64) < batch {
            let xs = x.add(sample * f * k);
            if k == FAST_K && (x as usize).is_multiple_of(16) {
                fast_share(xs.add(4 * part), f)
            } else {
                plain_share(xs, f, k, part)
            }
        } else {
            0.0
        };
        let total = share + shfl_xor_f32(share, 1);
        let total = total + shfl_xor_f32(total, 2);
        if part == 0 && (sample as i64) < batch {
            *out.add(sample) = 0.5 * total;
        }
    }
}

/// Σ over one lane's four columns of (s_k² − q_k), reading `col` (16-byte aligned) of each of
/// the `fields` rows of 16 floats.
#[allow(clippy::identity_op)] // `field + 0` from the `seq!` expansion
#[inline(always)]
unsafe fn fast_share(col: *const f32, fields: usize) -> f32 {
    let mut sum = [0.0f32; 4];
    let mut sq = [0.0f32; 4];
    let mut accumulate = |v: [f32; 4]| {
        for c in 0..4 {
            sum[c] += v[c];
            sq[c] = fma_f32(v[c], v[c], sq[c]);
        }
    };
    let mut field = 0;
    while field + FIELDS_IN_FLIGHT <= fields {
        // Written out (`seq!`), so that every `batch[i]` is a register: as loops, LLVM kept the
        // loads unrolled but summed them in a loop that picked `batch[i]` out of the 52
        // registers by index each time, ≈ 150 instructions a field, 6300 a warp (Nsight
        // Compute: 206M warp instructions, the SMs 90% busy, 0.38 ms).
        let mut batch = [[0.0f32; 4]; FIELDS_IN_FLIGHT];
        seq!(I in 0..13 {
            batch[I] = load_nc_f32x4(col.add((field + I) * FAST_K));
        });
        seq!(I in 0..13 {
            accumulate(batch[I]);
        });
        field += FIELDS_IN_FLIGHT;
    }
    while field < fields {
        accumulate(load_nc_f32x4(col.add(field * FAST_K)));
        field += 1;
    }
    let mut share = 0.0f32;
    for c in 0..4 {
        share += sum[c] * sum[c] - sq[c];
    }
    share
}

/// Σ over columns part, part + 4, … of (s_k² − q_k), scalar loads.
#[inline(always)]
unsafe fn plain_share(xs: *const f32, fields: usize, k: usize, part: usize) -> f32 {
    let mut share = 0.0f32;
    let mut c = part;
    while c < k {
        let (mut sum, mut sq) = (0.0f32, 0.0f32);
        for field in 0..fields {
            let v = load_nc_f32(xs.add(field * k + c));
            sum += v;
            sq = fma_f32(v, v, sq);
        }
        share += sum * sum - sq;
        c += LANES_PER_SAMPLE as usize;
    }
    share
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emu::EmuLaunch;

    /// Σ_{f < g} ⟨x_f, x_g⟩ in f64: the pairwise form, independent of the kernel's formula.
    fn fm_pairs_f64(x: &[f32], b: usize, f: usize, k: usize) -> Vec<f64> {
        (0..b)
            .map(|s| {
                let v = |g: usize, c: usize| x[(s * f + g) * k + c] as f64;
                let mut total = 0.0;
                for g in 0..f {
                    for h in g + 1..f {
                        total += (0..k).map(|c| v(g, c) * v(h, c)).sum::<f64>();
                    }
                }
                total
            })
            .collect()
    }

    fn run(x: &[f32], b: usize, f: usize, k: usize) -> Vec<f32> {
        let mut out = vec![f32::NAN; b];
        unsafe {
            EmuLaunch::new((b as u32 * LANES_PER_SAMPLE).div_ceil(256), 256)
                .ptr(x)
                .ptr_mut(&mut out)
                .arg(b)
                .arg(f)
                .arg(k)
                .run(&fm_interaction_tuned_four_lanes::EMU);
        }
        out
    }

    fn value(i: usize) -> f32 {
        ((i * 7919 + 3) % 2003) as f32 / 1001.0 - 1.0
    }

    #[test]
    fn both_paths_match_the_pairwise_sum() {
        // (B, F, K, offset): the fast path with F = 39 (three full rounds) and F = 30 (two
        // rounds and a remainder); the plain path for K = 7, K = 3 (< 4 lanes) and an
        // unaligned x at K = 16. B = 70: a second, partial block.
        for (b, f, k, offset) in [
            (70, 39, 16, 0),
            (9, 30, 16, 0),
            (70, 7, 7, 0),
            (5, 4, 3, 0),
            (9, 39, 16, 1),
        ] {
            let buf: Vec<f32> = (0..offset + b * f * k).map(value).collect();
            let x = &buf[offset..];
            let got = run(x, b, f, k);
            for (s, (&g, w)) in got.iter().zip(fm_pairs_f64(x, b, f, k)).enumerate() {
                // ≈ F²K/2 products of magnitude ≤ 1 in fp32: well under 1e-4 of max(|w|, F·K).
                let scale = w.abs().max((f * k) as f64);
                assert!(
                    (g as f64 - w).abs() <= 1e-4 * scale,
                    "B {b} F {f} K {k} offset {offset}: sample {s}: got {g}, want {w}"
                );
            }
        }
    }

    #[test]
    fn a_non_finite_input_gives_nan_like_the_reference() {
        let (b, f, k) = (8, 39, 16);
        for special in [f32::INFINITY, f32::NEG_INFINITY, f32::NAN] {
            let mut x: Vec<f32> = (0..b * f * k).map(value).collect();
            x[3 * f * k + 5 * k + 9] = special; // sample 3, field 5, column 9
            let got = run(&x, b, f, k);
            // The reference's (s_k² − q_k) is inf − inf or NaN at column 9.
            assert!(got[3].is_nan(), "{special}: sample 3 gave {}", got[3]);
            assert!(got.iter().enumerate().all(|(s, v)| s == 3 || v.is_finite()));
        }
    }
}
