//! Problem 9, `unique_indices`, tuned: no sort. The ids are row numbers below E, so a count
//! per row and a presence bitmap over the rows give everything in row order: the distinct ids
//! sorted, their counts, and each id's rank (its position in `unique`) from the bitmap.
//!
//! # Plan (`words` = ceil_div(E, 32) bitmap words)
//! 1. [`unique_tuned_clear`]: `cnt` [E] u32 and `bitmap` [words] ← 0 (grid-stride).
//! 2. [`unique_tuned_count`]: each block takes 2048 ids, adds them up in a shared-memory hash
//!    table (4096 slots: a hot id of the block costs one global atomic, not one per lookup),
//!    then per distinct id one global `cnt[id] += k` and one `red.or` of its bitmap bit.
//! 3. `scan_init`, then [`unique_tuned_word_ends`]: the suite's look-back scan
//!    ([`crate::kernels::scan`]) of the words' popcounts: `word_end[w]` = ranks used up to
//!    and including word w (2 MB for E = 16M, in L2).
//! 4. [`unique_tuned_emit`]: thread per word: its set bits in order get ranks
//!    `word_end[w] − popcount(word)` onwards, `unique[rank] = row`, `counts[rank] = cnt[row]`;
//!    the last word's thread writes `num_unique`.
//! 5. [`unique_tuned_inverse`]: `inverse[i]` = (word_end[w] − popcount(word)) + popcount of
//!    the word's bits below the id's, w = id / 32: two lookups in 4 MB of L2-resident tables
//!    instead of an E-sized rank array; 8 ids per thread, loads first.
//!
//! Needs E ≤ 2³² − 1 (ids as u32; E is 16M at `full`): with a larger E the count writes
//! nothing, which the check reports.
//!
//! # Memory at `full` (N = 10M ids over E = 16M rows)
//! Clear 64 MB + 2 MB; the ids read twice (2 × 80 MB); ≈ 4.9K blocks × ≈ 1.5K distinct ids of
//! atomics on `cnt` (random sectors of a 64 MB array); the emit reads the present rows' counts
//! and writes unique and counts (2 × 8 B × U); inverse written once (80 MB): ≈ 0.5 GB, ≈ 0.13
//! ms at 4.23 TB/s. The problem's compulsory bytes (ids in, outputs out) are ≈ 0.17 GB (0.04
//! ms): the E-sized clear and count and the second read of the ids keep this plan near a third
//! of that floor at best. The CUDA example (the same count, then an E-sized rank array: 64 MB
//! more written and gathered from) ran at 0.305 ms.
use crate::dev::*;
use crate::kernels::scan::inclusive_sum_tile;

/// Threads of every block of the plan.
pub const UNIQUE_THREADS: u32 = 256;
/// Ids per block of the count and inverse kernels.
pub const UNIQUE_TILE: usize = 2048;
/// Ids per thread (`UNIQUE_TILE / UNIQUE_THREADS`).
const PER_THREAD: usize = UNIQUE_TILE / UNIQUE_THREADS as usize;
/// Slots of the count kernel's shared hash table (twice the ids of a block).
const SLOTS: usize = 4096;
/// An empty slot (no id equals it: ids are below E ≤ u32::MAX).
const EMPTY: u32 = u32::MAX;

kernel! {
    /// Launch: block 256, any grid (the plan uses min(ceil_div(E, 256), 4096)).
    pub unsafe fn unique_tuned_clear(cnt: *mut u32, rows: i64, bitmap: *mut u32, words: i64) {
        let stride = (grid_dim_x() * block_dim_x()) as i64;
        let mut i = (block_idx_x() * block_dim_x() + thread_idx_x()) as i64;
        while i < rows {
            *cnt.add(i as usize) = 0;
            if i < words {
                *bitmap.add(i as usize) = 0;
            }
            i += stride;
        }
    }
}

