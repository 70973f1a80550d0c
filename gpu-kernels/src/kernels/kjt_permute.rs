//! Problem 7, `kjt_permute`: permute the features of a keyed jagged tensor (TorchRec's
//! `permute_2D_sparse_data` semantics), repeated features allowed.
//!
//! The reference is the eager `Model` of `07_kjt_permute.py` launch for launch; every kernel
//! is a port of the ATen kernel eager PyTorch launches:
//! ```text
//! permuted_lengths = lengths.index_select(0, permute)         # aten_gather_rows16
//! in_starts = torch.cumsum(lengths.view(-1), 0) - lengths...  # aten_cast_i32_to_i64, scan, aten_sub_i64_i32
//! out_starts = torch.cumsum(permuted_lengths.view(-1), 0) - … # the same on the permuted lengths
//! shift = in_starts.view(T, B).index_select(0, permute)...    # aten_gather_rows16, aten_sub_i64
//!         - out_starts
//! src = torch.repeat_interleave(shift, permuted_lengths...,   # cast + scan (repeats.cumsum),
//!                               output_size=NP)               # aten_repeat_interleave_i32,
//!                                                             # aten_gather_elementwise_i64_by_i32 (index_select)
//! src += torch.arange(NP)                                     # aten_arange_with_index_i64, aten_add_i64
//! values[src], weights[src]                                   # aten_index_elementwise_i64, _f32
//! ```
//! [`aten_repeat_interleave_i32`] is ATen's `compute_cuda_kernel` (Repeat.cu), also used by
//! problem 8.
use crate::dev::*;

kernel! {
    /// `torch.repeat_interleave(repeats)` for int32 `repeats` of `size` entries whose inclusive
    /// sum is `cumsum` (int64): `result[j] = i` for every `j` in `[cumsum[i] - repeats[i],
    /// cumsum[i])`. One warp per entry, grid-stride over entries. Launch: grid
    /// `min(ceil_div(size, 16), 2048)`, block 512.
    pub unsafe fn aten_repeat_interleave_i32(
        repeats: *const i32,
        cumsum: *const i64,
        result: *mut i32,
        size: i64,
        result_size: i64,
    ) {
        let _ = result_size; // ATen asserts it equals cumsum[size - 1]
        let idx = block_idx_x() as i64 * block_dim_x() as i64 + thread_idx_x() as i64;
        let stride = (block_dim_x() * grid_dim_x() / WARP_SIZE) as i64;
        let warp = idx / WARP_SIZE as i64;
        let lane = idx % WARP_SIZE as i64;
        let mut i = warp;
        while i < size {
            let end = *cumsum.add(i as usize);
            let start = end - *repeats.add(i as usize) as i64;
            let mut j = start + lane;
            while j < end {
                *result.add(j as usize) = i as i32;
                j += WARP_SIZE as i64;
            }
            i += stride;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emu::EmuLaunch;

    #[test]
    fn repeat_interleave_writes_each_index_its_count_of_times() {
        let repeats: Vec<i32> = (0..100i32).map(|i| (i * 7 % 11) * (i % 3)).collect();
        let cumsum: Vec<i64> = repeats
            .iter()
            .scan(0i64, |s, &r| {
                *s += r as i64;
                Some(*s)
            })
            .collect();
        let total = *cumsum.last().unwrap() as usize;
        let mut result = vec![-1i32; total];
        // A grid smaller than the entries: the grid-stride loop must cover them all.
        unsafe {
            EmuLaunch::new(2, 512)
                .ptr(&repeats)
                .ptr(&cumsum)
                .ptr_mut(&mut result)
                .arg(100)
                .arg(total)
                .run(&aten_repeat_interleave_i32::EMU);
        }
        let expect: Vec<i32> = repeats
            .iter()
            .enumerate()
            .flat_map(|(i, &r)| std::iter::repeat_n(i as i32, r as usize))
            .collect();
        assert_eq!(result, expect);
    }
}
