//! Problem 5, `embedding_backward_rowwise_adagrad`, tuned: the lookups are grouped by row with
//! a counting sort keyed by hash slot, then one warp per distinct row sums that row's gradients
//! and applies the row-wise Adagrad step in one read-modify-write. No N×D or U×D intermediate
//! exists: the gradient of a row lives in the registers of its warp (hot rows aside, below).
//!
//! For each distinct row r looked up: g = Σ grad_output[b] over every lookup of r (bag b; a row
//! looked up k times gets k terms), m[r] += mean(g²), W[r] -= lr·g / (sqrt(m[r]) + eps).
//!
//! # Plan (`cap` = 2·max(N, 1) hash slots, T = [`HOT_CHUNK`] lookups per warp)
//! 1. [`adagrad_sorted_clear`]: keys ← `EMPTY`, counts ← 0 (cap each), the scan's tile states
//!    and the two hot-row counters ← 0. Everything the plan reads later is written by the plan.
//! 2. [`adagrad_sorted_insert_count`]: one thread per lookup inserts its row into the table
//!    (linear probing, 64-bit CAS, the reference's hash), counts the lookup in `counts[slot]`
//!    (aggregated per warp with `match.any` and per block in shared memory, so the hot row's
//!    lookups in one block cost one global atomic) and records the slot of the lookup
//!    (`lookup_slot`, u32).
//! 3. `inclusive_sum_i32_to_i64` ([`crate::kernels::scan`]) over the cap counts: `ends[s]` is
//!    one past the last sorted position of slot s; slot s owns `ends[s-1] .. ends[s]`.
//! 4. [`adagrad_sorted_scatter`]: one warp per bag, 64 bags per block; each lookup takes a
//!    position in its slot's segment (the block takes one range per slot by an atomic
//!    decrement of `counts[slot]`, its warps share the range out in shared memory) and writes
//!    its bag id there (`sorted_bag`, u32). The order inside a segment is
//!    whatever the atomics give: the sum is fp32 in a run-dependent order, as the reference's
//!    atomics are.
//! 5. [`adagrad_sorted_rows`]: one warp per tile of 32 slots (grid-stride). Each lane reads
//!    one slot's segment bounds; a ballot picks the non-empty slots and the warp takes them in
//!    turn. A slot of k ≤ T lookups: the warp loads 32 bag ids at a time, broadcasts them by
//!    shuffles and sums those grad_output rows (4 columns per lane, two rows in flight),
//!    reduces Σg² over the warp, and updates momentum and the weight row (the reference's fp32
//!    order: fma-accumulated g², m = m0 + Σg²/D, denom = sqrt(m) + eps, w −= lr·g/denom). A
//!    slot of k > T lookups is hot: the warp only enqueues it (hot id, its ⌈k/T⌉ chunks) and
//!    zeroes its row of `hot_acc`.
//! 6. [`adagrad_sorted_hot_chunks`]: one warp per chunk of T lookups of a hot row adds the
//!    chunk's partial gradient (D floats) into the row's `hot_acc` row with fp32 atomics.
//! 7. [`adagrad_sorted_hot_combine`]: one warp per hot row applies the step with that gradient.
//!    Every looked-up row is updated exactly once (in 5 or in 7), and no other row is read or
//!    written.
//!
//! Bounds: a hot row has k > T lookups, so ⌈k/T⌉ < 2k/T chunks: at most N/64 chunks and N/128
//! hot rows for T = 128 (the scratch sizes and grids of the manifest).
//!
//! # Predicted memory traffic at `full` (E = 8M, D = 128, B = 65536, N ≈ 1.31M lookups)
//! Zipf(1.15) over 8M rows with N = 1.31M draws gives U ≈ 169K distinct rows (expected value),
//! the top row ≈ 15% of the lookups, and ≈ 590 rows of more than 128 lookups holding ≈ 71% of
//! them (≈ 7.8K hot chunks, well under the N/64 bound).
//! * Compulsory (the problem's count): grad_output 33.5 MB + indices 10.5 MB + offsets 0.5 MB
//!   + U × (2·512 + 2·4) B = 175 MB for the rows: ≈ 220 MB.
//! * Scratch, all sized by N (cap = 2.6M slots): clear writes 21 MB keys + 10.5 MB counts;
//!   insert writes 5.2 MB of slots (the probes hit the 21 MB table, mostly in L2); the scan
//!   reads 10.5 MB and writes 21 MB; the scatter reads 5.2 MB and writes 5.2 MB; the row pass
//!   reads 21 MB of ends, ≈ 5 MB of key sectors and 5.2 MB of bag ids; hot partials ≈ 4 MB
//!   written and read: ≈ 120 MB if none of it stays in L2. Momentum is read and written by
//!   32-byte sectors: + ≈ 10 MB over the count.
//! * Total ≈ 350 MB of HBM traffic at worst: ≈ 83 µs at 4.2 TB/s (the compulsory floor alone
//!   is ≈ 52 µs).
//! * The gradient gathers are N × 512 B = 671 MB of L2 reads; grad_output (33.5 MB) fits the
//!   H200's L2, so HBM sees it about once if the other streams do not evict it.
//!
//! # Measured (H200, `full`, results/20261201T233623Z-gpu-full-profiles/p5tuned.csv)
//! The first version ran at 1.245 ms in the suite's timing (1.52x over the reference), not the
//! ≈ 83 µs predicted above. Nsight Compute per launch: clear 9 µs, insert_count 140, scan 26,
//! scatter 182, rows 401, hot_chunks 61, hot_combine 644. Two serial chains explain most of it:
//! * hot_combine summed each hot row's partials in chunk order in one warp: the top row's
//!   ≈ 1.5K chunks were ≈ 1.5K dependent 512-byte loads on the critical path (≈ 0.4 µs each).
//!   Now the chunks add into `hot_acc` in parallel (the top row's 128 columns take ≈ 1.5K
//!   atomics each) and the combine reads one row: predicted ≈ 10 µs for both, from 705.
//! * rows walked its 78 slots per warp one at a time, each an L2 round trip for the segment
//!   bounds before any work: now 32 slots per ballot. Predicted ≈ 80 µs (the cold rows'
//!   ≈ 380K gradient reads from L2 and 170K weight rows read and written), from 401.
//!
//! * insert_count and scatter serialised on the top row's count (≈ 40K and ≈ 65K
//!   warp-aggregated atomics on one address): 140 and 182 µs. Now each block counts its
//!   lookups per slot in a shared table ([`BLOCK_TABLE`]) and makes one global atomic per
//!   distinct slot (the scatter: one per slot to take a range, positions handed out in shared
//!   memory): the top row's ≈ 1.3K and ≈ 1K atomics. Predicted ≈ 30 and ≈ 40 µs.
//!
//! Predicted for this version: ≈ 0.25 ms in all (≈ 7x over the reference's 1.83 ms).

