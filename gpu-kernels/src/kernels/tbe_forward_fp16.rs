//! Problem 3, `tbe_forward_fp16`: T tables stacked in one fp16 tensor `weight` [ΣE, D], table
//! t's rows at `table_offsets[t]..table_offsets[t+1]`; bags in table-major order (bag b of table
//! t is `indices[offsets[t·B + b]..offsets[t·B + b + 1]]`, indices local to the table);
//! out[b, t·D + d] = Σ weight[table_offsets[t] + idx, d] in fp32, out fp32 [B, T·D].
//!
//! The reference is the eager `Model` of `03_tbe_forward_fp16.py` launch for launch:
//! ```text
//! bounds = torch.cat([table_offsets, offsets[::B]]).tolist()  # aten_cat_bounds_i64 (+ a D2H copy)
//! for t in range(T):
//!     offsets[t·B:(t+1)·B+1] - begin                           # tbe_offsets_shift
//!     pooled = F.embedding_bag(indices[begin:end],             # tbe_embedding_bag_f16
//!                              weight[rows[t]:rows[t+1]], …)   #   (fp16 sums in a [B, D] buffer)
//!     out[:, t·D:(t+1)·D] = pooled                             # aten_copy_f16_to_f32_2d
//! ```
//! The `.tolist()` copy and its host sync are not in the plan (a plan is kernel launches only).
//!
//! The project's tuned kernel is in [`super::tbe_forward_fp16_tuned`].
use super::torch_ops::{block_dividers, ew4, legacy_loop, offsets_2d};
use crate::dev::*;

kernel! {
    /// `torch.cat([table_offsets, offsets[::B]])` (int64, T + 1 entries each) into `out`
    /// [2·(T + 1)]: ATen's `CatArrayBatchedCopy<OpaqueType<8>, uint, 1, 64, 64>`, input
    /// `blockIdx.y`, grid-stride over its elements. Launch: grid (2·SMs = 264 on an H200, 2),
    /// block 512.
    pub unsafe fn aten_cat_bounds_i64(out: *mut i64, table_offsets: *const i64, offsets: *const i64, entries: i64, batch: i64) {
        let stride = (grid_dim_x() * block_dim_x()) as i64;
        let mut i = (block_idx_x() * block_dim_x() + thread_idx_x()) as i64;
        let second = block_idx_y() == 1;
        while i < entries {
            let v = if second { *offsets.add((i * batch) as usize) } else { *table_offsets.add(i as usize) };
            *out.add((i + if second { entries } else { 0 }) as usize) = v;
            i += stride;
        }
    }
}

kernel! {
    /// `offsets[t·B : (t+1)·B + 1] - begin` (int64, `begin` = `offsets[t·B]`) into `out` [B + 1]:
    /// ATen's `vectorized_elementwise_kernel<2, CUDAFunctorOnSelf_add<long>>` (tensor plus
    /// scalar), 512 elements per block. Eager passes `begin` from the host (`.tolist()`); here
    /// each thread reads it. Launch: grid `ceil_div(B + 1, 512)`, block 128.
    pub unsafe fn tbe_offsets_shift(out: *mut i64, offsets: *const i64, table: i64, num_bags: i64) {
        let slice = offsets.add((table * num_bags) as usize);
        let begin = *slice;
        ew4(num_bags + 1, |i| *slice.add(i), |_, x: i64| x.wrapping_sub(begin), |i, v| *out.add(i) = v);
    }
}

kernel! {
    /// One table's `F.embedding_bag(indices[begin:end], weight[rows[t]:rows[t+1]], offsets_t,
    /// mode="sum", include_last_offset=True)` in fp16: a port of
    /// `EmbeddingBag_updateOutputKernel_sum_mean<Half, int64_t>` (aten/src/ATen/native/cuda/
    /// EmbeddingBag.cu) — one thread per (bag, column), blocks of (32, 8), grid-stride over
    /// (bag, 32-column chunk); per lookup the padding test (`padding_idx`, -1: none), the row
    /// bound (`CUDA_KERNEL_ASSERT(input[emb] < numRows)`; a row outside is skipped here), a
    /// scalar 2-byte load widened exactly to f32 and an fp32 add; the `offset2bag` and
    /// `bag_size` side outputs; the sum rounded to fp16 (`static_cast<Half>`) into `out`
    /// [B, D]. `shifted` is this table's offsets less `begin` ([`tbe_offsets_shift`]); `begin`
    /// and the table's first row are read from `offsets` and `table_offsets` (eager slices the
    /// pointers on the host). Launch: block (32, 8, 1), grid min(1024, ceil_div(B·ceil_div(D,
    /// 32), 8)).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn tbe_embedding_bag_f16(
        indices: *const i64,
        offsets: *const i64,
        shifted: *const i64,
        weight: *const u16,
        table_offsets: *const i64,
        out: *mut u16,
        offset2bag: *mut i64,
        bag_size: *mut i64,
        table: i64,
        num_bags: i64,
        feature_size: i64,
        padding_idx: i64,
    ) {
        let chunks_per_bag = (feature_size + block_dim_x() as i64 - 1) / block_dim_x() as i64;
        let num_chunks = num_bags * chunks_per_bag;
        let mut chunk = (block_idx_x() * block_dim_y() + thread_idx_y()) as i64;
        let stride = (grid_dim_x() * block_dim_y()) as i64;
        // The slices eager hands the kernel: this table's lookups and rows.
        let begin_all = *offsets.add((table * num_bags) as usize);
        let num_indices = *offsets.add(((table + 1) * num_bags) as usize) - begin_all;
        let input = indices.add(begin_all as usize);
        let first_row = *table_offsets.add(table as usize);
        let num_rows = *table_offsets.add(table as usize + 1) - first_row;
        let table_weight = weight.add((first_row * feature_size) as usize);
        let (weight_stride0, weight_stride1) = (feature_size, 1i64);
        while chunk < num_chunks {
            let feature = (chunk % chunks_per_bag) * block_dim_x() as i64 + thread_idx_x() as i64;
            if feature < feature_size {
                let bag = chunk / chunks_per_bag;
                let weight_feat = table_weight.add((feature * weight_stride1) as usize);
                let begin = if bag == 0 { 0 } else { *shifted.add(bag as usize) };
                let end = if bag < num_bags - 1 { *shifted.add(bag as usize + 1) } else { num_indices };
                let mut sum = 0.0f32;
                let mut size = 0i64;
                let mut emb = begin;
                while emb < end {
                    let row = *input.add(emb as usize);
                    let pad = row == padding_idx;
                    if row < num_rows {
                        let value = *weight_feat.add((row * weight_stride0) as usize);
                        let value = if pad { 0 } else { value };
                        sum += f16_to_f32(value);
                        size += if pad { 0 } else { 1 };
                    }
                    if feature == 0 {
                        *offset2bag.add((begin_all + emb) as usize) = bag;
                    }
                    emb += 1;
                }
                *bag_size.add((table * num_bags + bag) as usize) = size;
                *out.add((bag * feature_size + feature) as usize) = f32_to_f16_rn(sum);
            }
            chunk += stride;
        }
    }
}

