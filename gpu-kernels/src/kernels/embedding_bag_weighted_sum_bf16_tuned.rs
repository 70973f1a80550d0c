//! Problem 2, `embedding_bag_weighted_sum_bf16`: the project's tuned kernel. (The reference is
//! in [`super::embedding_bag_weighted_sum_bf16`].)
//!
//! [`embedding_bag_weighted_sum_bf16_lane_groups`]: the [`bag_pool`] engine over a bf16 table with
//! per-sample weights. Each lane owns 8 columns read with one 16-byte non-coherent load (eight
//! bf16, widened exactly by a shift or a mask), 16 lanes per row at D = 128 so one warp-wide load
//! reads two rows; 4 loads in flight per lane (8 rows per warp per round); the per-sample weight
//! is fetched with the index (lane l: lookup l of the chunk) and broadcast with the row's offset;
//! `acc += w·x` as one fma per column (as eager's kernel: at `ci` the outputs are bit-identical
//! to the reference's); one rounding to bf16 (nearest even) at the end, one 16-byte store of 8
//! bf16. Bags of more than 128 lookups (D = 128) are pooled by all 8 warps of their block.
//! ptxas (sm_90): 80 registers, no spill, at 3 blocks per SM.
use super::bag_pool::{self, Acc, BagTable, VEC};
use crate::dev::*;

/// Loads in flight per lane (rows per warp per round: 4 × the rows one load reads).
const WEIGHTED_UNROLL: usize = 4;

/// Problem 2's table for [`bag_pool`]: bf16 rows of D, a bf16 weight per lookup, bf16 out.
struct WeightedBf16 {
    weight: *const u16,
    indices: *const i64,
    per_sample_weights: *const u16,
    out: *mut u16,
    dim: i64,
}

impl BagTable for WeightedBf16 {
    const EXTRA: bool = false;

    /// The row's byte offset, and the lookup's weight widened to f32 (its bits) as the side value.
    #[inline(always)]
    unsafe fn fetch(&self, j: i64) -> (i64, u32, f32) {
        let key = *self.indices.add(j as usize) * self.dim * 2;
        (
            key,
            (*self.per_sample_weights.add(j as usize) as u32) << 16,
            0.0,
        )
    }

    #[inline(always)]
    fn lane_base<const V: usize>(&self, col: i64) -> *const u8 {
        self.weight.wrapping_add(col as usize) as *const u8
    }

    #[inline(always)]
    unsafe fn load<const V: usize>(base: *const u8, key: i64) -> [u32; 4] {
        let p = base.add(key as usize);
        if V == VEC {
            load_nc_u32x4(p as *const u32)
        } else {
            [*(p as *const u16) as u32, 0, 0, 0]
        }
    }

    /// `acc += w·x` per column, one fma each (0 and 0 add +0: no change).
    #[inline(always)]
    fn add<const V: usize>(acc: &mut Acc, slot: [u32; 4], side: u32) {
        let w = f32::from_bits(side);
        if V == VEC {
            for (i, &word) in slot.iter().enumerate() {
                acc[2 * i] = fma_f32(w, f32::from_bits(word << 16), acc[2 * i]);
                acc[2 * i + 1] = fma_f32(w, f32::from_bits(word & 0xffff_0000), acc[2 * i + 1]);
            }
        } else {
            acc[0] = fma_f32(w, f32::from_bits(slot[0] << 16), acc[0]);
        }
    }

    #[inline(always)]
    unsafe fn store<const V: usize>(&self, bag: i64, col: i64, acc: &Acc) {
        let p = self.out.add((bag * self.dim + col) as usize);
        if V == VEC {
            let mut words = [0u32; 4];
            for (i, w) in words.iter_mut().enumerate() {
                let (lo, hi) = (f32_to_bf16_rn(acc[2 * i]), f32_to_bf16_rn(acc[2 * i + 1]));
                *w = lo as u32 | (hi as u32) << 16;
            }
            store_u32x4(p as *mut u32, words);
        } else {
            *p = f32_to_bf16_rn(acc[0]);
        }
    }
}

kernel! {
    /// The project's tuned kernel (see [`bag_pool`] and the section comment above). Launch:
    /// block (256, 1, 1), grid ceil_div(B, 32). The vector path needs D % 8 == 0 and 16-byte
    /// aligned `weight` and `out`; any other D or alignment takes the scalar path (one column
    /// per lane) in the same launch.
    pub unsafe fn embedding_bag_weighted_sum_bf16_lane_groups(
        weight: *const u16,
        indices: *const i64,
        offsets: *const i64,
        per_sample_weights: *const u16,
        out: *mut u16,
        num_bags: i64,
        dim: i64,
    ) {
        let table = WeightedBf16 { weight, indices, per_sample_weights, out, dim };
        let vector = dim % VEC as i64 == 0 && (weight as usize).is_multiple_of(16) && (out as usize).is_multiple_of(16);
        if vector {
            bag_pool::pool_block::<_, VEC, WEIGHTED_UNROLL>(&table, offsets, num_bags, dim);
        } else {
            bag_pool::pool_block::<_, 1, WEIGHTED_UNROLL>(&table, offsets, num_bags, dim);
        }
    }
}