use super::embedding_backward_rowwise_adagrad::{insert_key, EMPTY};
use crate::dev::*;

/// Lookups per warp: a row with more is split into chunks of this many (hot rows).
pub const HOT_CHUNK: i64 = 128;

#[inline(always)]
fn global_thread() -> u64 {
    block_idx_x() as u64 * block_dim_x() as u64 + thread_idx_x() as u64
}

#[inline(always)]
fn global_warp() -> u64 {
    global_thread() / WARP_SIZE as u64
}

#[inline(always)]
fn total_warps() -> u64 {
    grid_dim_x() as u64 * block_dim_x() as u64 / WARP_SIZE as u64
}

/// Columns per pass of a warp: 4 per lane.
const PASS_COLS: i64 = 4 * WARP_SIZE as i64;

/// The four columns lane `lane` owns in pass `pass` (which starts at column `pass`·128): four
/// consecutive ones when `vec4` (D % 4 == 0, 16-byte loads), else `lane + 32k`.
#[inline(always)]
fn column(pass_start: i64, lane: i64, vec4: bool, k: i64) -> i64 {
    if vec4 {
        pass_start + lane * 4 + k
    } else {
        pass_start + lane + WARP_SIZE as i64 * k
    }
}

/// This lane's four columns of row `src` (D wide) in the pass at `pass_start`; 0 past D.
#[inline(always)]
unsafe fn load4(src: *const f32, pass_start: i64, lane: i64, vec4: bool, dim: i64) -> [f32; 4] {
    if vec4 {
        let c = pass_start + lane * 4;
        if c < dim {
            load_nc_f32x4(src.add(c as usize))
        } else {
            [0.0; 4]
        }
    } else {
        let mut v = [0.0f32; 4];
        for (k, x) in v.iter_mut().enumerate() {
            let c = column(pass_start, lane, false, k as i64);
            if c < dim {
                *x = load_nc_f32(src.add(c as usize));
            }
        }
        v
    }
}

/// Σ grad_output[sorted_bag[j]] over j in `begin .. end`, this lane's columns of one pass. Every
/// lane of the warp must call it with the same arguments (shuffles).
#[inline(always)]
unsafe fn segment_sum(
    grad_output: *const f32,
    sorted_bag: *const u32,
    begin: i64,
    end: i64,
    pass_start: i64,
    vec4: bool,
    dim: i64,
) -> [f32; 4] {
    let lane = lane_id() as i64;
    let mut acc0 = [0.0f32; 4];
    let mut acc1 = [0.0f32; 4];
    let mut base = begin;
    while base < end {
        let count = (end - base).min(WARP_SIZE as i64);
        let my_bag = if lane < count {
            *sorted_bag.add((base + lane) as usize)
        } else {
            0
        };
        let mut k = 0;
        while k + 1 < count {
            let b0 = shfl_idx_u32(my_bag, k as u32) as i64;
            let b1 = shfl_idx_u32(my_bag, k as u32 + 1) as i64;
            let v0 = load4(
                grad_output.add((b0 * dim) as usize),
                pass_start,
                lane,
                vec4,
                dim,
            );
            let v1 = load4(
                grad_output.add((b1 * dim) as usize),
                pass_start,
                lane,
                vec4,
                dim,
            );
            for c in 0..4 {
                acc0[c] += v0[c];
                acc1[c] += v1[c];
            }
            k += 2;
        }
        if k < count {
            let b0 = shfl_idx_u32(my_bag, k as u32) as i64;
            let v0 = load4(
                grad_output.add((b0 * dim) as usize),
                pass_start,
                lane,
                vec4,
                dim,
            );
            for c in 0..4 {
                acc0[c] += v0[c];
            }
        }
        base += WARP_SIZE as i64;
    }
    [
        acc0[0] + acc1[0],
        acc0[1] + acc1[1],
        acc0[2] + acc1[2],
        acc0[3] + acc1[3],
    ]
}

/// Σ g² over this lane's four columns (zeros past D contribute nothing).
#[inline(always)]
fn sum_sq4(g: [f32; 4], mut acc: f32) -> f32 {
    // By reference: a by-value `for v in g` (array::IntoIter) stayed a loop over a local-memory
    // copy of g in the PTX (32-byte stack frames in the row and hot-combine kernels).
    for v in &g {
        acc = fma_f32(*v, *v, acc);
    }
    acc
}

