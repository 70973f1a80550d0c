//! Problem 7, `kjt_permute`, tuned: a feature's values are contiguous, so the permute is P
//! contiguous copies, found from two small scans. Three launches:
//!
//! 1. [`kjt_tuned_lengths`]: block t < T sums `lengths[t, :]` (the feature's value count);
//!    block T + p copies row `permute[p]` of `lengths` to `permuted_lengths[p]`.
//! 2. [`kjt_tuned_offsets`]: one block scans the counts: `feature_start[t]` (where feature t's
//!    values begin in `values`) and `out_start[p]` (where the p-th selected feature's begin in
//!    the output), each with its total at the end.
//! 3. [`kjt_tuned_copy`]: block k copies output positions 2048k .. 2048(k+1): its first thread
//!    finds the position's feature by binary search over `out_start`, every thread then takes
//!    8 positions 256 apart (coalesced), walks the feature forward where a position passes the
//!    next feature's start, issues all 8 value loads and 8 weight loads before any store (16
//!    loads in flight per thread), then stores them.
//!
//! Memory at `full` (T = P = 856 features, B = 8192, NP ≈ 115M values): the copy reads 8 + 4
//! bytes and writes 8 + 4 bytes per value (≈ 2.76 GB, ≈ 0.65 ms at 4.23 TB/s), the lengths
//! are read twice and written once (28 MB each); the scans touch a few KB. The CUDA example of
//! the same plan (one load and one store in turn per element) ran at 83% of that floor; this
//! one is meant to stream closer to it with its loads in flight.
use crate::dev::*;

/// Threads of every block of the plan.
pub const KJT_THREADS: u32 = 256;
/// Output positions per block of the copy.
pub const KJT_CHUNK: usize = 2048;
/// Positions per thread of the copy (`KJT_CHUNK / KJT_THREADS`).
const PER_THREAD: usize = KJT_CHUNK / KJT_THREADS as usize;

kernel! {
    /// Launch: grid T + P, block 256. Writes `feature_len` [T] and `permuted_lengths` [P, B].
    pub unsafe fn kjt_tuned_lengths(
        lengths: *const i32,
        permute: *const i64,
        feature_len: *mut i64,
        permuted_lengths: *mut i32,
        features: i64,
        batch: i64,
        selected: i64,
    ) {
        let block = block_idx_x() as i64;
        let t = thread_idx_x() as usize;
        let batch = batch as usize;
        if block < features {
            let row = lengths.add(block as usize * batch);
            let mut sum = 0i64;
            let mut b = t;
            while b < batch {
                sum += *row.add(b) as i64;
                b += KJT_THREADS as usize;
            }
            let partials = crate::static_shared!(KJT_TUNED_PARTIALS: [i64; 8]);
            let sum = warp_sum_i64(sum);
            if lane_id() == 0 {
                *partials.add(warp_id() as usize) = sum;
            }
            sync_threads();
            if t == 0 {
                let mut total = 0i64;
                for w in 0..(KJT_THREADS / WARP_SIZE) as usize {
                    total += *partials.add(w);
                }
                *feature_len.add(block as usize) = total;
            }
        } else if block < features + selected {
            let p = (block - features) as usize;
            let src = lengths.add(*permute.add(p) as usize * batch);
            let dst = permuted_lengths.add(p * batch);
            let mut b = t;
            while b < batch {
                *dst.add(b) = *src.add(b);
                b += KJT_THREADS as usize;
            }
        }
    }
}

