//! Problem 9, `unique_indices`: `torch.unique(indices, sorted=True, return_inverse=True,
//! return_counts=True)`.
//!
//! The reference is the launch sequence of PyTorch's CUDA `unique`
//! (aten/src/ATen/native/cuda/UniqueCub.cu, `UniqueCub<int64_t>` then `compute_unique`):
//! 1. `range = arange(N)` ([`aten_arange_with_index_i64`](super::torch_ops::aten_arange_with_index_i64), eager's RangeFactories kernel);
//! 2. `cub::DeviceRadixSort::SortPairs(indices → sorted, range → sorted_indices)` over the full
//!    64-bit keys ([`radix_sort`](super::radix_sort): init, histogram, bin offsets, 8 onesweep
//!    passes);
//! 3. `adjacent_difference_kernel`: `inv_loc[i] = sorted[i] != sorted[i-1]` as int32
//!    ([`unique_adjacent_difference`]);
//! 4. `cub::DeviceScan::InclusiveSum(inv_loc → inv_loc_out)` (int32 in, int64 out)
//!    ([`scan`](super::scan));
//! 5. `scatter_kernel`: `inverse[sorted_indices[i]] = inv_loc_out[i]`
//!    ([`aten_scatter_i64`](super::torch_ops::aten_scatter_i64));
//! 6. `cub::DeviceRunLengthEncode::Encode(sorted → unique, counts, num_runs)`: here
//!    [`unique_run_ends`] (one pass over the sorted keys that writes each run's key and end,
//!    and the number of runs) and [`unique_counts_from_ends`] (counts = differences of the
//!    ends). CUB does this in one look-back pass over the keys; this reads the run numbers the
//!    scan already produced instead (one more read of N int64) and takes a second, U-sized
//!    kernel.
//!
//! The `length.item()` sync eager PyTorch ends with has no counterpart: the count stays on the
//! device, in the `num_unique` output.
use crate::dev::*;

kernel! {
    /// `inv_loc[i] = i > 0 ? sorted[i] != sorted[i - 1] : 0` (int32), grid-stride. Launch: grid
    /// `ceil_div(N, 512)`, block 512 (ATen's `getApplyGrid` / `getApplyBlock`).
    pub unsafe fn unique_adjacent_difference(inv_loc: *mut i32, sorted: *const i64, n: i64) {
        let stride = (grid_dim_x() * block_dim_x()) as usize;
        let mut i = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
        while (i as i64) < n {
            *inv_loc.add(i) = if i > 0 { (*sorted.add(i) != *sorted.add(i - 1)) as i32 } else { 0 };
            i += stride;
        }
    }
}

kernel! {
    /// Run-length encoding of the sorted keys, given each position's run number `run[i]` (the
    /// inclusive sum of the run heads): a run's first position writes `unique[run] = key`, its
    /// last writes `ends[run] = i + 1`, and the last position writes `num_unique[0]`.
    /// Grid-stride; launch: grid `max(ceil_div(N, 512), 1)`, block 512.
    pub unsafe fn unique_run_ends(
        sorted: *const i64,
        run: *const i64,
        unique: *mut i64,
        ends: *mut i64,
        num_unique: *mut i64,
        n: i64,
    ) {
        let stride = (grid_dim_x() * block_dim_x()) as usize;
        let first = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
        if n == 0 && first == 0 {
            *num_unique = 0;
        }
        let mut i = first;
        while (i as i64) < n {
            let key = *sorted.add(i);
            let r = *run.add(i) as usize;
            if i == 0 || *sorted.add(i - 1) != key {
                *unique.add(r) = key;
            }
            if i as i64 == n - 1 {
                *ends.add(r) = n;
                *num_unique = r as i64 + 1;
            } else if *sorted.add(i + 1) != key {
                *ends.add(r) = i as i64 + 1;
            }
            i += stride;
        }
    }
}

