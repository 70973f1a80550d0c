//! Problem 6, `sequence_gather_padded_bf16`: jagged sequences of row ids to a padded
//! [B, L, D] bf16 tensor of table rows, zeros past each sequence's end.
//!
//! The reference is the eager PyTorch `Model` of `06_sequence_gather_padded_bf16.py` launch for
//! launch:
//! ```text
//! starts = torch.cumsum(lengths, 0) - lengths            # scan_init + inclusive_sum_i64, aten_sub_i64
//! pos = torch.arange(max_len)                            # aten_arange_with_index_i64
//! pad = pos >= lengths.unsqueeze(1)                      # aten_ge_outer_i64
//! src = (starts.unsqueeze(1) + pos).masked_fill_(pad, 0) # aten_add_outer_i64, aten_masked_fill_i64
//! rows = indices[src]                                    # aten_index_i64
//! out = F.embedding(rows, weight)                        # aten_gather_rows16 (vectorized_gather_kernel)
//! out.masked_fill_(pad.unsqueeze(-1), 0.0)               # aten_masked_fill_bcast_u16
//! ```
//! The broadcast kernels here are ATen's non-contiguous TensorIterator loop: block 128, four
//! elements per thread at a stride of 128, the row of element `i` found with ATen's
//! `IntDivider` (a multiply-high and a shift; ATen builds the magic number on the host, here
//! thread 0 of each block builds it).
use super::torch_ops::{block_dividers, ew4, legacy_loop, offsets_2d, EW_BLOCK_ITEMS};
use crate::dev::*;

pub use super::torch_ops::IntDivider;

/// The divider of `d`, built by thread 0 and shared through the block (ends with a barrier).
#[inline(always)]
unsafe fn block_divider(d: u32) -> IntDivider {
    let shared = crate::static_shared!(SEQPAD_DIVIDER: [u32; 2]);
    if thread_idx_x() == 0 {
        let div = IntDivider::new(d);
        *shared = div.m1;
        *shared.add(1) = div.shift;
    }
    sync_threads();
    IntDivider {
        m1: *shared,
        shift: *shared.add(1),
        divisor: d,
    }
}

kernel! {
    /// `pad = pos >= lengths.unsqueeze(1)`: `pad[b·L + l] = pos[l] >= lengths[b]` (bool) for
    /// `rows` = B, `cols` = L. Launch: grid `max(ceil_div(B·L, 512), 1)`, block 128.
    pub unsafe fn aten_ge_outer_i64(pad: *mut u8, pos: *const i64, lengths: *const i64, rows: i64, cols: i64) {
        let div = block_divider(cols as u32);
        ew4(rows * cols, |i| {
            let r = div.divide(i as u32) as usize;
            (*pos.add(i - r * cols as usize), *lengths.add(r))
        }, |_, (p, len): (i64, i64)| (p >= len) as u8, |i, v| *pad.add(i) = v);
    }
}

kernel! {
    /// `starts.unsqueeze(1) + pos`: `out[b·L + l] = starts[b] + pos[l]` for `rows` = B,
    /// `cols` = L. Launch: grid `max(ceil_div(B·L, 512), 1)`, block 128.
    pub unsafe fn aten_add_outer_i64(out: *mut i64, starts: *const i64, pos: *const i64, rows: i64, cols: i64) {
        let div = block_divider(cols as u32);
        ew4(rows * cols, |i| {
            let r = div.divide(i as u32) as usize;
            (*starts.add(r), *pos.add(i - r * cols as usize))
        }, |_, (s, p): (i64, i64)| s.wrapping_add(p), |i, v| *out.add(i) = v);
    }
}

