//! Problem 8, `block_bucketize_sparse_features`, tuned: count, scan, scatter, with one warp per
//! (feature, sample) segment so that every read of the ids is coalesced.
//!
//! An id of feature t (block size s) goes to rank id / s as id − rank·s when id < W·s, else to
//! rank id % W as id / W (FBGEMM's rule). Outputs are grouped by (rank, feature, sample), the
//! input order kept inside each group.
//!
//! # Plan (segments S = T·B, groups G = W·T·B; scans from [`crate::kernels::scan`])
//! 1. `scan_init` twice, then `inclusive_sum_i32_to_i64` over `lengths`: `seg_end[s]` is one
//!    past segment s's last id.
//! 2. [`bucketize_tuned_count`]: warp per segment, 32 ids at a time (coalesced); each lane
//!    finds its id's rank, one ballot per rank counts the chunk's ids of that rank, and lane r
//!    keeps rank r's count: `new_lengths[r, t, b]`.
//! 3. `inclusive_sum_i32_to_i64` over `new_lengths`: `group_end[g]`.
//! 4. [`bucketize_tuned_scatter`]: warp per segment again; lane r holds the next free output
//!    position of rank r's group, each lane's place is that position (a shuffle from lane
//!    `rank`) plus the number of lower lanes of the chunk with the same rank (`match.any`), and
//!    it writes the new id, the weight and `unbucketize_permute[i]`; the W counts then advance.
//!
//! Ids and block sizes below 2³² (every table here: at most 4·10⁷ rows) divide in 32 bits, ≈ 5
//! times fewer instructions than the 64-bit division the reference's elementwise kernels use.
//! Lane r keeps rank r's count; with W > 32 ranks (a shape of the problem has 64) the ranks go
//! in blocks of 32, one pass over the segment's ids per block.
//!
//! # Memory at `full` (T = 856, B = 4096, W = 8, N ≈ 56M ids)
//! The ids are read twice (count, scatter: 2 × 450 MB), the weights once (225 MB); the new
//! ids, weights and permutation written once (450 + 225 + 450 MB); lengths, new lengths and
//! the two scans' ends ≈ 0.4 GB: ≈ 2.6 GB, ≈ 0.6 ms at 4.23 TB/s, against the problem's
//! compulsory 1.92 GB (0.45 ms). The CUDA example walks each segment with one thread (its
//! ids read one by one, 7.3 ms).
use crate::dev::*;

/// Threads per block of the two segment kernels: 8 segments per block.
pub const BUCKETIZE_THREADS: u32 = 256;

/// Rank and new id of `id` with block size `s` over `w` ranks (FBGEMM's rule); 32-bit
/// division when both fit.
#[inline(always)]
fn bucketize(id: i64, s: i64, w: i64) -> (u32, i64) {
    let fits = (id as u64) <= u32::MAX as u64 && (s as u64) <= u32::MAX as u64;
    if id < w * s {
        if fits {
            let (id32, s32) = (id as u32, s as u32);
            let rank = id32 / s32;
            (rank, (id32 - rank * s32) as i64)
        } else {
            (((id / s) as u32), id - (id / s) * s)
        }
    } else if fits {
        let (id32, w32) = (id as u32, w as u32);
        (id32 % w32, (id32 / w32) as i64)
    } else {
        ((id % w) as u32, id / w)
    }
}

/// What a warp needs of its segment.
struct Segment {
    /// Its number, t·B + b.
    seg: usize,
    /// Its ids' range in `indices`.
    begin: i64,
    end: i64,
    /// Its feature's block size.
    block_size: i64,
    /// T·B.
    segments: usize,
}

/// This warp's segment, or `None` past the last one (whole warps leave together).
#[inline(always)]
unsafe fn warp_segment(
    seg_end: *const i64,
    block_sizes: *const i64,
    features: i64,
    batch: i64,
) -> Option<Segment> {
    let segments = features * batch;
    let seg = ((block_idx_x() * block_dim_x() + thread_idx_x()) / WARP_SIZE) as i64;
    if seg >= segments {
        return None;
    }
    let begin = if seg == 0 {
        0
    } else {
        *seg_end.add(seg as usize - 1)
    };
    Some(Segment {
        seg: seg as usize,
        begin,
        end: *seg_end.add(seg as usize),
        block_size: *block_sizes.add((seg / batch) as usize),
        segments: segments as usize,
    })
}

