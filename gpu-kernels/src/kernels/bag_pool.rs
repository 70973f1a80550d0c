//! The engine of the project's tuned weighted-bf16 (problem 2) and int8 row-wise (problem 4)
//! bag kernels: sum pooling of table rows over CSR bags (`offsets` [B + 1], `indices` [N]). What
//! differs between the two tables — what the lane that reads an index fetches with it, how a
//! lane reads its columns of a row, how a lookup is added up and how a result is written — is a
//! [`BagTable`]; everything else is here.
//!
//! # Mapping
//! A block of 256 threads (8 warps) owns [`BLOCK_BAGS`] = 32 consecutive bags, one per lane:
//! every warp's lane l reads bag l's length (one coalesced load), and three ballots give every
//! warp the same masks of the block's empty, regular and long bags — no shared memory and no
//! barrier for what is known block-wide.
//!
//! **Lane groups.** A lane owns `V` consecutive columns of a row (`V` = [`VEC`] = 8 on the
//! vector path: 16 bytes of bf16, or 8 bytes of int8; `V` = 1 on the scalar path that takes any
//! D and alignment). A row needs `per_row` lanes, `ceil(D / V)` rounded up to a power of two
//! (at most 32: wider rows take several column passes), so one warp-wide load instruction reads
//! `groups` = 32 / `per_row` different rows (2 at D = 128, 4 at the `ci` D = 40). A *round*
//! issues `U` such loads back to back, with no branch, before adding any of them up:
//! `groups · U` rows in flight per warp. At the end of a bag the groups' sums are added by
//! `log2(groups)` butterfly shuffles and group 0 writes the result.
//!
//! **Phase 1: four bags per warp, the next chunk always in flight.** Warp w pools the block's
//! bags 4w..4w+3 one after the other. A bag's lookups are fetched 32 at a time (lane l: lookup
//! `base + l`, its row's byte offset, its side value, its scalar; [`BagTable::fetch`]) and the
//! offset and side value are broadcast to the row's lanes by shuffles. Before the rounds of a
//! chunk run, the next chunk — of the same bag, or the first of the warp's next bag — is already
//! requested, so after a warp's first bag neither offsets nor indices (nor problem 4's row
//! tails) are on the critical path: a bag costs its rounds. Empty bags are written as zeros.
//!
//! **Phase 2: long bags, the whole block.** A bag longer than [`LONG_ROUNDS`] rounds of one warp
//! (128 lookups for problem 2 at D = 128, 192 for problem 4) is skipped in phase 1. When a block
//! has any, after phase 1 all 8 warps pool each long bag together, a contiguous eighth each (the
//! same chunk pipeline), and add their partials through shared memory; warp 0 writes the result.
//! The bags' lengths are log-normal with a tail to 1000 (and bag B/2 is made the longest): one
//! warp alone on a 1000-lookup bag walks 250 dependent rounds plus 32 index loads in the
//! examples — likely the longest chain of their launches (see the problems' module docs); split
//! eight ways it is no longer than a regular bag's.
//!
//! All control flow around a shuffle, ballot or barrier is uniform: over the warp (chunk counts,
//! round counts and masks are the same in every lane) or over the block (the masks, D).
//!
//! Registers: the hot loop holds `U` slots of row data plus ~45 registers of chunk, stream and
//! accumulator state; ptxas (sm_90) needs 80 for problem 2 at U = 4 (no spill), so it asks for
//! 3 blocks per SM (24 warps; 4 blocks, at most 64 registers, spilled at any U worth having).
//! Problem 4 at U = 6 spilled 32 bytes at 80 registers, so it asks for 2 blocks per SM (16
//! warps): 119 registers, no spill (CUDA 13.5's ptxas).
use crate::dev::*;

/// Warps per block: the launch's block is (256, 1, 1).
pub const BLOCK_WARPS: u32 = 8;
/// Bags each warp pools in phase 1.
pub const BAGS_PER_WARP: u32 = 4;
/// Bags per block (one per lane of a warp): the grid is `ceil_div(B, 32)`.
pub const BLOCK_BAGS: u32 = BLOCK_WARPS * BAGS_PER_WARP;
/// A bag one warp would need more than this many rounds for is pooled by the whole block.
pub const LONG_ROUNDS: i64 = 16;
/// Columns per lane on the vector path.
pub const VEC: usize = 8;
/// Accumulator slots per lane: [`VEC`] columns, then one per-bag scalar ([`BagTable::EXTRA`]).
pub const ACC: usize = VEC + 1;