kernel! {
    /// Launch: grid max(ceil_div(N, 2048), 1), block 256, after [`unique_tuned_clear`].
    pub unsafe fn unique_tuned_count(
        indices: *const i64,
        n: i64,
        rows: i64,
        cnt: *mut u32,
        bitmap: *mut u32,
    ) {
        if rows > EMPTY as i64 {
            return;
        }
        let keys = shared_addr(crate::static_shared!(UNIQUE_TUNED_KEYS: [u32; 4096]));
        let vals = shared_addr(crate::static_shared!(UNIQUE_TUNED_VALS: [u32; 4096]));
        let slot = |base: SharedAddr, s: usize| base + (4 * s) as SharedAddr;
        let t = thread_idx_x() as usize;
        let mut s = t;
        while s < SLOTS {
            st_shared_u32(slot(keys, s), EMPTY);
            st_shared_u32(slot(vals, s), 0);
            s += UNIQUE_THREADS as usize;
        }
        sync_threads();
        let base = block_idx_x() as usize * UNIQUE_TILE;
        let mut ids = [EMPTY; PER_THREAD];
        for (k, id) in ids.iter_mut().enumerate() {
            let i = base + k * UNIQUE_THREADS as usize + t;
            if (i as i64) < n {
                *id = load_nc_i64(indices.add(i)) as u32;
            }
        }
        for id in ids {
            if id != EMPTY {
                // Fibonacci hashing to 12 bits, then linear probing: at most 2048 keys in
                // 4096 slots, so a free slot is always found.
                let mut s = (id.wrapping_mul(2_654_435_761) >> 20) as usize;
                loop {
                    let prev = atomic_cas_shared_u32(slot(keys, s), EMPTY, id);
                    if prev == EMPTY || prev == id {
                        atomic_add_shared_u32(slot(vals, s), 1);
                        break;
                    }
                    s = (s + 1) % SLOTS;
                }
            }
        }
        sync_threads();
        let mut s = t;
        while s < SLOTS {
            let id = ld_shared_u32(slot(keys, s));
            if id != EMPTY {
                atomic_add_u32(cnt.add(id as usize), ld_shared_u32(slot(vals, s)));
                red_or_u32(bitmap.add(id as usize / 32), 1 << (id % 32));
            }
            s += UNIQUE_THREADS as usize;
        }
    }
}

kernel! {
    /// `word_end[w]` = Σ popcount(bitmap[0..=w]). Launch: grid max(ceil_div(words, 2048), 1),
    /// block 256, after `scan_init` of `status` and [`unique_tuned_count`].
    pub unsafe fn unique_tuned_word_ends(
        bitmap: *const u32,
        word_end: *mut i64,
        words: i64,
        status: *mut u64,
    ) {
        inclusive_sum_tile(|w| (*bitmap.add(w)).count_ones() as i64, word_end, words, status);
    }
}

kernel! {
    /// Launch: grid ceil_div(words, 256), block 256, after [`unique_tuned_word_ends`].
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn unique_tuned_emit(
        bitmap: *const u32,
        word_end: *const i64,
        cnt: *const u32,
        unique: *mut i64,
        counts: *mut i64,
        num_unique: *mut i64,
        words: i64,
    ) {
        let w = (block_idx_x() * block_dim_x() + thread_idx_x()) as i64;
        if w >= words {
            return;
        }
        let mut bits = *bitmap.add(w as usize);
        let end = *word_end.add(w as usize);
        let mut rank = end - bits.count_ones() as i64;
        while bits != 0 {
            let row = w * 32 + bits.trailing_zeros() as i64;
            *unique.add(rank as usize) = row;
            *counts.add(rank as usize) = *cnt.add(row as usize) as i64;
            rank += 1;
            bits &= bits - 1;
        }
        if w == words - 1 {
            *num_unique = end;
        }
    }
}