/// Rank `u32::MAX` for lanes past the segment: it matches no rank.
const NO_RANK: u32 = u32::MAX;

kernel! {
    /// Launch: grid ceil_div(T·B, 8), block 256. Writes `new_lengths` [W, T, B].
    pub unsafe fn bucketize_tuned_count(
        seg_end: *const i64,
        indices: *const i64,
        block_sizes: *const i64,
        new_lengths: *mut i32,
        features: i64,
        batch: i64,
        ranks: i64,
    ) {
        let Some(Segment { seg, begin, end, block_size: s, segments }) =
            warp_segment(seg_end, block_sizes, features, batch)
        else {
            return;
        };
        let lane = lane_id();
        let mut first = 0u32;
        while (first as i64) < ranks {
            // Ranks first .. first + 32 of this pass; lane r counts rank first + r.
            let last = (ranks as u32).min(first + WARP_SIZE);
            let mut count = 0u32;
            let mut base = begin;
            while base < end {
                let i = base + lane as i64;
                let rank = if i < end {
                    bucketize(load_nc_i64(indices.add(i as usize)), s, ranks).0
                } else {
                    NO_RANK
                };
                for r in first..last {
                    let same = ballot(rank == r);
                    if lane == r - first {
                        count += same.count_ones();
                    }
                }
                base += WARP_SIZE as i64;
            }
            if first + lane < last {
                *new_lengths.add((first + lane) as usize * segments + seg) = count as i32;
            }
            first += WARP_SIZE;
        }
    }
}