kernel! {
    /// `out[:, t·D:(t+1)·D] = pooled` (fp16 [B, D] into a column slice of fp32 [B, out_cols]):
    /// ATen's `elementwise_kernel<128, 4, gpu_kernel_impl<direct_copy_kernel_cuda …>>` — the
    /// destination is strided, so the non-vectorized loop: per element, one after the other
    /// ([`legacy_loop`]), the 2-D `OffsetCalculator` (two `divmod`s: column, row) gives both
    /// operands' offsets, then one fp16 load, the widening and one fp32 store. Launch: grid
    /// `max(ceil_div(B·D, 512), 1)`, block 128 (`B·D < 2^31`).
    pub unsafe fn aten_copy_f16_to_f32_2d(out: *mut f32, pooled: *const u16, table: i64, rows: i64, cols: i64, out_cols: i64) {
        let div = block_dividers(cols as u32, rows as u32);
        let dst = out.add((table * cols) as usize) as *mut u8;
        let src = pooled as *const u8;
        legacy_loop::<128, 4>(rows * cols, |i| {
            let (c, r) = offsets_2d(div, i as u32);
            let (c, r) = (c as usize, r as usize);
            let out_off = c * 4 + r * 4 * out_cols as usize;
            let in_off = c * 2 + r * 2 * cols as usize;
            *(dst.add(out_off) as *mut f32) = f16_to_f32(*(src.add(in_off) as *const u16));
        });
    }
}

#[cfg(test)]
pub(super) mod tests {
    use crate::dev::{f16_to_f32, f32_to_f16_rn};

    /// The value of IEEE half `h` from its definition, in f64.
    pub(in crate::kernels) fn f16_value(h: u16) -> f64 {
        let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
        let exp = ((h >> 10) & 0x1f) as i32;
        let man = (h & 0x3ff) as f64;
        match exp {
            0 => sign * man * 2f64.powi(-24),
            31 if man == 0.0 => sign * f64::INFINITY,
            31 => f64::NAN,
            _ => sign * (1.0 + man / 1024.0) * 2f64.powi(exp - 15),
        }
    }

    #[test]
    fn every_half_widens_exactly() {
        for h in 0..=u16::MAX {
            let got = f16_to_f32(h) as f64;
            let want = f16_value(h);
            if want.is_nan() {
                assert!(got.is_nan(), "{h:#06x}");
            } else {
                assert_eq!(got, want, "{h:#06x}");
                assert_eq!(got.is_sign_negative(), h & 0x8000 != 0, "{h:#06x}");
            }
        }
    }

    #[test]
    fn f32_rounds_to_half_as_half_does() {
        let check = |x: f32| {
            let got = f32_to_f16_rn(x);
            let want = half::f16::from_f32(x);
            if want.is_nan() {
                assert!(f16_to_f32(got).is_nan(), "{x:e}");
            } else {
                assert_eq!(got, want.to_bits(), "{x:e} ({:#010x})", x.to_bits());
            }
        };
        // Every half, the midpoints between neighbours (ties) and one f32 ulp either side.
        for h in 0..=u16::MAX {
            let v = f16_to_f32(h);
            check(v);
            if h & 0x7fff < 0x7c00 {
                let next = f16_to_f32(h + 1);
                let mid = ((v as f64 + next as f64) / 2.0) as f32;
                for m in [
                    mid,
                    f32::from_bits(mid.to_bits() - 1),
                    f32::from_bits(mid.to_bits() + 1),
                ] {
                    check(m);
                }
            }
        }
        // A sweep over f32 bit patterns.
        let mut b = 0u32;
        while let Some(n) = b.checked_add(40_961) {
            check(f32::from_bits(n));
            b = n;
        }
    }
}