/// The row-wise Adagrad step on `row`, the row's gradient given pass by pass by `grad(pass)`
/// (called once per pass when D ≤ 128, twice otherwise: once for Σg², once for the update).
/// Every lane of the warp calls it.
#[inline(always)]
unsafe fn apply_step(
    grad: impl Fn(i64) -> [f32; 4],
    row: i64,
    weight: *mut f32,
    momentum: *mut f32,
    lr: f32,
    eps: f32,
    dim: i64,
) {
    let lane = lane_id() as i64;
    let vec4 = dim % 4 == 0;
    // Lane 0 reads the old momentum (and alone stores the new one); the others get it by a
    // shuffle.
    let mine = if lane == 0 {
        *momentum.add(row as usize)
    } else {
        0.0
    };
    let m_old = shfl_idx_f32(mine, 0);
    let one_pass = dim <= PASS_COLS;
    let first = grad(0);
    let mut sum_sq = sum_sq4(first, 0.0);
    let mut pass = PASS_COLS;
    while pass < dim {
        sum_sq = sum_sq4(grad(pass), sum_sq);
        pass += PASS_COLS;
    }
    let sum_sq = warp_sum_f32(sum_sq);
    let m = m_old + sum_sq / dim as f32;
    let denom = sqrt_f32(m) + eps;
    let w = weight.add((row * dim) as usize);
    let mut pass = 0;
    while pass < dim {
        let g = if one_pass { first } else { grad(pass) };
        if vec4 {
            let c = pass + lane * 4;
            if c < dim {
                let old = load_f32x4(w.add(c as usize));
                let mut new = [0.0f32; 4];
                for k in 0..4 {
                    new[k] = old[k] - lr * g[k] / denom;
                }
                store_f32x4(w.add(c as usize), new);
            }
        } else {
            for (k, &gk) in g.iter().enumerate() {
                let c = column(pass, lane, false, k as i64);
                if c < dim {
                    *w.add(c as usize) -= lr * gk / denom;
                }
            }
        }
        pass += PASS_COLS;
    }
    if lane == 0 {
        *momentum.add(row as usize) = m;
    }
}

/// Rank of this lane among the set lanes of `mask`, and the lowest set lane (the leader).
#[inline(always)]
fn rank_and_leader(mask: u32) -> (u32, u32) {
    let lane = lane_id();
    let below = if lane == 0 {
        0
    } else {
        mask & (u32::MAX >> (32 - lane))
    };
    (below.count_ones(), mask.trailing_zeros())
}

kernel! {
    /// Launch: block (256, 1, 1), any grid (grid-stride; the plan uses
    /// ceil_div(2·max(N, 1), 256)). Empties the `capacity` hash slots and their counts, clears
    /// the scan's `tiles + 1` state words and the two hot-row counters (`hot[0]` rows,
    /// `hot[1]` chunks).
    pub unsafe fn adagrad_sorted_clear(
        keys: *mut u64,
        counts: *mut u32,
        capacity: i64,
        status: *mut u64,
        tiles: i64,
        hot: *mut u32,
    ) {
        let total = (capacity as u64).max(tiles as u64 + 1).max(2);
        let stride = grid_dim_x() as u64 * block_dim_x() as u64;
        let mut i = global_thread();
        while i < total {
            if i < capacity as u64 {
                *keys.add(i as usize) = EMPTY;
                *counts.add(i as usize) = 0;
            }
            if i <= tiles as u64 {
                *status.add(i as usize) = 0;
            }
            if i < 2 {
                *hot.add(i as usize) = 0;
            }
            i += stride;
        }
    }
}

/// Entries of a block's slot table in [`adagrad_sorted_insert_count`] and
/// [`adagrad_sorted_scatter`] (a power of two). A block's lookups count (and take positions)
/// per distinct slot in shared memory, and the block makes one global atomic per slot: the top
/// row costs one atomic per block, not one per warp. A slot that finds the table full takes
/// the global path alone.
pub const BLOCK_TABLE: u32 = 2048;
/// Lookups per thread of [`adagrad_sorted_insert_count`]: a block of 256 threads counts 1024.
pub const COUNT_ROUNDS: u32 = 4;
/// Bags per block of [`adagrad_sorted_scatter`] (one warp per bag, 8 warps).
pub const SCATTER_BAGS: u32 = 64;
const NO_SLOT: u32 = u32::MAX;

/// The entry of `slot` in the block's table (`keys`: [`BLOCK_TABLE`] shared u32), inserted
/// when `insert`; `None` when it is not there (inserting: when the table is full).
#[inline(always)]
unsafe fn table_entry(keys: SharedAddr, slot: u32, insert: bool) -> Option<u32> {
    let mut h = slot.wrapping_mul(0x9E37_79B1) >> (32 - BLOCK_TABLE.trailing_zeros());
    let mut probes = 0;
    while probes < BLOCK_TABLE {
        let at = keys + (h * 4) as SharedAddr;
        let seen = ld_shared_u32(at);
        if seen == slot {
            return Some(h);
        }
        if seen == NO_SLOT {
            if !insert {
                return None;
            }
            let before = atomic_cas_shared_u32(at, NO_SLOT, slot);
            if before == NO_SLOT || before == slot {
                return Some(h);
            }
        }
        h = (h + 1) & (BLOCK_TABLE - 1);
        probes += 1;
    }
    None
}

/// Fills `words` shared u32 from `at` with `value` (every thread of the block takes part).
#[inline(always)]
unsafe fn fill_shared(at: SharedAddr, words: u32, value: u32) {
    let mut i = thread_idx_x();
    while i < words {
        st_shared_u32(at + (i * 4) as SharedAddr, value);
        i += block_dim_x();
    }
}

