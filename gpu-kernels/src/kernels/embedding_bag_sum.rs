//! Problem 1, `embedding_bag_sum`: out[b, :] = Σ_{j ∈ offsets[b]..offsets[b+1]} weight[indices[j], :].
//!
//! * [`embedding_bag_sum_reference`] mirrors PyTorch eager's
//!   `EmbeddingBag_updateOutputKernel_sum_mean` (aten/src/ATen/native/cuda/EmbeddingBag.cu): one
//!   thread per (bag, column), blocks of (32, 8), a grid-stride loop over (bag, 32-column chunk),
//!   scalar loads, fp32 accumulation, and the `offset2bag` and `bag_size` side outputs eager
//!   writes (to scratch buffers here). Its loop is `eager_bag.rs`'s, shared with problem
//!   2's reference.
//!
//! The project's tuned kernel is in [`super::embedding_bag_sum_tuned`].
use super::eager_bag::{eager_bag_sum, Unweighted};

kernel! {
    /// Launch: block (32, 8, 1), grid min(1024, ceil_div(B·ceil_div(D, 32), 8)).
    ///
    /// A line-for-line port of PyTorch's `EmbeddingBag_updateOutputKernel_sum_mean` (sum mode,
    /// no per-sample weights, `padding_idx` = -1 as `F.embedding_bag` passes it): besides `out`
    /// it writes `offset2bag` [N] and `bag_size` [B] (scratch here, as in eager they are extra
    /// outputs nobody asked for). Those stores inside the lookup loop matter for speed: they
    /// may alias the index and weight loads, so the loop cannot run loads ahead of them —
    /// exactly the code PyTorch's users get. `num_rows` is the table's row count: an index at or
    /// past it traps, as eager's `CUDA_KERNEL_ASSERT(input[emb] < numRows)`.
    pub unsafe fn embedding_bag_sum_reference(
        indices: *const i64,
        offsets: *const i64,
        weight: *const f32,
        out: *mut f32,
        offset2bag: *mut i64,
        num_indices: i64,
        num_bags: i64,
        feature_size: i64,
        bag_size: *mut i64,
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
            Unweighted,
            padding_idx,
            num_rows,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::embedding_bag_sum_reference;
    use crate::emu::{EmuError, EmuLaunch};

    /// The reference as eager launches it (block (32, 8), the plan's grid), with `num_rows` of
    /// the table: `Ok(out)` or the emulator's error.
    fn reference(
        weight: &[f32],
        d: usize,
        indices: &[i64],
        offsets: &[i64],
        num_rows: i64,
    ) -> Result<Vec<f32>, EmuError> {
        let b = offsets.len() - 1;
        let mut out = vec![f32::NAN; b * d];
        let mut offset2bag = vec![0i64; indices.len().max(1)];
        let mut bag_size = vec![0i64; b + 1];
        unsafe {
            EmuLaunch::new(
                (b * d.div_ceil(32)).div_ceil(8).min(1024) as u32,
                [32, 8, 1],
            )
            .ptr(indices)
            .ptr(offsets)
            .ptr(weight)
            .ptr_mut(&mut out)
            .ptr_mut(&mut offset2bag)
            .arg(indices.len())
            .arg(b)
            .arg(d)
            .ptr_mut(&mut bag_size)
            .arg(-1i64)
            .arg(num_rows)
            .try_run(&embedding_bag_sum_reference::EMU)
        }?;
        Ok(out)
    }

    /// The reference sums each bag and, as eager's `CUDA_KERNEL_ASSERT(input[emb] < numRows)`,
    /// stops at an index past the table (the emulator reports the trap as a kernel fault).
    #[test]
    fn the_reference_sums_bags_and_traps_on_an_index_past_the_table() {
        let (rows, d) = (5usize, 40usize);
        let weight: Vec<f32> = (0..rows * d).map(|i| i as f32 * 0.5 - 3.0).collect();
        let indices = [4i64, 0, 4, 2];
        let offsets = [0i64, 0, 3, 4];
        let out = reference(&weight, d, &indices, &offsets, rows as i64).unwrap();
        for c in 0..d {
            assert_eq!(out[c], 0.0);
            assert_eq!(out[d + c], 2.0 * weight[4 * d + c] + weight[c]);
            assert_eq!(out[2 * d + c], weight[2 * d + c]);
        }
        // Index 5 of a 5-row table: the row is allocated (the table is read as 6 rows here), so
        // only the check stops it.
        let padded: Vec<f32> = (0..(rows + 1) * d).map(|i| i as f32).collect();
        let r = reference(&padded, d, &[1, 5], &[0, 2], rows as i64);
        assert!(
            matches!(r, Err(EmuError::KernelFault(ref m)) if m.contains("assertion")),
            "{r:?}"
        );
    }
}