/// A lane's running sums: its columns in `0..V`, the per-bag scalar in `VEC`.
pub type Acc = [f32; ACC];

/// One table as the engine sees it. `V` is [`VEC`] (vector path) or 1 (scalar path).
pub trait BagTable {
    /// Whether [`BagTable::fetch`]'s per-lookup scalar is used (problem 4's `b + 128·s`): it is
    /// summed per lane, then over the warp (and the block's warps) into the accumulator's slot
    /// [`VEC`], which [`BagTable::store`] adds to every column.
    const EXTRA: bool;
    /// What the lane that reads lookup `j` of a chunk fetches for it: its row's byte offset (the
    /// key), a 32-bit side value broadcast with the key to the row's lanes, and the per-lookup
    /// scalar.
    unsafe fn fetch(&self, j: i64) -> (i64, u32, f32);
    /// The lane's base pointer for a pass in which its first column is `col` (< D): its
    /// columns of row 0.
    fn lane_base<const V: usize>(&self, col: i64) -> *const u8;
    /// The lane's share of the row at byte offset `key`: four words, the table's to interpret.
    unsafe fn load<const V: usize>(base: *const u8, key: i64) -> [u32; 4];
    /// Adds one lookup to the lane's sums. Must leave them as they are for `slot` = 0 and
    /// `side` = 0 (how a missing lookup of a partial round is added).
    fn add<const V: usize>(acc: &mut Acc, slot: [u32; 4], side: u32);
    /// Writes the lane's `V` columns, from `col`, of bag `bag`'s result.
    unsafe fn store<const V: usize>(&self, bag: i64, col: i64, acc: &Acc);
}

/// How a pass's columns are spread over a warp.
#[derive(Clone, Copy)]
struct Lanes {
    /// Lanes per row: a power of two, at most 32.
    per_row: u32,
    /// Rows one warp-wide load reads (32 / `per_row`).
    groups: u32,
    /// This lane's group.
    group: u32,
}