kernel! {
    /// Launch: block (256, 1, 1), grid ceil_div(max(N, 1), 256·[`COUNT_ROUNDS`]) (each thread
    /// [`COUNT_ROUNDS`] lookups, block-strided; every lane reaches the warp-wide `match.any`).
    /// `capacity` must exceed the distinct rows. Inserts each lookup's row into the hash table
    /// (linear probing, 64-bit CAS, the reference's hash), records its slot (`lookup_slot`) and
    /// counts it in `counts[slot]`: per warp by `match.any`, per block in a shared table, then
    /// one global atomic per distinct slot of the block.
    pub unsafe fn adagrad_sorted_insert_count(
        indices: *const i64,
        num_indices: i64,
        keys: *mut u64,
        counts: *mut u32,
        capacity: i64,
        lookup_slot: *mut u32,
    ) {
        let table = shared_addr(crate::static_shared!(ADAGRAD_SORTED_COUNT_TABLE: [u32; 2 * crate::kernels::embedding_backward_rowwise_adagrad_tuned::BLOCK_TABLE as usize]));
        let (table_keys, table_counts) = (table, table + (BLOCK_TABLE * 4) as SharedAddr);
        fill_shared(table_keys, BLOCK_TABLE, NO_SLOT);
        fill_shared(table_counts, BLOCK_TABLE, 0);
        sync_threads();
        let first = block_idx_x() as u64 * (block_dim_x() * COUNT_ROUNDS) as u64;
        let mut round = 0;
        while round < COUNT_ROUNDS {
            let j = first + (round * block_dim_x() + thread_idx_x()) as u64;
            let active = j < num_indices as u64;
            let mut slot = NO_SLOT;
            if active {
                slot = insert_key(keys, *indices.add(j as usize) as u64, capacity as u64) as u32;
                *lookup_slot.add(j as usize) = slot;
            }
            let mask = match_any_u32(slot);
            let (_, leader) = rank_and_leader(mask);
            if active && lane_id() == leader {
                match table_entry(table_keys, slot, true) {
                    Some(h) => red_add_shared_u32(table_counts + (h * 4) as SharedAddr, mask.count_ones()),
                    None => {
                        atomic_add_u32(counts.add(slot as usize), mask.count_ones());
                    }
                }
            }
            round += 1;
        }
        sync_threads();
        let mut h = thread_idx_x();
        while h < BLOCK_TABLE {
            let slot = ld_shared_u32(table_keys + (h * 4) as SharedAddr);
            if slot != NO_SLOT {
                atomic_add_u32(counts.add(slot as usize), ld_shared_u32(table_counts + (h * 4) as SharedAddr));
            }
            h += block_dim_x();
        }
    }
}

/// Calls `f(bag, j, active, slot, mask, rank, leader)` for every 32-lookup step of the bags of
/// this warp in [`adagrad_sorted_scatter`]'s block (bag `first + warp + 8k`): lookup `j` of
/// `bag`, its slot, the lanes of the warp with the same slot (`mask`), this lane's rank among
/// them and their leader. Every lane calls `f` at every step (it may shuffle).
#[inline(always)]
unsafe fn scatter_steps(
    offsets: *const i64,
    num_bags: i64,
    lookup_slot: *const u32,
    mut f: impl FnMut(u64, i64, bool, u32, u32, u32, u32),
) {
    let warps = block_dim_x() / WARP_SIZE;
    let first = block_idx_x() as u64 * SCATTER_BAGS as u64;
    let last = (first + SCATTER_BAGS as u64).min(num_bags as u64);
    let mut bag = first + (thread_idx_x() / WARP_SIZE) as u64;
    while bag < last {
        let begin = *offsets.add(bag as usize);
        let end = *offsets.add(bag as usize + 1);
        let mut base = begin;
        while base < end {
            let j = base + lane_id() as i64;
            let active = j < end;
            let slot = if active {
                *lookup_slot.add(j as usize)
            } else {
                NO_SLOT
            };
            let mask = match_any_u32(slot);
            let (rank, leader) = rank_and_leader(mask);
            f(bag, j, active, slot, mask, rank, leader);
            base += WARP_SIZE as i64;
        }
        bag += warps as u64;
    }
}

kernel! {
    /// Launch: block (256, 1, 1), grid ceil_div(max(B, 1), [`SCATTER_BAGS`]) (one warp per bag).
    /// After the scan of `counts` into `ends`: writes each lookup's bag at a free position of
    /// its slot's segment of `sorted_bag`, counting `counts` back down to 0. The block counts
    /// its lookups per slot in shared memory, takes one range per slot with one global atomic,
    /// then hands out positions in it.
    pub unsafe fn adagrad_sorted_scatter(
        offsets: *const i64,
        num_bags: i64,
        lookup_slot: *const u32,
        counts: *mut u32,
        ends: *const i64,
        sorted_bag: *mut u32,
    ) {
        let table = shared_addr(crate::static_shared!(ADAGRAD_SORTED_SCATTER_TABLE: [u32; 3 * crate::kernels::embedding_backward_rowwise_adagrad_tuned::BLOCK_TABLE as usize]));
        let (table_keys, table_counts, table_base) =
            (table, table + (BLOCK_TABLE * 4) as SharedAddr, table + (BLOCK_TABLE * 8) as SharedAddr);
        fill_shared(table_keys, BLOCK_TABLE, NO_SLOT);
        fill_shared(table_counts, BLOCK_TABLE, 0);
        sync_threads();
        // 1. The block's lookups per slot.
        scatter_steps(offsets, num_bags, lookup_slot, |_, _, active, slot, mask, _, leader| {
            if active && lane_id() == leader {
                if let Some(h) = table_entry(table_keys, slot, true) {
                    red_add_shared_u32(table_counts + (h * 4) as SharedAddr, mask.count_ones());
                }
            }
        });
        sync_threads();
        // 2. One range per slot: the block owns ends[slot] − old .. ends[slot] − old + count.
        let mut h = thread_idx_x();
        while h < BLOCK_TABLE {
            let slot = ld_shared_u32(table_keys + (h * 4) as SharedAddr);
            if slot != NO_SLOT {
                let count = ld_shared_u32(table_counts + (h * 4) as SharedAddr);
                let old = atomic_add_u32(counts.add(slot as usize), count.wrapping_neg());
                st_shared_u32(table_base + (h * 4) as SharedAddr, old);
                st_shared_u32(table_counts + (h * 4) as SharedAddr, 0);
            }
            h += block_dim_x();
        }
        sync_threads();
        // 3. Positions: each warp's group takes the next part of its block's range (slots not
        // in the table take theirs from the global count directly).
        scatter_steps(offsets, num_bags, lookup_slot, |bag, j, active, slot, mask, rank, leader| {
            let (mut old, mut local) = (0u32, 0u32);
            if active && lane_id() == leader {
                match table_entry(table_keys, slot, false) {
                    Some(h) => {
                        local = atomic_add_shared_u32(table_counts + (h * 4) as SharedAddr, mask.count_ones());
                        old = ld_shared_u32(table_base + (h * 4) as SharedAddr);
                    }
                    None => {
                        old = atomic_add_u32(counts.add(slot as usize), mask.count_ones().wrapping_neg());
                    }
                }
            }
            let old = shfl_idx_u32(old, leader);
            let local = shfl_idx_u32(local, leader);
            if active {
                let _ = j;
                let pos = *ends.add(slot as usize) - old as i64 + local as i64 + rank as i64;
                *sorted_bag.add(pos as usize) = bag as u32;
            }
        });
    }
}

