//! Problem 1, `embedding_bag_sum`: out[b, :] = Σ_{j ∈ offsets[b]..offsets[b+1]} weight[indices[j], :].
//!
//! * [`embedding_bag_sum_reference`] mirrors PyTorch eager's
//!   `EmbeddingBag_updateOutputKernel_sum_mean` (aten/src/ATen/native/cuda/EmbeddingBag.cu): one
//!   thread per (bag, column), blocks of (32, 8), a grid-stride loop over (bag, 32-column chunk),
//!   scalar loads, fp32 accumulation, and the `offset2bag` and `bag_size` side outputs eager
//!   writes (to scratch buffers here).
//!
//! The project's tuned kernel is in [`super::embedding_bag_sum_tuned`].
use crate::dev::*;

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
        let chunks_per_bag = (feature_size + block_dim_x() as i64 - 1) / block_dim_x() as i64;
        let num_chunks = num_bags * chunks_per_bag;
        let mut chunk = (block_idx_x() * block_dim_y() + thread_idx_y()) as i64;
        let stride = (grid_dim_x() * block_dim_y()) as i64;
        while chunk < num_chunks {
            let feature = (chunk % chunks_per_bag) * block_dim_x() as i64 + thread_idx_x() as i64;
            if feature < feature_size {
                let bag = chunk / chunks_per_bag;
                let column = weight.add(feature as usize);
                let begin = if bag == 0 { 0 } else { *offsets.add(bag as usize) };
                let end = if bag < num_bags - 1 { *offsets.add(bag as usize + 1) } else { num_indices };
                let mut sum = 0.0f32;
                let mut size = 0i64;
                let mut emb = begin;
                while emb < end {
                    let pad = *indices.add(emb as usize) == padding_idx;
                    // CUDA_KERNEL_ASSERT(input[emb] < numRows). Eager's SASS reads the index again
                    // after its assert (one more load per lookup in Nsight Compute); forcing that
                    // reload here made this kernel 15–27% slower than eager's on an H200
                    // (20261203T082349Z-gpu-full), so the check alone is ported.
                    device_assert(*indices.add(emb as usize) < num_rows);
                    let row = *indices.add(emb as usize) * feature_size;
                    let value = *column.add(row as usize);
                    sum += if pad { 0.0 } else { value };
                    size += if pad { 0 } else { 1 };
                    if feature == 0 {
                        *offset2bag.add(emb as usize) = bag;
                    }
                    emb += 1;
                }
                *bag_size.add(bag as usize) = size;
                *out.add((bag * feature_size + feature) as usize) = sum;
            }
            chunk += stride;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::embedding_bag_sum_reference;
    use crate::emu::{launch_kernel, EmuError, LaunchConfig};

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
        let cfg = LaunchConfig {
            grid: [(b * d.div_ceil(32)).div_ceil(8).min(1024) as u32, 1, 1],
            block: [32, 8, 1],
            shared_bytes: 0,
        };
        let args = [
            indices.as_ptr() as u64,
            offsets.as_ptr() as u64,
            weight.as_ptr() as u64,
            out.as_mut_ptr() as u64,
            offset2bag.as_mut_ptr() as u64,
            indices.len() as u64,
            b as u64,
            d as u64,
            bag_size.as_mut_ptr() as u64,
            (-1i64) as u64,
            num_rows as u64,
        ];
        unsafe { launch_kernel(&embedding_bag_sum_reference::EMU, &cfg, &args) }?;
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