kernel! {
    /// `out.masked_fill_(pad.unsqueeze(-1), value)` on a [rows, cols] 16-bit tensor (bf16 bits)
    /// as ATen runs it: the mask broadcasts over the last dimension, so TensorIterator takes the
    /// non-vectorized path, `elementwise_kernel<128, 4, gpu_kernel_impl_nocast<masked_fill_kernel
    /// …>>` — per element, one after the other ([`legacy_loop`]), the 2-D `OffsetCalculator`
    /// (two `divmod`s: column, row) gives the offsets of the output, the input (the same tensor)
    /// and the mask (stride 0 over the columns), then one bf16 load, one mask-byte load and one
    /// store. Launch: grid `max(ceil_div(rows·cols, 512), 1)`, block 128 (`rows·cols < 2^31`).
    pub unsafe fn aten_masked_fill_bcast_u16(out: *mut u16, pad: *const u8, value: u32, rows: i64, cols: i64) {
        let div = block_dividers(cols as u32, rows as u32);
        let data = out as *mut u8;
        legacy_loop::<128, 4>(rows * cols, |i| {
            let (c, r) = offsets_2d(div, i as u32);
            // Byte offsets of the three operands: out/self (2, 2·cols), mask (0, 1).
            let self_off = (c as usize) * 2 + (r as usize) * 2 * cols as usize;
            let mask_off = r as usize;
            let x = *(data.add(self_off) as *const u16);
            let m = *pad.add(mask_off);
            *(data.add(self_off) as *mut u16) = if m != 0 { value as u16 } else { x };
        });
    }
}

const _: () = assert!(EW_BLOCK_ITEMS == 512);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::torch_ops::tests::ew;

    #[test]
    fn int_divider_matches_division() {
        for d in [
            1u32,
            2,
            3,
            7,
            16,
            24,
            255,
            256,
            257,
            1000,
            65537,
            (1 << 30) + 3,
        ] {
            let div = IntDivider::new(d);
            for n in [
                0u32,
                1,
                d - 1,
                d,
                d + 1,
                2 * d + 5,
                123_456_789,
                (1 << 31) - 1,
            ] {
                if n >= 1 << 31 {
                    continue; // outside the divider's range, as in ATen
                }
                assert_eq!(div.divide(n), n / d, "{n} / {d}");
            }
        }
    }

    #[test]
    fn broadcast_kernels_match_their_definitions() {
        let (b, l) = (7usize, 19usize); // B·L = 133: not a multiple of anything
        let lengths: Vec<i64> = vec![0, 3, 19, 25, 1, 18, 7];
        let starts: Vec<i64> = vec![100, 200, 300, 400, 500, 600, 700];
        let pos: Vec<i64> = (0..l as i64).collect();
        let mut pad = vec![7u8; b * l];
        unsafe {
            ew(b * l)
                .ptr_mut(&mut pad)
                .ptr(&pos)
                .ptr(&lengths)
                .arg(b)
                .arg(l)
                .run(&aten_ge_outer_i64::EMU)
        };
        let mut sum = vec![0i64; b * l];
        unsafe {
            ew(b * l)
                .ptr_mut(&mut sum)
                .ptr(&starts)
                .ptr(&pos)
                .arg(b)
                .arg(l)
                .run(&aten_add_outer_i64::EMU)
        };
        for r in 0..b {
            for c in 0..l {
                assert_eq!(pad[r * l + c], (c as i64 >= lengths[r]) as u8);
                assert_eq!(sum[r * l + c], starts[r] + c as i64);
            }
        }
        // ATen's broadcast path (one element after the other per thread), with a fill value
        // other than 0 and D = 40 (B·L·D = 5320: the last block partial).
        let d = 40usize;
        let mut out: Vec<u16> = (0..b * l * d)
            .map(|i| (i as u16).wrapping_mul(31) | 2)
            .collect();
        let before = out.clone();
        unsafe {
            ew(b * l * d)
                .ptr_mut(&mut out)
                .ptr(&pad)
                .arg(0x3f80)
                .arg(b * l)
                .arg(d)
                .run(&aten_masked_fill_bcast_u16::EMU)
        };
        for (i, (&o, &x)) in out.iter().zip(&before).enumerate() {
            assert_eq!(o, if pad[i / d] != 0 { 0x3f80 } else { x }, "{i}");
        }
    }

    #[test]
    fn int_divider_divmod_and_2d_offsets() {
        let div = (IntDivider::new(24), IntDivider::new(7));
        for i in [
            0u32,
            1,
            23,
            24,
            25,
            24 * 7 - 1,
            24 * 7,
            24 * 7 * 3 + 5,
            1 << 30,
        ] {
            assert_eq!(div.0.divmod(i), (i / 24, i % 24));
            assert_eq!(offsets_2d(div, i), (i % 24, (i / 24) % 7));
        }
    }
}