/// Start and end of slot `slot`'s segment of the sorted lookups.
#[inline(always)]
unsafe fn segment(ends: *const i64, slot: u64) -> (i64, i64) {
    let start = if slot == 0 {
        0
    } else {
        *ends.add(slot as usize - 1)
    };
    (start, *ends.add(slot as usize))
}

kernel! {
    /// Launch: block (256, 1, 1), any grid (grid-stride, one warp per tile of 32 hash slots;
    /// the plan uses min(ceil_div(2·max(N, 1), 256), 4224)). Each lane reads one slot's
    /// segment, a ballot finds the non-empty ones, and the warp updates them one after another:
    /// every row of at most [`HOT_CHUNK`] lookups here; the others are enqueued (`hot`,
    /// `hot_slot`, `hot_base`, `chunk_hot`) with their row of `hot_acc` zeroed.
    pub unsafe fn adagrad_sorted_rows(
        grad_output: *const f32,
        keys: *const u64,
        ends: *const i64,
        sorted_bag: *const u32,
        capacity: i64,
        weight: *mut f32,
        momentum: *mut f32,
        lr: f32,
        eps: f32,
        dim: i64,
        hot: *mut u32,
        hot_slot: *mut u32,
        hot_base: *mut u32,
        chunk_hot: *mut u32,
        hot_acc: *mut f32,
    ) {
        let lane = lane_id() as i64;
        let vec4 = dim % 4 == 0;
        let tile_slots = WARP_SIZE as u64;
        let mut tile = global_warp() * tile_slots;
        while tile < capacity as u64 {
            let slot = tile + lane as u64;
            let (begin, end) = if slot < capacity as u64 { segment(ends, slot) } else { (0, 0) };
            let len = end - begin;
            let mut cold = ballot(len > 0 && len <= HOT_CHUNK);
            while cold != 0 {
                let src = cold.trailing_zeros();
                cold &= cold - 1;
                let (b, e) = (shfl_idx_i64(begin, src), shfl_idx_i64(end, src));
                let row = *keys.add((tile + src as u64) as usize) as i64;
                let grad = |pass| segment_sum(grad_output, sorted_bag, b, e, pass, vec4, dim);
                apply_step(grad, row, weight, momentum, lr, eps, dim);
            }
            let mut hot_lanes = ballot(len > HOT_CHUNK);
            while hot_lanes != 0 {
                let src = hot_lanes.trailing_zeros();
                hot_lanes &= hot_lanes - 1;
                let len = shfl_idx_i64(len, src);
                let chunks = ((len + HOT_CHUNK - 1) / HOT_CHUNK) as u32;
                let (mut h, mut cb) = (0u32, 0u32);
                if lane == 0 {
                    h = atomic_add_u32(hot, 1);
                    cb = atomic_add_u32(hot.add(1), chunks);
                    *hot_slot.add(h as usize) = (tile + src as u64) as u32;
                    *hot_base.add(h as usize) = cb;
                }
                let h = shfl_idx_u32(h, 0);
                let cb = shfl_idx_u32(cb, 0);
                let mut q = lane as u32;
                while q < chunks {
                    *chunk_hot.add((cb + q) as usize) = h;
                    q += WARP_SIZE;
                }
                let acc = hot_acc.add(h as usize * dim as usize);
                let mut col = lane;
                while col < dim {
                    *acc.add(col as usize) = 0.0;
                    col += WARP_SIZE as i64;
                }
            }
            tile += total_warps() * tile_slots;
        }
    }
}

kernel! {
    /// Launch: block (256, 1, 1), any grid (grid-stride, one warp per chunk; the plan uses
    /// ceil_div(ceil_div(max(N, 1), 64), 8)). Adds chunk c's partial gradient into its hot
    /// row's `hot_acc` row (fp32 atomics: the chunks of one row run in parallel, in no fixed
    /// order).
    pub unsafe fn adagrad_sorted_hot_chunks(
        grad_output: *const f32,
        ends: *const i64,
        sorted_bag: *const u32,
        hot: *const u32,
        hot_slot: *const u32,
        hot_base: *const u32,
        chunk_hot: *const u32,
        hot_acc: *mut f32,
        dim: i64,
    ) {
        let lane = lane_id() as i64;
        let vec4 = dim % 4 == 0;
        let chunks = *hot.add(1) as u64;
        let mut c = global_warp();
        while c < chunks {
            let h = *chunk_hot.add(c as usize) as usize;
            let slot = *hot_slot.add(h) as u64;
            let q = c as i64 - *hot_base.add(h) as i64;
            let (row_begin, row_end) = segment(ends, slot);
            let begin = row_begin + q * HOT_CHUNK;
            let end = (begin + HOT_CHUNK).min(row_end);
            let acc = hot_acc.add(h * dim as usize);
            let mut pass = 0;
            while pass < dim {
                let g = segment_sum(grad_output, sorted_bag, begin, end, pass, vec4, dim);
                for (k, &gk) in g.iter().enumerate() {
                    let col = column(pass, lane, vec4, k as i64);
                    if col < dim {
                        atomic_add_f32(acc.add(col as usize), gk);
                    }
                }
                pass += PASS_COLS;
            }
            c += total_warps();
        }
    }
}

