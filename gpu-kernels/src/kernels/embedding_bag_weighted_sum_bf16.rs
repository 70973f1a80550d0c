//! Problem 2, `embedding_bag_weighted_sum_bf16`:
//! out[b, :] = bf16(Σ_{j ∈ offsets[b]..offsets[b+1]} per_sample_weights[j] · weight[indices[j], :]),
//! bf16 table, bf16 per-sample weights, fp32 accumulation, bf16 output.
//!
//! [`embedding_bag_weighted_sum_bf16_reference`] mirrors PyTorch eager's
//! `EmbeddingBag_updateOutputKernel_sum_mean<BFloat16, int64_t>` with per-sample weights
//! (aten/src/ATen/native/cuda/EmbeddingBag.cu), as `F.embedding_bag(..., mode="sum",
//! per_sample_weights=...)` launches it: one thread per (bag, column), blocks of (32, 8), a
//! grid-stride loop over (bag, 32-column chunk), scalar 2-byte loads, each value widened to f32
//! exactly, `acc += w_j · x` as one fused multiply-add (what nvcc contracts it to), the sum
//! rounded to bf16 to nearest even, and the `offset2bag` and `bag_size` side outputs. Its loop
//! is `eager_bag.rs`'s, shared with problem 1's reference.
//!
//! The project's tuned kernel, `embedding_bag_weighted_sum_bf16_lane_groups` on the
//! [`bag_pool`](super::bag_pool) engine, is in [`super::embedding_bag_weighted_sum_bf16_tuned`].
//!
//! # Prediction at `full` (H200; not measured yet)
//! B = 131072, D = 128, N ≈ 2.61M lookups, 730.9 MB of logical bytes: the physical floor is
//! 730.9 MB over the measured 11.05 TB/s of L2 = 0.0661 ms; eager takes 0.889 ms, the reference
//! 0.753, the CUDA example `warp_per_bag_bf16x4` 0.2505 ms (26% of the floor).
//! * Why the example is slow: every warp-per-bag example (problems 1, 2 and 4: rows of 512, 256
//!   and 136 bytes) takes 0.25 ms, so bytes do not set it. Counting dependent memory latencies
//!   (offsets → indices → rounds of 4 rows, per warp; blocks dispatched in order onto the SMs'
//!   slots; a model in the report of this change) gives the example's launch 466–734 latencies
//!   (for 64 down to 32 resident warps per SM), most of them the one warp that walks the
//!   1000-lookup bag B/2 (1 + 32·(1 + 8) = 289 in a row), so L ≈ 0.34–0.54 µs.
//! * This kernel: 8 rows per warp per round, no offsets or index latency after a warp's first
//!   bag, bags over 128 lookups split over the block's 8 warps; at 24 resident warps per SM (80
//!   registers, 3 blocks) the same model gives 254 latencies: 0.087–0.136 ms. Bandwidth: 0.10
//!   ms is 7.3 TB/s of L2, 66% of the measured peak — plausible for 256-byte gathers, but near
//!   where latency grows. Issue: ≈ 12 warp-instructions per row (3 shuffles, a 64-bit add, a
//!   16-byte load, 8 × (shift or mask + fma) over two rows) ≈ 31M over 132 SMs × 4 per clock
//!   ≈ 30 µs: not binding.
//! * **Predicted ≈ 0.10 ms (0.087–0.136): 66% of the floor (49–76%), ≈ 9x eager, ≈ 7.5x the
//!   reference, ≈ 2.5x the example.**
use super::eager_bag::{eager_bag_sum, PerSampleBf16};