/// Exclusive sum of `get(0), …, get(n − 1)` into `out[0..n]`, the total into `out[n]`, by the
/// whole block (256 threads, 256 values per round, one carry between rounds). Every thread
/// of the block calls it.
#[inline(always)]
unsafe fn block_exclusive_sum(get: impl Fn(usize) -> i64, n: usize, out: *mut i64) {
    let sums = crate::static_shared!(KJT_TUNED_SCAN: [i64; 9]);
    let t = thread_idx_x() as usize;
    let (lane, warp) = (lane_id(), warp_id() as usize);
    let warps = (KJT_THREADS / WARP_SIZE) as usize;
    let mut carry = 0i64;
    let mut base = 0;
    while base < n {
        let i = base + t;
        let v = if i < n { get(i) } else { 0 };
        // Inclusive warp scan (Kogge–Stone by shuffles).
        let mut inc = v;
        let mut off = 1;
        while off < WARP_SIZE {
            let other = shfl_idx_i64(inc, if lane >= off { lane - off } else { lane });
            if lane >= off {
                inc += other;
            }
            off *= 2;
        }
        if lane == WARP_SIZE - 1 {
            *sums.add(warp) = inc;
        }
        sync_threads();
        let mut before = 0i64;
        let mut round = 0i64;
        for w in 0..warps {
            let s = *sums.add(w);
            if w < warp {
                before += s;
            }
            round += s;
        }
        if i < n {
            *out.add(i) = carry + before + inc - v;
        }
        carry += round;
        // Every thread has read this round's sums before the next round writes them.
        sync_threads();
        base += KJT_THREADS as usize;
    }
    if t == 0 {
        *out.add(n) = carry;
    }
}

kernel! {
    /// Launch: grid 1, block 256, after [`kjt_tuned_lengths`]. Writes `feature_start` [T + 1]
    /// and `out_start` [P + 1].
    pub unsafe fn kjt_tuned_offsets(
        feature_len: *const i64,
        permute: *const i64,
        feature_start: *mut i64,
        out_start: *mut i64,
        features: i64,
        selected: i64,
    ) {
        block_exclusive_sum(|t| *feature_len.add(t), features as usize, feature_start);
        block_exclusive_sum(
            |p| *feature_len.add(*permute.add(p) as usize),
            selected as usize,
            out_start,
        );
    }
}