/// The whole kernel body: the block's 32 bags, phase 1 then phase 2.
#[inline(always)]
pub unsafe fn pool_block<T: BagTable, const V: usize, const U: usize>(
    table: &T,
    offsets: *const i64,
    num_bags: i64,
    dim: i64,
) {
    let lane = lane_id();
    let warp = warp_id();
    let first = block_idx_x() as i64 * BLOCK_BAGS as i64;
    let per_row = ((dim + V as i64 - 1) / V as i64).clamp(1, WARP_SIZE as i64) as u32;
    let per_row = per_row.next_power_of_two();
    let lanes = Lanes {
        per_row,
        groups: WARP_SIZE / per_row,
        group: lane / per_row,
    };
    let per_round = (lanes.groups as usize * U) as i64;
    // Lane l: bag `first + l`. The same three masks in every warp of the block.
    let mine = first + lane as i64;
    let len = if mine < num_bags {
        *offsets.add(mine as usize + 1) - *offsets.add(mine as usize)
    } else {
        -1
    };
    let long = len > LONG_ROUNDS * per_round;
    let empty_mask = ballot(len == 0);
    let regular_mask = ballot(len > 0 && !long);
    let long_mask = ballot(long);
    // A bag's bounds, when needed again: the same address in every lane, a cached load.
    let bounds = |q: u32| {
        let at = offsets.add((first + q as i64) as usize);
        (*at, *at.add(1))
    };
    let shift = warp * BAGS_PER_WARP;
    let own = |m: u32| (m >> shift) & ((1 << BAGS_PER_WARP) - 1);
    let pass_cols = (per_row as usize * V) as i64;
    let sub = (lane % per_row) as i64;

    // Phase 1: this warp's empty and regular bags, pass by pass.
    let mut pass = 0;
    while pass < dim {
        let col = pass + sub * V as i64;
        let writer = lanes.group == 0 && col < dim;
        let mut empties = own(empty_mask);
        while empties != 0 {
            let q = shift + empties.trailing_zeros();
            empties &= empties - 1;
            if writer {
                table.store::<V>(first + q as i64, col, &[0.0; ACC]);
            }
        }
        let mut todo = own(regular_mask);
        pool_segments::<T, V, U>(
            table,
            lanes,
            // Lanes past D read the row's last columns (and write nothing).
            table.lane_base::<V>(col.min(dim - V as i64)),
            || {
                if todo == 0 {
                    return None;
                }
                let q = shift + todo.trailing_zeros();
                todo &= todo - 1;
                let (begin, end) = bounds(q);
                Some((q, begin, end))
            },
            |q, acc| {
                if writer {
                    table.store::<V>(first + q as i64, col, acc);
                }
            },
        );
        pass += pass_cols;
    }

    // Phase 2: the block's long bags, all warps on each (block-uniform: `long_mask`, `dim`).
    if long_mask == 0 {
        return;
    }
    let partials = crate::static_shared!(BAG_POOL_PARTIALS: [f32; crate::kernels::bag_pool::BLOCK_WARPS as usize * 32 * crate::kernels::bag_pool::ACC]);
    let mut longs = long_mask;
    while longs != 0 {
        let q = longs.trailing_zeros();
        longs &= longs - 1;
        let (begin, end) = bounds(q);
        let part = (end - begin + BLOCK_WARPS as i64 - 1) / BLOCK_WARPS as i64;
        let my_begin = begin + warp as i64 * part;
        let my_end = (my_begin + part).min(end);
        let mut pass = 0;
        while pass < dim {
            let col = pass + sub * V as i64;
            let mut segment = (my_begin < my_end).then_some((q, my_begin, my_end));
            let mut total = [0.0f32; ACC];
            pool_segments::<T, V, U>(
                table,
                lanes,
                table.lane_base::<V>(col.min(dim - V as i64)),
                || segment.take(),
                |_, acc| total = *acc,
            );
            // Group 0 of each warp holds the warp's sums (every group does, after the reduce).
            let slot = partials.add(((warp * WARP_SIZE) as usize + sub as usize) * ACC);
            sync_threads(); // the previous pass's partials are read
            if lanes.group == 0 {
                #[allow(clippy::needless_range_loop)]
                for c in 0..ACC {
                    *slot.add(c) = total[c];
                }
            }
            sync_threads();
            if warp == 0 && lanes.group == 0 && col < dim {
                let mut sum = [0.0f32; ACC];
                for w in 0..BLOCK_WARPS as usize {
                    let from = partials.add((w * WARP_SIZE as usize + sub as usize) * ACC);
                    #[allow(clippy::needless_range_loop)]
                    for c in 0..ACC {
                        if c < V || (c == VEC && T::EXTRA) {
                            sum[c] += *from.add(c);
                        }
                    }
                }
                table.store::<V>(first + q as i64, col, &sum);
            }
            pass += pass_cols;
        }
    }
}