kernel! {
    /// Launch: block (256, 1, 1), any grid (grid-stride, one warp per hot row; the plan uses
    /// ceil_div(ceil_div(max(N, 1), 128), 8)). Applies the step to each hot row with the
    /// gradient its chunks added up in `hot_acc`.
    pub unsafe fn adagrad_sorted_hot_combine(
        keys: *const u64,
        hot: *const u32,
        hot_slot: *const u32,
        hot_acc: *const f32,
        weight: *mut f32,
        momentum: *mut f32,
        lr: f32,
        eps: f32,
        dim: i64,
    ) {
        let lane = lane_id() as i64;
        let vec4 = dim % 4 == 0;
        let rows = *hot as u64;
        let mut h = global_warp();
        while h < rows {
            let slot = *hot_slot.add(h as usize) as u64;
            let row = *keys.add(slot as usize) as i64;
            let acc = hot_acc.add((h as i64 * dim) as usize);
            let grad = |pass| load4(acc, pass, lane, vec4, dim);
            apply_step(grad, row, weight, momentum, lr, eps, dim);
            h += total_warps();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emu::EmuLaunch;
    use crate::kernels::scan::{inclusive_sum_i32_to_i64, SCAN_THREADS, SCAN_TILE};
    use std::collections::BTreeMap;

    fn cfg(grid: usize) -> EmuLaunch {
        EmuLaunch::new(grid.max(1) as u32, 256)
    }

    /// Scratch of the plan, sized as the manifest sizes it; poisoned with `poison` bytes.
    struct Scratch {
        keys: Vec<u64>,
        counts: Vec<u32>,
        ends: Vec<i64>,
        status: Vec<u64>,
        lookup_slot: Vec<u32>,
        sorted_bag: Vec<u32>,
        hot: Vec<u32>,
        hot_slot: Vec<u32>,
        hot_base: Vec<u32>,
        chunk_hot: Vec<u32>,
        hot_acc: Vec<f32>,
    }

    impl Scratch {
        fn new(n: usize, d: usize, poison: u8) -> Scratch {
            let n1 = n.max(1);
            let cap = 2 * n1;
            let tiles = cap.div_ceil(SCAN_TILE).max(1);
            let p32 = u32::from_ne_bytes([poison; 4]);
            let p64 = u64::from_ne_bytes([poison; 8]);
            Scratch {
                keys: vec![p64; cap],
                counts: vec![p32; cap],
                ends: vec![p64 as i64; cap],
                status: vec![p64; tiles + 1],
                lookup_slot: vec![p32; n1],
                sorted_bag: vec![p32; n1],
                hot: vec![p32; 2],
                hot_slot: vec![p32; n1.div_ceil(128)],
                hot_base: vec![p32; n1.div_ceil(128)],
                chunk_hot: vec![p32; n1.div_ceil(64)],
                hot_acc: vec![f32::from_bits(p32); n1.div_ceil(128) * d],
            }
        }
    }

    /// Runs the whole plan (the manifest's launches and grids) on the emulator.
    #[allow(clippy::too_many_arguments)]
    fn run_plan(
        s: &mut Scratch,
        grad: &[f32],
        indices: &[i64],
        offsets: &[i64],
        weight: &mut [f32],
        momentum: &mut [f32],
        d: usize,
        lr: f32,
        eps: f32,
    ) {
        let n = indices.len();
        let b = offsets.len() - 1;
        let n1 = n.max(1);
        let cap = 2 * n1;
        let tiles = cap.div_ceil(SCAN_TILE).max(1);
        let p = |v: &mut Vec<u32>| v.as_mut_ptr() as u64;
        let (keys, counts, ends, status) = (
            s.keys.as_mut_ptr() as u64,
            p(&mut s.counts),
            s.ends.as_mut_ptr() as u64,
            s.status.as_mut_ptr() as u64,
        );
        let (lookup_slot, sorted_bag, hot) =
            (p(&mut s.lookup_slot), p(&mut s.sorted_bag), p(&mut s.hot));
        let (hot_slot, hot_base, chunk_hot) =
            (p(&mut s.hot_slot), p(&mut s.hot_base), p(&mut s.chunk_hot));
        let hot_acc = s.hot_acc.as_mut_ptr() as u64;
        let (g, w, m) = (
            grad.as_ptr() as u64,
            weight.as_mut_ptr() as u64,
            momentum.as_mut_ptr() as u64,
        );
        let (lr, eps) = (lr.to_bits() as u64, eps.to_bits() as u64);
        let (cap_w, d_w) = (cap as u64, d as u64);
        unsafe {
            cfg(cap.div_ceil(256))
                .arg(keys)
                .arg(counts)
                .arg(cap_w)
                .arg(status)
                .arg(tiles)
                .arg(hot)
                .run(&adagrad_sorted_clear::EMU);
            cfg(n1.div_ceil(256 * COUNT_ROUNDS as usize))
                .ptr(indices)
                .arg(n)
                .arg(keys)
                .arg(counts)
                .arg(cap_w)
                .arg(lookup_slot)
                .run(&adagrad_sorted_insert_count::EMU);
            EmuLaunch::new(tiles as u32, SCAN_THREADS)
                .arg(counts)
                .arg(ends)
                .arg(cap_w)
                .arg(status)
                .resident(4)
                .run(&inclusive_sum_i32_to_i64::EMU);
            cfg(b.max(1).div_ceil(SCATTER_BAGS as usize))
                .ptr(offsets)
                .arg(b)
                .arg(lookup_slot)
                .arg(counts)
                .arg(ends)
                .arg(sorted_bag)
                .run(&adagrad_sorted_scatter::EMU);
            cfg(cap.div_ceil(256).min(4224))
                .arg(g)
                .arg(keys)
                .arg(ends)
                .arg(sorted_bag)
                .arg(cap_w)
                .arg(w)
                .arg(m)
                .arg(lr)
                .arg(eps)
                .arg(d_w)
                .arg(hot)
                .arg(hot_slot)
                .arg(hot_base)
                .arg(chunk_hot)
                .arg(hot_acc)
                .run(&adagrad_sorted_rows::EMU);
            cfg(n1.div_ceil(64).div_ceil(8))
                .arg(g)
                .arg(ends)
                .arg(sorted_bag)
                .arg(hot)
                .arg(hot_slot)
                .arg(hot_base)
                .arg(chunk_hot)
                .arg(hot_acc)
                .arg(d_w)
                .run(&adagrad_sorted_hot_chunks::EMU);
            cfg(n1.div_ceil(128).div_ceil(8))
                .arg(keys)
                .arg(hot)
                .arg(hot_slot)
                .arg(hot_acc)
                .arg(w)
                .arg(m)
                .arg(lr)
                .arg(eps)
                .arg(d_w)
                .run(&adagrad_sorted_hot_combine::EMU);
        }
    }

    /// A small deterministic generator (xorshift), so the tests need no crate.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn unit(&mut self) -> f32 {
            (self.next() >> 40) as f32 / (1u64 << 24) as f32
        }
    }

    struct Case {
        e: usize,
        d: usize,
        grad: Vec<f32>,
        indices: Vec<i64>,
        offsets: Vec<i64>,
        weight: Vec<f32>,
        momentum: Vec<f32>,
    }

    /// Bags of the given lengths; each lookup is `hot` with probability `p_hot`, else uniform
    /// over rows `0 .. e/2` (so rows `e/2 ..` are never looked up unless `extra` names them).
    fn case(e: usize, d: usize, lens: &[usize], hot: i64, p_hot: f32, seed: u64) -> Case {
        let mut rng = Rng(seed | 1);
        let mut offsets = vec![0i64];
        let mut indices = Vec::new();
        for &len in lens {
            for _ in 0..len {
                let r = if rng.unit() < p_hot {
                    hot
                } else {
                    (rng.next() % (e as u64 / 2)) as i64
                };
                indices.push(r);
            }
            offsets.push(indices.len() as i64);
        }
        let b = lens.len();
        Case {
            e,
            d,
            grad: (0..b * d).map(|_| rng.unit() * 2.0 - 1.0).collect(),
            indices,
            offsets,
            weight: (0..e * d).map(|_| rng.unit() * 2.0 - 1.0).collect(),
            momentum: (0..e).map(|_| rng.unit()).collect(),
        }
    }

    const LR: f32 = 0.01;
    const EPS: f32 = 1e-8;

    /// Runs the plan on `c` (scratch poisoned with `poison`, `runs` times in a row on fresh
    /// copies of the table, reusing the scratch) and checks it against an f64 step: every
    /// looked-up row's update within 1e-5 relative L2 (and 1e-4 of the largest), momentum
    /// likewise, every other row bit-identical. Returns the looked-up rows' lookup counts.
    fn check_case(c: &Case, poison: u8, runs: usize) -> BTreeMap<i64, usize> {
        check_case_with(c, poison, runs, &|_, _| {})
    }

    /// As [`check_case`], with `tamper` applied to the plan's weight and momentum before the
    /// comparison (to show that it fails).
    fn check_case_with(
        c: &Case,
        poison: u8,
        runs: usize,
        tamper: &dyn Fn(&mut [f32], &mut [f32]),
    ) -> BTreeMap<i64, usize> {
        let d = c.d;
        // The f64 step.
        let mut g: BTreeMap<i64, (usize, Vec<f64>)> = BTreeMap::new();
        for bag in 0..c.offsets.len() - 1 {
            for j in c.offsets[bag]..c.offsets[bag + 1] {
                let e = g.entry(c.indices[j as usize]).or_insert((0, vec![0.0; d]));
                e.0 += 1;
                for (acc, &x) in e.1.iter_mut().zip(&c.grad[bag * d..(bag + 1) * d]) {
                    *acc += x as f64;
                }
            }
        }
        let mut scratch = Scratch::new(c.indices.len(), d, poison);
        for _ in 0..runs {
            let (mut w, mut m) = (c.weight.clone(), c.momentum.clone());
            run_plan(
                &mut scratch,
                &c.grad,
                &c.indices,
                &c.offsets,
                &mut w,
                &mut m,
                d,
                LR,
                EPS,
            );
            tamper(&mut w, &mut m);
            let (mut err2, mut ref2, mut max_err, mut max_ref) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
            for r in 0..c.e {
                let (w0, w1) = (&c.weight[r * d..(r + 1) * d], &w[r * d..(r + 1) * d]);
                let Some((_, gr)) = g.get(&(r as i64)) else {
                    assert!(
                        w0.iter().zip(w1).all(|(a, b)| a.to_bits() == b.to_bits()),
                        "row {r} is not looked up and must stay bit-identical"
                    );
                    assert_eq!(c.momentum[r].to_bits(), m[r].to_bits(), "momentum {r}");
                    continue;
                };
                let dm = gr.iter().map(|x| x * x).sum::<f64>() / d as f64;
                let m_new = c.momentum[r] as f64 + dm;
                let got_dm = m[r] as f64 - c.momentum[r] as f64;
                assert!(
                    (got_dm - dm).abs() <= 1e-5 * dm.max(1e-3),
                    "momentum of row {r}: {got_dm} vs {dm}"
                );
                let denom = m_new.sqrt() + EPS as f64;
                for col in 0..d {
                    let want = -(LR as f64) * gr[col] / denom;
                    let got = w1[col] as f64 - w0[col] as f64;
                    err2 += (got - want).powi(2);
                    ref2 += want * want;
                    max_err = max_err.max((got - want).abs());
                    max_ref = max_ref.max(want.abs());
                }
            }
            if ref2 > 0.0 {
                let rel = (err2 / ref2).sqrt();
                assert!(rel <= 1e-5, "update relative L2 {rel}");
                assert!(
                    max_err <= 1e-4 * max_ref,
                    "largest error {max_err} of {max_ref}"
                );
            }
        }
        g.into_iter().map(|(r, (k, _))| (r, k)).collect()
    }

    #[test]
    fn a_very_hot_row_single_lookups_and_empty_bags_match_an_f64_step() {
        // 120 bags of 0..40 lookups (every 7th bag empty), one row taking 35% of the lookups:
        // several chunks of HOT_CHUNK, one ending part-way; D = 40 (one pass, 16-byte loads).
        let lens: Vec<usize> = (0..120)
            .map(|b| if b % 7 == 0 { 0 } else { (b * 13) % 41 })
            .collect();
        let c = case(600, 40, &lens, 417, 0.35, 7);
        let counts = check_case(&c, 0xFF, 2);
        let hot = counts[&417];
        assert!(
            hot > 3 * HOT_CHUNK as usize && !hot.is_multiple_of(HOT_CHUNK as usize),
            "{hot}"
        );
        assert!(counts.values().any(|&k| k == 1), "a row looked up once");
        assert!(counts.values().any(|&k| k > 1 && k <= HOT_CHUNK as usize));
    }

    #[test]
    fn a_row_of_exactly_one_chunk_and_one_past_stay_exact() {
        // Row 3 gets exactly HOT_CHUNK lookups (the warp path), row 5 HOT_CHUNK + 1 (two
        // chunks, the second of one lookup); rows 300.. never looked up. A NaN-ish poison.
        let mut indices = vec![3i64; HOT_CHUNK as usize];
        indices.extend(vec![5i64; HOT_CHUNK as usize + 1]);
        indices.extend([9, 11, 9]);
        let d = 40;
        let offsets = vec![0, 0, 100, 128, 200, 257, 257, indices.len() as i64];
        let mut c = case(600, d, &[0; 7], 0, 0.0, 11);
        c.grad = (0..7 * d)
            .map(|i| ((i * 37) % 101) as f32 / 50.0 - 1.0)
            .collect();
        c.indices = indices;
        c.offsets = offsets;
        let counts = check_case(&c, 0x7F, 1);
        assert_eq!(counts[&3], HOT_CHUNK as usize);
        assert_eq!(counts[&5], HOT_CHUNK as usize + 1);
    }

    #[test]
    fn wide_and_odd_rows_take_several_passes() {
        // D = 130 (not a multiple of 4: the scalar path, two passes) and D = 256 (16-byte loads,
        // two passes), both with a hot row.
        for d in [130, 256] {
            let lens: Vec<usize> = (0..40).map(|b| (b * 7) % 23).collect();
            let c = case(256, d, &lens, 1, 0.5, d as u64);
            let counts = check_case(&c, 0xA5, 1);
            assert!(counts[&1] > HOT_CHUNK as usize);
        }
    }

    #[test]
    fn one_long_bag_and_no_lookups_at_all() {
        // One bag of 700 lookups, as the edge set; then a batch of empty bags (N = 0) leaves
        // the table untouched.
        let c = case(512, 40, &[700], 200, 0.3, 5);
        check_case(&c, 0xFF, 1);
        let c = case(64, 40, &[0, 0, 0], 0, 0.0, 9);
        let counts = check_case(&c, 0xFF, 1);
        assert!(counts.is_empty());
    }

    #[test]
    fn a_block_with_more_distinct_rows_than_its_table_takes_the_global_path() {
        // One block of bags (fewer than SCATTER_BAGS) holding ≈ 2.8K distinct rows: more than
        // BLOCK_TABLE, so the scatter's shared table fills and the rest take global positions;
        // a hot row among them. D = 8.
        let lens = [1500usize, 1700, 3];
        let c = case(40_000, 8, &lens, 11, 0.2, 21);
        let counts = check_case(&c, 0xFF, 1);
        assert!(
            counts.len() > BLOCK_TABLE as usize,
            "{} distinct rows",
            counts.len()
        );
        assert!(counts[&11] > HOT_CHUNK as usize);
    }

    #[test]
    fn the_check_rejects_a_wrong_or_stray_update() {
        // The comparison must be able to fail: a hot row's update 0.1% off, a row nobody looked
        // up changed by one ulp, and a dropped momentum update are all caught.
        let lens: Vec<usize> = (0..30).map(|b| (b * 5) % 31).collect();
        let c = case(300, 40, &lens, 7, 0.6, 3);
        let d = c.d;
        let (w0, m0) = (c.weight.clone(), c.momentum.clone());
        let off_by = move |w: &mut [f32], _: &mut [f32]| {
            for col in 0..d {
                let i = 7 * d + col;
                w[i] = w0[i] + (w[i] - w0[i]) * 1.001;
            }
        };
        let stray = |w: &mut [f32], _: &mut [f32]| {
            let i = 299 * 40 + 3; // rows 150.. are never looked up
            w[i] = f32::from_bits(w[i].to_bits() ^ 1);
        };
        let stale = move |_: &mut [f32], m: &mut [f32]| m[7] = m0[7];
        for tamper in [
            Box::new(off_by) as Box<dyn Fn(&mut [f32], &mut [f32])>,
            Box::new(stray),
            Box::new(stale),
        ] {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                check_case_with(&c, 0xFF, 1, &*tamper)
            }));
            assert!(r.is_err(), "the tampered step must fail the check");
        }
        check_case_with(&c, 0xFF, 1, &|_, _| {});
    }
}