kernel! {
    /// Launch: block (32, 8, 1), grid min(1024, ceil_div(B·ceil_div(D, 32), 8)).
    ///
    /// `weight`, `per_sample_weights` and `out` hold bf16 bit patterns. `padding_idx` = -1 as
    /// `F.embedding_bag` passes it; `num_rows` is the table's row count (an index at or past it
    /// traps, as eager's `CUDA_KERNEL_ASSERT`).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn embedding_bag_weighted_sum_bf16_reference(
        indices: *const i64,
        offsets: *const i64,
        weight: *const u16,
        out: *mut u16,
        offset2bag: *mut i64,
        num_indices: i64,
        num_bags: i64,
        feature_size: i64,
        bag_size: *mut i64,
        per_sample_weights: *const u16,
        padding_idx: i64,
        num_rows: i64,
    ) {
        eager_bag_sum!(
            indices,
            offsets,
            weight,
            out,
            offset2bag,
            num_indices,
            num_bags,
            feature_size,
            bag_size,
            PerSampleBf16(per_sample_weights),
            padding_idx,
            num_rows,
        )
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use crate::dev::{bf16_to_f32, f32_to_bf16_rn};

    /// Round-to-nearest-even to bf16 from the definition: the two neighbours in f64, the nearer
    /// one, the even one on a tie.
    fn rne(x: f32) -> u16 {
        let down = (x.to_bits() >> 16) as u16; // toward zero
        let up = down + 1; // away from zero (may reach infinity)
        let (a, b) = (bf16_to_f32(down) as f64, bf16_to_f32(up) as f64);
        let (da, db) = ((x as f64 - a).abs(), (b - x as f64).abs());
        if da < db || (da == db && down.is_multiple_of(2)) {
            down
        } else {
            up
        }
    }

    /// The value of bfloat16 `h` from its definition (sign, 8-bit exponent, 7-bit fraction), in
    /// f64.
    pub(crate) fn bf16_value(h: u16) -> f64 {
        let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
        let exp = ((h >> 7) & 0xff) as i32;
        let frac = (h & 0x7f) as f64;
        match exp {
            0 => sign * frac * 2f64.powi(-133),
            255 if frac == 0.0 => sign * f64::INFINITY,
            255 => f64::NAN,
            _ => sign * (1.0 + frac / 128.0) * 2f64.powi(exp - 127),
        }
    }

    /// Bag lengths of the tests: empty bags (bag 0, and three in the partial last block), short
    /// bags of 1..70 lookups (remainders of the 32-lookup chunks and of every round width), and
    /// long ones (700, 300, 257, 129: over the one-warp limit for every D tested, two long bags
    /// in one block).
    pub(crate) fn test_bag_lengths(bags: usize) -> Vec<usize> {
        (0..bags)
            .map(|bag| match bag {
                0 | 64..=66 => 0,
                5 => 700,
                33 => 300,
                34 => 129,
                40 => 257,
                _ => (bag * 13 + 7) % 71,
            })
            .collect()
    }

    /// `bytes` copied into a 16-byte-aligned buffer (a `Vec<u128>`), as the GPU's allocations are.
    pub(crate) fn aligned(bytes: &[u8]) -> Vec<u128> {
        let mut v = vec![0u128; bytes.len().div_ceil(16) + 1];
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), v.as_mut_ptr() as *mut u8, bytes.len())
        };
        v
    }

    #[test]
    fn rounding_to_bf16_is_to_nearest_even() {
        let mut bits = 0x0001_2345u32;
        for _ in 0..200_000 {
            bits = bits.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let x = f32::from_bits(bits);
            if x.is_nan() {
                assert!(bf16_to_f32(f32_to_bf16_rn(x)).is_nan());
                continue;
            }
            if x.abs() >= bf16_to_f32(0x7f7f) {
                continue; // beyond the largest bf16: the neighbour trick above needs a finite `up`
            }
            assert_eq!(f32_to_bf16_rn(x), rne(x), "{x:e} ({bits:#010x})");
        }
        // Ties go to even, both ways; bf16 values come back exactly.
        assert_eq!(f32_to_bf16_rn(f32::from_bits(0x3f80_8000)), 0x3f80);
        assert_eq!(f32_to_bf16_rn(f32::from_bits(0x3f81_8000)), 0x3f82);
        assert_eq!(f32_to_bf16_rn(f32::from_bits(0x3f80_8001)), 0x3f81);
        for h in [0u16, 0x8000, 0x3f80, 0xbf80, 0x7f7f, 0x0001, 0x7f80] {
            assert_eq!(f32_to_bf16_rn(bf16_to_f32(h)), h);
        }
        assert_eq!(
            f32_to_bf16_rn(f32::MAX),
            0x7f80,
            "overflow rounds to infinity"
        );
    }
}