/// Pools a sequence of lookup ranges (`next_segment`: a tag and `begin..end`, never empty) for
/// one pass, in 32-lookup chunks with the next chunk always requested before the current one's
/// rounds; `done(tag, sums)` gets each range's sums, reduced over the groups (every lane holds
/// its columns' totals; slot [`VEC`] the range's per-lookup scalars, summed over the warp).
#[inline(always)]
unsafe fn pool_segments<T: BagTable, const V: usize, const U: usize>(
    table: &T,
    lanes: Lanes,
    base_ptr: *const u8,
    mut next_segment: impl FnMut() -> Option<(u32, i64, i64)>,
    mut done: impl FnMut(u32, &mut Acc),
) {
    let Some((mut tag, mut base, mut end)) = next_segment() else {
        return;
    };
    let lane = lane_id() as i64;
    // Lane l's part of the chunk at `base`: its lookup's key, side value and scalar.
    let fetch = |base: i64, end: i64| -> (i64, u32, f32) {
        let j = base + lane;
        if j < end {
            table.fetch(j)
        } else {
            (0, 0, 0.0)
        }
    };
    let mut next = fetch(base, end);
    let mut acc = [0.0f32; ACC];
    let mut extra = 0.0f32;
    loop {
        let (keys, sides, scalar) = next;
        if T::EXTRA {
            extra += scalar;
        }
        let count = (end - base).min(WARP_SIZE as i64) as u32;
        let (cur_tag, last) = (tag, base + WARP_SIZE as i64 >= end);
        let mut more = true;
        if last {
            match next_segment() {
                Some((t, b, e)) => (tag, base, end) = (t, b, e),
                None => more = false,
            }
        } else {
            base += WARP_SIZE as i64;
        }
        if more {
            next = fetch(base, end); // in flight during this chunk's rounds
        }
        let per_round = lanes.groups * U as u32;
        let mut k = 0;
        while k < count {
            if k + per_round <= count {
                round::<T, V, U, true>(base_ptr, lanes, keys, sides, count, k, &mut acc);
            } else {
                round::<T, V, U, false>(base_ptr, lanes, keys, sides, count, k, &mut acc);
            }
            k += per_round;
        }
        if last {
            reduce_groups::<V>(&mut acc, lanes.per_row);
            if T::EXTRA {
                acc[VEC] = warp_sum_f32(extra);
                extra = 0.0;
            }
            done(cur_tag, &mut acc);
            acc = [0.0; ACC];
        }
        if !more {
            break;
        }
    }
}

/// One round: `U` warp-wide loads (each `groups` rows) of the chunk's lookups from `k`, all
/// issued before any is added, with no branch: a lane whose lookup is past the chunk's end (a
/// partial round, `FULL` false) still loads a real row (the one its shuffle brings) and adds
/// zeros instead.
#[inline(always)]
unsafe fn round<T: BagTable, const V: usize, const U: usize, const FULL: bool>(
    base_ptr: *const u8,
    lanes: Lanes,
    keys: i64,
    sides: u32,
    count: u32,
    k: u32,
    acc: &mut Acc,
) {
    const { assert!(U <= MAX_UNROLL) };
    let mut slots = [[0u32; 4]; U];
    let mut side = [0u32; U];
    unrolled!(u < U => {
        let first = k + u as u32 * lanes.groups; // the same in every lane
        if FULL || first < count {
            let p = (first + lanes.group) & (WARP_SIZE - 1);
            let key = shfl_idx_i64(keys, p);
            side[u] = shfl_idx_u32(sides, p);
            slots[u] = T::load::<V>(base_ptr, key);
            if !FULL && first + lanes.group >= count {
                (slots[u], side[u]) = ([0; 4], 0);
            }
        }
    });
    unrolled!(u < U => {
        if FULL || k + u as u32 * lanes.groups < count {
            T::add::<V>(acc, slots[u], side[u]);
        }
    });
}

/// Adds the groups' column sums by butterfly shuffles over the lanes `per_row` apart and more:
/// after it every lane holds its columns' totals over the whole warp.
#[inline(always)]
fn reduce_groups<const V: usize>(acc: &mut Acc, per_row: u32) {
    let mut mask = per_row;
    while mask < WARP_SIZE {
        #[allow(clippy::needless_range_loop)] // a counted loop unrolls; an iterator chain did not
        for c in 0..V {
            acc[c] += shfl_xor_f32(acc[c], mask);
        }
        mask *= 2;
    }
}

/// Most loads in flight per lane ([`unrolled!`] writes out this many slots).
pub const MAX_UNROLL: usize = 8;

/// `$body` for each `$u` in `0..$n` (`$n` ≤ [`MAX_UNROLL`]), written out one after the other:
/// the slot arrays of [`round`] are then indexed by constants only and live in registers (a
/// `for` loop over them was unrolled too late for that at U = 8, and they went to local memory).
macro_rules! unrolled {
    ($u:ident < $n:expr => $body:block) => {
        unrolled!(@ $u, $n, $body, 0 1 2 3 4 5 6 7)
    };
    (@ $u:ident, $n:expr, $body:block, $($i:literal)*) => {
        $(
            if $i < $n {
                let $u: usize = $i;
                $body
            }
        )*
    };
}
use unrolled;