launch_bounds!(embedding_bag_weighted_sum_bf16_lane_groups, 256, 3);

#[cfg(test)]
mod tests {
    use crate::dev::f32_to_bf16_rn;
    use crate::kernels::embedding_bag_weighted_sum_bf16::tests::{
        aligned, bf16_value, test_bag_lengths,
    };

    /// The tuned kernel on the emulator against an f64 weighted sum of the bf16 values: 75 bags
    /// (three blocks, the last partial) of the lengths above, NaN-filled output with a guard
    /// after it, for D = 128 (vector path, two rows per load), D = 40 (vector, four rows per
    /// load, as at `ci`), D = 36 (scalar path, two column passes) and D = 128 with a table one
    /// element off 16-byte alignment (scalar path, four passes).
    #[test]
    fn the_tuned_kernel_pools_every_bag_with_its_weights() {
        use super::embedding_bag_weighted_sum_bf16_lane_groups as tuned;
        use crate::emu::EmuLaunch;
        for (d, shift) in [(128usize, 0usize), (40, 0), (36, 0), (128, 1)] {
            let (e, b) = (300usize, 75usize);
            let mut weight: Vec<u16> = (0..e * d + shift)
                .map(|i| f32_to_bf16_rn(((i * 7919) % 2003) as f32 / 1001.0 - 1.0))
                .collect();
            // Row 0 (often looked up, and what a lookup past a chunk's end would read) carries
            // +inf in column 3: the bags that use it must give ±inf or NaN there as f64 does
            // (NaN where its weight is 0), and no other bag may see it.
            weight[shift + 3] = 0x7f80;
            let (mut indices, mut offsets) = (Vec::new(), vec![0i64]);
            for (bag, len) in test_bag_lengths(b).into_iter().enumerate() {
                for j in 0..len {
                    // Some rows repeat within a bag, as hot rows do.
                    indices.push(((j * 31 + bag * 7) % if j % 5 == 0 { 3 } else { e }) as i64);
                }
                offsets.push(indices.len() as i64);
            }
            let n = indices.len();
            let psw: Vec<u16> = (0..n)
                .map(|j| f32_to_bf16_rn(((j * 13) % 37) as f32 / 12.0 - 1.0))
                .collect();
            let guard = 64;
            let weight_buf = aligned(
                &weight
                    .iter()
                    .flat_map(|w| w.to_le_bytes())
                    .collect::<Vec<_>>(),
            );
            let mut out_buf = aligned(&vec![0xffu8; (b * d + guard) * 2]);
            let weight_ptr = unsafe { (weight_buf.as_ptr() as *const u16).add(shift) };
            let out_ptr = out_buf.as_mut_ptr() as *mut u16;
            assert_eq!((weight_ptr as usize) % 16, shift * 2);
            unsafe {
                EmuLaunch::new(b.div_ceil(32) as u32, 256)
                    .raw(weight_ptr)
                    .ptr(&indices)
                    .ptr(&offsets)
                    .ptr(&psw)
                    .raw(out_ptr)
                    .arg(b)
                    .arg(d)
                    .run(&tuned::EMU);
            }
            let out = unsafe { std::slice::from_raw_parts(out_ptr, b * d + guard) };
            assert!(
                out[b * d..].iter().all(|&h| h == 0xffff),
                "D {d}: a write past `out`"
            );
            for bag in 0..b {
                for c in 0..d {
                    let terms = (offsets[bag]..offsets[bag + 1]).map(|j| {
                        let row = indices[j as usize] as usize;
                        bf16_value(psw[j as usize]) * bf16_value(weight[shift + row * d + c])
                    });
                    let (want, size): (f64, f64) =
                        terms.fold((0.0, 0.0), |(s, m), t| (s + t, m + t.abs()));
                    let got = out[bag * d + c];
                    if offsets[bag] == offsets[bag + 1] {
                        assert_eq!(got, 0, "D {d} bag {bag} column {c}: empty bag");
                        continue;
                    }
                    if !want.is_finite() {
                        let got = bf16_value(got);
                        let same = (want.is_nan() && got.is_nan()) || got == want;
                        assert!(
                            same,
                            "D {d} shift {shift} bag {bag} column {c}: {got} vs {want}"
                        );
                        continue;
                    }
                    // fp32 accumulation (≤ 1e-5 of the terms' size), then one rounding to bf16
                    // (at most half a bf16 unit: 2^-8 relative).
                    let fp32 = 1e-5 * size;
                    let bound = (want.abs() + fp32) * 2f64.powi(-8) + fp32;
                    let got = bf16_value(got);
                    assert!(
                        (got - want).abs() <= bound,
                        "D {d} shift {shift} bag {bag} column {c}: {got} vs {want}"
                    );
                }
            }
        }
    }
}