kernel! {
    /// Launch: grid max(ceil_div(N, 2048), 1), block 256, after [`unique_tuned_word_ends`].
    pub unsafe fn unique_tuned_inverse(
        indices: *const i64,
        n: i64,
        bitmap: *const u32,
        word_end: *const i64,
        inverse: *mut i64,
    ) {
        let base = block_idx_x() as usize * UNIQUE_TILE + thread_idx_x() as usize;
        let at = |k: usize| base + k * UNIQUE_THREADS as usize;
        let mut ids = [0u32; PER_THREAD];
        for (k, id) in ids.iter_mut().enumerate() {
            if (at(k) as i64) < n {
                *id = load_nc_i64(indices.add(at(k))) as u32;
            }
        }
        for (k, id) in ids.into_iter().enumerate() {
            if (at(k) as i64) < n {
                let w = id as usize / 32;
                let bits = load_nc_u32(bitmap.add(w));
                let below = bits & ((1u32 << (id % 32)) - 1);
                let first = load_nc_i64(word_end.add(w)) - bits.count_ones() as i64;
                *inverse.add(at(k)) = first + below.count_ones() as i64;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emu::EmuLaunch;
    use crate::kernels::scan::{scan_init, SCAN_TILE};
    use std::collections::BTreeMap;

    fn cfg(grid: usize) -> EmuLaunch {
        EmuLaunch::new(grid.max(1) as u32, UNIQUE_THREADS)
    }

    /// The five-step plan on the emulator against a BTreeMap of the ids.
    fn check(ids: &[i64], rows: usize) {
        let n = ids.len();
        let words = rows.div_ceil(32);
        let tiles = words.div_ceil(SCAN_TILE).max(1);
        let mut cnt = vec![7u32; rows];
        let mut bitmap = vec![!0u32; words];
        let mut word_end = vec![-1i64; words];
        let mut status = vec![!0u64; tiles + 1];
        let (mut unique, mut counts, mut inverse) =
            (vec![-1i64; n], vec![-1i64; n], vec![-1i64; n]);
        let mut num_unique = [-1i64];
        unsafe {
            cfg(rows.div_ceil(256).min(4096))
                .ptr_mut(&mut cnt)
                .arg(rows)
                .ptr_mut(&mut bitmap)
                .arg(words)
                .run(&unique_tuned_clear::EMU);
            cfg(n.div_ceil(UNIQUE_TILE))
                .ptr(ids)
                .arg(n)
                .arg(rows)
                .ptr_mut(&mut cnt)
                .ptr_mut(&mut bitmap)
                .run(&unique_tuned_count::EMU);
            cfg((tiles + 1).div_ceil(256))
                .ptr_mut(&mut status)
                .arg(tiles)
                .run(&scan_init::EMU);
            cfg(tiles)
                .ptr(&bitmap)
                .ptr_mut(&mut word_end)
                .arg(words)
                .ptr_mut(&mut status)
                .run(&unique_tuned_word_ends::EMU);
            cfg(words.div_ceil(256))
                .ptr(&bitmap)
                .ptr(&word_end)
                .ptr(&cnt)
                .ptr_mut(&mut unique)
                .ptr_mut(&mut counts)
                .ptr_mut(&mut num_unique)
                .arg(words)
                .run(&unique_tuned_emit::EMU);
            cfg(n.div_ceil(UNIQUE_TILE))
                .ptr(ids)
                .arg(n)
                .ptr(&bitmap)
                .ptr(&word_end)
                .ptr_mut(&mut inverse)
                .run(&unique_tuned_inverse::EMU);
        }
        let mut want: BTreeMap<i64, i64> = BTreeMap::new();
        for &id in ids {
            *want.entry(id).or_default() += 1;
        }
        let u = want.len();
        assert_eq!(num_unique[0] as usize, u);
        assert_eq!(unique[..u], want.keys().copied().collect::<Vec<_>>()[..]);
        assert_eq!(counts[..u], want.values().copied().collect::<Vec<_>>()[..]);
        let rank: BTreeMap<i64, i64> = want
            .keys()
            .enumerate()
            .map(|(r, &id)| (id, r as i64))
            .collect();
        let want_inverse: Vec<i64> = ids.iter().map(|id| rank[id]).collect();
        assert_eq!(inverse, want_inverse);
    }

    #[test]
    fn skewed_ids_over_several_blocks_and_scan_tiles() {
        // 5000 ids over 70,000 rows (2188 words: two scan tiles; three count blocks), a third
        // of them the hot row 69,999 (the last bit of the last word), the rest spread.
        let rows = 70_000;
        let ids: Vec<i64> = (0..5000)
            .map(|i| {
                if i % 3 == 0 {
                    69_999
                } else {
                    (i * 7919) % 70_000
                }
            })
            .collect();
        check(&ids, rows);
    }

    #[test]
    fn one_id_all_equal_and_all_distinct() {
        check(&[0], 1);
        check(&vec![31; 3000], 40);
        let distinct: Vec<i64> = (0..3000).map(|i| (i * 2003) % 3000).collect();
        check(&distinct, 3000);
    }
}
