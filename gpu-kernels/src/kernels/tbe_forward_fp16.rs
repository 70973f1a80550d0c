//! Problem 3, `tbe_forward_fp16`: T tables stacked in one fp16 tensor `weight` [ΣE, D], table
//! t's rows at `table_offsets[t]..table_offsets[t+1]`; bags in table-major order (bag b of table
//! t is `indices[offsets[t·B + b]..offsets[t·B + b + 1]]`, indices local to the table);
//! out[b, t·D + d] = Σ weight[table_offsets[t] + idx, d] in fp32, out fp32 [B, T·D].
//!
//! [`tbe_forward_fp16_table_reference`] is one table's `nn.EmbeddingBag` in eager PyTorch, the
//! way an `nn.ModuleList` of them runs: launched once per table, each launch a port of
//! `EmbeddingBag_updateOutputKernel_sum_mean<Half, int64_t>` (aten/src/ATen/native/cuda/
//! EmbeddingBag.cu) on that table's slice — one thread per (bag, column), blocks of (32, 8),
//! grid-stride over (bag, 32-column chunk), scalar 2-byte loads widened exactly to f32, fp32
//! accumulation, the `offset2bag` and `bag_size` side outputs — writing its fp32 sums straight
//! into its column slice of `out` (eager writes fp16 and copies; see the problem module).
use crate::dev::*;

kernel! {
    /// One launch per table `table` in 0..T. Launch: block (32, 8, 1), grid
    /// min(1024, ceil_div(B·ceil_div(D, 32), 8)). `weight` holds fp16 bit patterns.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn tbe_forward_fp16_table_reference(
        indices: *const i64,
        offsets: *const i64,
        weight: *const u16,
        table_offsets: *const i64,
        out: *mut f32,
        offset2bag: *mut i64,
        bag_size: *mut i64,
        table: i64,
        num_tables: i64,
        num_bags: i64,
        feature_size: i64,
    ) {
        let chunks_per_bag = (feature_size + block_dim_x() as i64 - 1) / block_dim_x() as i64;
        let num_chunks = num_bags * chunks_per_bag;
        let mut chunk = (block_idx_x() * block_dim_y() + thread_idx_y()) as i64;
        let stride = (grid_dim_x() * block_dim_y()) as i64;
        // This table's slices: its bags' offsets, its rows, its output columns.
        let table_offsets_t = offsets.add((table * num_bags) as usize);
        let table_weight = weight.add((*table_offsets.add(table as usize) * feature_size) as usize);
        let out_stride = num_tables * feature_size;
        while chunk < num_chunks {
            let feature = (chunk % chunks_per_bag) * block_dim_x() as i64 + thread_idx_x() as i64;
            if feature < feature_size {
                let bag = chunk / chunks_per_bag;
                let column = table_weight.add(feature as usize);
                let begin = *table_offsets_t.add(bag as usize);
                let end = *table_offsets_t.add(bag as usize + 1);
                let mut sum = 0.0f32;
                let mut size = 0i64;
                let mut emb = begin;
                while emb < end {
                    let row = *indices.add(emb as usize) * feature_size;
                    sum += f16_to_f32(*column.add(row as usize));
                    size += 1;
                    if feature == 0 {
                        *offset2bag.add(emb as usize) = bag;
                    }
                    emb += 1;
                }
                *bag_size.add((table * num_bags + bag) as usize) = size;
                *out.add((bag * out_stride + table * feature_size + feature) as usize) = sum;
            }
            chunk += stride;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::dev::f16_to_f32;

    /// The value of IEEE half `h` from its definition, in f64.
    fn f16_value(h: u16) -> f64 {
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
}