kernel! {
    /// `counts[u] = ends[u] - ends[u - 1]` (`ends[-1] = 0`) for `u < num_unique[0]`.
    /// Grid-stride; launch: grid `max(ceil_div(N, 512), 1)`, block 512.
    pub unsafe fn unique_counts_from_ends(counts: *mut i64, ends: *const i64, num_unique: *const i64) {
        let u_count = *num_unique as usize;
        let stride = (grid_dim_x() * block_dim_x()) as usize;
        let mut u = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
        while u < u_count {
            *counts.add(u) = *ends.add(u) - if u > 0 { *ends.add(u - 1) } else { 0 };
            u += stride;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emu::EmuLaunch;

    fn grid_stride(n: usize) -> EmuLaunch {
        EmuLaunch::new(n.div_ceil(512).max(1) as u32, 512)
    }

    /// The whole plan on the emulator, for an input given as i64.
    fn unique(indices: &[i64]) -> (Vec<i64>, Vec<i64>, Vec<i64>) {
        let n = indices.len();
        let keys: Vec<u64> = indices.iter().map(|&x| x as u64).collect();
        let range: Vec<u64> = (0..n as u64).collect();
        let (sorted, sorted_idx) = super::super::radix_sort::tests::sort_pairs(&keys, &range, true);
        let sorted: Vec<i64> = sorted.iter().map(|&k| k as i64).collect();
        let sorted_idx: Vec<i64> = sorted_idx.iter().map(|&k| k as i64).collect();
        let mut inv_loc = vec![-1i32; n];
        let mut unique = vec![i64::MIN; n];
        let mut ends = vec![i64::MIN; n];
        let mut counts = vec![i64::MIN; n];
        let mut inverse = vec![i64::MIN; n];
        let mut num = [i64::MIN];
        unsafe {
            grid_stride(n)
                .ptr_mut(&mut inv_loc)
                .ptr(&sorted)
                .arg(n)
                .run(&unique_adjacent_difference::EMU);
        }
        let inv_wide: Vec<i64> = inv_loc.iter().map(|&x| x as i64).collect();
        let run = super::super::scan::tests::run_inclusive_sum_i64(&inv_wide);
        unsafe {
            grid_stride(n)
                .ptr_mut(&mut inverse)
                .ptr(&sorted_idx)
                .ptr(&run)
                .arg(n)
                .run(&super::super::torch_ops::aten_scatter_i64::EMU);
            grid_stride(n)
                .ptr(&sorted)
                .ptr(&run)
                .ptr_mut(&mut unique)
                .ptr_mut(&mut ends)
                .ptr_mut(&mut num)
                .arg(n)
                .run(&unique_run_ends::EMU);
            grid_stride(n)
                .ptr_mut(&mut counts)
                .ptr(&ends)
                .ptr(&num)
                .run(&unique_counts_from_ends::EMU);
        }
        let u = num[0] as usize;
        unique.truncate(u);
        counts.truncate(u);
        (unique, inverse, counts)
    }

    fn expected(indices: &[i64]) -> (Vec<i64>, Vec<i64>, Vec<i64>) {
        let mut unique = indices.to_vec();
        unique.sort_unstable();
        unique.dedup();
        let inverse = indices
            .iter()
            .map(|x| unique.binary_search(x).unwrap() as i64)
            .collect();
        let counts = unique
            .iter()
            .map(|u| indices.iter().filter(|&x| x == u).count() as i64)
            .collect();
        (unique, inverse, counts)
    }

    #[test]
    fn matches_a_sort_and_dedup_on_skewed_equal_and_distinct_inputs() {
        let skewed: Vec<i64> = (0..5000u64)
            .map(|i| {
                let h = super::super::radix_sort::tests::mix(i);
                // Many repeats of a few hot values, a long tail, and some negatives.
                if h.is_multiple_of(3) {
                    (h % 7) as i64
                } else {
                    (h % 100_000) as i64 - 500
                }
            })
            .collect();
        for input in [
            skewed,
            vec![17; 4000],
            (0..3500).rev().map(|i| i * 3).collect(),
            vec![-2],
            vec![],
        ] {
            assert_eq!(
                unique(&input),
                expected(&input),
                "input of {} values",
                input.len()
            );
        }
    }
}