kernel! {
    /// Launch: grid max(ceil_div(NP, 2048), 1), block 256, after [`kjt_tuned_offsets`].
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn kjt_tuned_copy(
        values: *const i64,
        weights: *const f32,
        permute: *const i64,
        feature_start: *const i64,
        out_start: *const i64,
        permuted_values: *mut i64,
        permuted_weights: *mut f32,
        selected: i64,
        total: i64,
    ) {
        let begin = block_idx_x() as i64 * KJT_CHUNK as i64;
        if begin >= total {
            return; // whole blocks leave together
        }
        let first = crate::static_shared!(KJT_TUNED_FIRST: [i64; 1]);
        if thread_idx_x() == 0 {
            // The last p with out_start[p] <= begin (out_start does not decrease).
            let (mut lo, mut hi) = (0i64, selected - 1);
            while lo < hi {
                let mid = (lo + hi + 1) / 2;
                if *out_start.add(mid as usize) <= begin {
                    lo = mid;
                } else {
                    hi = mid - 1;
                }
            }
            *first = lo;
        }
        sync_threads();
        let mut p = *first as usize;
        let mut src = [0usize; PER_THREAD];
        let mut dst = [0usize; PER_THREAD];
        let mut live = [false; PER_THREAD];
        for k in 0..PER_THREAD {
            let i = begin + (k * KJT_THREADS as usize + thread_idx_x() as usize) as i64;
            if i < total {
                // Past the selected features that end at or before i (empty ones too).
                while *out_start.add(p + 1) <= i {
                    p += 1;
                }
                let feature = *permute.add(p) as usize;
                src[k] = (*feature_start.add(feature) + (i - *out_start.add(p))) as usize;
                dst[k] = i as usize;
                live[k] = true;
            }
        }
        let mut v = [0i64; PER_THREAD];
        let mut w = [0.0f32; PER_THREAD];
        for k in 0..PER_THREAD {
            if live[k] {
                v[k] = load_nc_i64(values.add(src[k]));
                w[k] = load_nc_f32(weights.add(src[k]));
            }
        }
        for k in 0..PER_THREAD {
            if live[k] {
                *permuted_values.add(dst[k]) = v[k];
                *permuted_weights.add(dst[k]) = w[k];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emu::EmuLaunch;

    fn cfg(grid: u32) -> EmuLaunch {
        EmuLaunch::new(grid, KJT_THREADS)
    }

    /// The three launches on the emulator, against the permute written out directly: for each
    /// selected feature, its lengths row and its values in order.
    fn check(t: usize, b: usize, permute: &[i64], length: impl Fn(usize, usize) -> i32) {
        let p = permute.len();
        let lengths: Vec<i32> = (0..t * b).map(|k| length(k / b, k % b)).collect();
        let n: usize = lengths.iter().map(|&l| l as usize).sum();
        let values: Vec<i64> = (0..n as i64).map(|k| k * 7 + 3).collect();
        let weights: Vec<f32> = (0..n).map(|k| k as f32 * 0.5).collect();
        let feature_begin: Vec<usize> = (0..t)
            .map(|f| lengths[..f * b].iter().map(|&l| l as usize).sum())
            .collect();
        let (mut want_values, mut want_weights, mut want_lengths) = (vec![], vec![], vec![]);
        for &f in permute {
            let f = f as usize;
            let count: usize = lengths[f * b..(f + 1) * b]
                .iter()
                .map(|&l| l as usize)
                .sum();
            want_lengths.extend_from_slice(&lengths[f * b..(f + 1) * b]);
            want_values.extend_from_slice(&values[feature_begin[f]..feature_begin[f] + count]);
            want_weights.extend_from_slice(&weights[feature_begin[f]..feature_begin[f] + count]);
        }
        let np = want_values.len();
        let mut feature_len = vec![-1i64; t];
        let mut feature_start = vec![-1i64; t + 1];
        let mut out_start = vec![-1i64; p + 1];
        let mut permuted_lengths = vec![-1i32; p * b];
        let mut permuted_values = vec![-1i64; np];
        let mut permuted_weights = vec![f32::NAN; np];
        unsafe {
            cfg((t + p) as u32)
                .ptr(&lengths)
                .ptr(permute)
                .ptr_mut(&mut feature_len)
                .ptr_mut(&mut permuted_lengths)
                .arg(t)
                .arg(b)
                .arg(p)
                .run(&kjt_tuned_lengths::EMU);
            cfg(1)
                .ptr(&feature_len)
                .ptr(permute)
                .ptr_mut(&mut feature_start)
                .ptr_mut(&mut out_start)
                .arg(t)
                .arg(p)
                .run(&kjt_tuned_offsets::EMU);
            cfg(np.div_ceil(KJT_CHUNK).max(1) as u32)
                .ptr(&values)
                .ptr(&weights)
                .ptr(permute)
                .ptr(&feature_start)
                .ptr(&out_start)
                .ptr_mut(&mut permuted_values)
                .ptr_mut(&mut permuted_weights)
                .arg(p)
                .arg(np)
                .run(&kjt_tuned_copy::EMU);
        }
        assert_eq!(permuted_lengths, want_lengths);
        assert_eq!(permuted_values, want_values);
        assert_eq!(permuted_weights, want_weights);
        assert_eq!(feature_start[t] as usize, n);
        assert_eq!(out_start[p] as usize, np);
    }

    #[test]
    fn features_longer_than_a_chunk_repeats_drops_and_empty_features() {
        // 600 features (three scan rounds), feature 5 empty, feature 7 long (several chunks of
        // 2048), the rest 0..12 per sample; the permute repeats 7, drops most features and
        // takes the empty one between others.
        let (t, b) = (600, 12);
        let length = |f: usize, s: usize| match f {
            5 => 0,
            7 => 400,
            _ => ((f * 31 + s * 7) % 13) as i32,
        };
        let permute: Vec<i64> = [7, 5, 2, 7, 599, 0, 5, 300]
            .into_iter()
            .chain((0..300).map(|k| (k * 17 % 600) as i64))
            .collect();
        check(t, b, &permute, length);
    }

    #[test]
    fn one_feature_taken_twice_and_no_values_at_all() {
        check(1, 4, &[0, 0], |_, s| s as i32 + 1);
        check(3, 4, &[2, 1], |_, _| 0);
    }
}