kernel! {
    /// Launch: grid ceil_div(T·B, 8), block 256, after the scan of `new_lengths` into
    /// `group_end` [W·T·B].
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn bucketize_tuned_scatter(
        seg_end: *const i64,
        indices: *const i64,
        weights: *const f32,
        block_sizes: *const i64,
        group_end: *const i64,
        new_indices: *mut i64,
        new_weights: *mut f32,
        unbucketize_permute: *mut i64,
        features: i64,
        batch: i64,
        ranks: i64,
    ) {
        let Some(Segment { seg, begin, end, block_size: s, segments }) =
            warp_segment(seg_end, block_sizes, features, batch)
        else {
            return;
        };
        let lane = lane_id();
        let below = (1u32 << lane) - 1;
        let mut first = 0u32;
        while (first as i64) < ranks {
            // Ranks first .. first + 32 of this pass. Lane r: the next output position of rank
            // first + r's group of this segment.
            let last = (ranks as u32).min(first + WARP_SIZE);
            let mut next = if first + lane < last {
                let group = (first + lane) as usize * segments + seg;
                if group == 0 { 0 } else { *group_end.add(group - 1) }
            } else {
                0
            };
            let mut base = begin;
            while base < end {
                let i = base + lane as i64;
                let (rank, id) = if i < end {
                    bucketize(load_nc_i64(indices.add(i as usize)), s, ranks)
                } else {
                    (NO_RANK, 0)
                };
                // This pass's ids; the others are written by the pass of their rank.
                let mine = rank >= first && rank < last;
                let key = if mine { rank } else { NO_RANK };
                let same = match_any_u32(key);
                let at = shfl_idx_i64(next, key.wrapping_sub(first) & (WARP_SIZE - 1))
                    + (same & below).count_ones() as i64;
                if mine {
                    *new_indices.add(at as usize) = id;
                    *new_weights.add(at as usize) = load_nc_f32(weights.add(i as usize));
                    *unbucketize_permute.add(i as usize) = at;
                }
                for r in first..last {
                    let taken = ballot(rank == r);
                    if lane == r - first {
                        next += taken.count_ones() as i64;
                    }
                }
                base += WARP_SIZE as i64;
            }
            first += WARP_SIZE;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emu::EmuLaunch;

    fn cfg(threads: usize) -> EmuLaunch {
        EmuLaunch::new(
            threads.div_ceil(BUCKETIZE_THREADS as usize).max(1) as u32,
            BUCKETIZE_THREADS,
        )
    }

    /// The whole plan on the emulator (the scans done on the host: they are `scan.rs`'s, tested
    /// there), against the bucketization written out group by group.
    fn check(t: usize, b: usize, w: usize, lengths: &[i32], ids: &[i64], block_sizes: &[i64]) {
        let n = ids.len();
        let weights: Vec<f32> = (0..n).map(|k| k as f32 + 0.25).collect();
        let ends = |v: &[i32]| -> Vec<i64> {
            v.iter()
                .scan(0i64, |acc, &x| {
                    *acc += x as i64;
                    Some(*acc)
                })
                .collect()
        };
        let seg_end = ends(lengths);
        // The oracle: for each rank, feature, sample, the ids of that segment going there.
        let rule = |id: i64, s: i64| {
            let w = w as i64;
            if id < w * s {
                (id / s, id % s)
            } else {
                (id % w, id / w)
            }
        };
        let (mut want_lengths, mut want_ids, mut want_weights) = (vec![], vec![], vec![]);
        let mut want_back = vec![-1i64; n];
        for r in 0..w as i64 {
            for seg in 0..t * b {
                let begin = if seg == 0 {
                    0
                } else {
                    seg_end[seg - 1] as usize
                };
                let mut count = 0;
                for i in begin..seg_end[seg] as usize {
                    let (rank, new_id) = rule(ids[i], block_sizes[seg / b]);
                    if rank == r {
                        want_back[i] = want_ids.len() as i64;
                        want_ids.push(new_id);
                        want_weights.push(weights[i]);
                        count += 1;
                    }
                }
                want_lengths.push(count);
            }
        }
        let mut new_lengths = vec![-1i32; w * t * b];
        let mut new_ids = vec![-1i64; n];
        let mut new_weights = vec![f32::NAN; n];
        let mut back = vec![-1i64; n];
        unsafe {
            cfg(t * b * 32)
                .ptr(&seg_end)
                .ptr(ids)
                .ptr(block_sizes)
                .ptr_mut(&mut new_lengths)
                .arg(t)
                .arg(b)
                .arg(w)
                .run(&bucketize_tuned_count::EMU);
            assert_eq!(new_lengths, want_lengths);
            let group_end = ends(&new_lengths);
            cfg(t * b * 32)
                .ptr(&seg_end)
                .ptr(ids)
                .ptr(&weights)
                .ptr(block_sizes)
                .ptr(&group_end)
                .ptr_mut(&mut new_ids)
                .ptr_mut(&mut new_weights)
                .ptr_mut(&mut back)
                .arg(t)
                .arg(b)
                .arg(w)
                .run(&bucketize_tuned_scatter::EMU);
        }
        assert_eq!(new_ids, want_ids);
        assert_eq!(new_weights, want_weights);
        assert_eq!(back, want_back);
    }

    #[test]
    fn segments_of_every_length_and_ids_past_the_last_block() {
        // 3 features × 7 samples, W = 5; segments of 0..80 ids (several chunks of 32); feature
        // 1's block size covers half its ids, feature 2 has an id past 2^32 (64-bit path).
        let (t, b, w) = (3, 7, 5);
        let lengths: Vec<i32> = (0..t * b).map(|k| ((k * 37) % 81) as i32).collect();
        let block_sizes = vec![20i64, 10, 3_000_000_000];
        let mut ids = Vec::new();
        for (seg, &len) in lengths.iter().enumerate() {
            for j in 0..len as i64 {
                let id = match seg / b {
                    0 => (j * 13 + seg as i64) % 100,
                    1 => (j * 7 + seg as i64) % 100,
                    _ => (j * 1_000_000_007 + seg as i64) % 16_000_000_000,
                };
                ids.push(id);
            }
        }
        check(t, b, w, &lengths, &ids, &block_sizes);
    }

    #[test]
    fn more_ranks_than_lanes_go_in_passes_of_32() {
        // W = 70: three passes (32, 32, 6 ranks); ids below W·s spread over every rank, the
        // rest by id % W.
        let (t, b, w) = (2, 5, 70);
        let lengths: Vec<i32> = (0..t * b).map(|k| ((k * 29) % 97) as i32).collect();
        let block_sizes = vec![3i64, 11];
        let ids: Vec<i64> = (0..lengths.iter().sum::<i32>() as i64)
            .map(|j| (j * 7919) % 1500)
            .collect();
        check(t, b, w, &lengths, &ids, &block_sizes);
    }

    #[test]
    fn one_rank_takes_every_equal_id() {
        let (t, b, w) = (2, 4, 8);
        let lengths = vec![3, 0, 40, 1, 0, 0, 33, 2];
        let n: i32 = lengths.iter().sum();
        check(t, b, w, &lengths, &vec![0i64; n as usize], &[5, 7]);
    }
}
