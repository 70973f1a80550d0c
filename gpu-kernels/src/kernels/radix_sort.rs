//! Stable LSD radix sort of (key, value) pairs of 64-bit words, built the way CUB's
//! `DeviceRadixSort::SortPairs` is on sm_80+ ("onesweep", which PyTorch's `torch.sort`,
//! `torch.argsort(stable=True)` and `torch.unique` call through `at::cuda::cub::radix_sort_pairs`
//! with the full key width): 8-bit digits, so 8 passes for 64-bit keys.
//!
//! 1. [`radix_sort_init`] clears the digit counts and the per-pass tile counters.
//! 2. [`radix_sort_histogram`] reads the keys once and counts the digits of every pass (the
//!    counts of a digit do not depend on the order, so one read serves all passes), into
//!    [`HIST_PARTS`] shared copies per block, and clears the look-back words. Its blocks loop
//!    over tiles (at most [`HIST_MAX_BLOCKS`] of them).
//! 3. [`radix_sort_bin_offsets`] turns each pass's 256 counts into exclusive offsets.
//! 4. One [`radix_sort_onesweep`] per pass: each block takes the next tile from an atomic
//!    counter, counts its digits and publishes the counts at once (CUB's "early counts"),
//!    ranks its keys by digit stably (per-warp counters, eight ballots to find the lanes
//!    holding the same digit), looks back over the tiles before it for their counts
//!    (decoupled look-back, one thread per digit), reorders the tile in shared memory and
//!    writes keys, then values, to their global positions. Equal digits keep their order, so
//!    the sort is stable.
//!
//! Keys are u64 words; `signed_keys = 1` sorts them as i64 (the sign bit flipped for the digit,
//! as CUB's key twiddling does). Values are any 64-bit words (positions here). Passes ping-pong
//! between two buffers: with 8 passes, pass 0 reads the input and writes the alternate buffer,
//! and pass 7 writes the output. Up to 2^30 elements (look-back counts are 30-bit).
//!
//! Scratch for `n` elements (`tiles = max(ceil_div(n, SORT_TILE), 1)`, `passes = 8`):
//! `bins` passes·256 u32, `tile_counters` passes u32, `lookback` passes·tiles·256 u32, and the
//! alternate key and value buffers of n u64 each.
use crate::dev::*;
use core::ptr::{read_volatile, write_volatile};

/// Repeats `$body` with `$i` bound to each of the literals: a fully unrolled loop, so that the
/// per-thread item arrays stay in registers (a runtime index would put them in local memory).
macro_rules! unrolled {
    ($i:ident in [$($n:literal),*] $body:block) => {
        $( { let $i: usize = $n; $body } )*
    };
}

/// Runs `$body` for each item index `0..SORT_ITEMS` (unrolled).
macro_rules! for_each_item {
    ($i:ident $body:block) => {
        unrolled!($i in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11] $body)
    };
}

/// Bits per digit.
pub const RADIX_BITS: u32 = 8;
/// Digits per pass.
pub const RADIX: usize = 1 << RADIX_BITS;
/// Threads per sorting block.
pub const SORT_THREADS: u32 = 256;
/// Keys per thread.
pub const SORT_ITEMS: usize = 12;
const _: () = assert!(SORT_ITEMS == 12, "for_each_item! unrolls 12 items");
/// Keys per tile (one block).
pub const SORT_TILE: usize = SORT_THREADS as usize * SORT_ITEMS;
pub(crate) const WARPS: usize = (SORT_THREADS / WARP_SIZE) as usize;
/// Keys per warp segment of a tile.
const WARP_KEYS: usize = WARP_SIZE as usize * SORT_ITEMS;

const LB_AGGREGATE: u32 = 1 << 30;
const LB_PREFIX: u32 = 2 << 30;
const LB_VALUE: u32 = (1 << 30) - 1;

#[inline(always)]
fn digit(key: u64, flip: u64, shift: u32) -> u32 {
    (((key ^ flip) >> shift) & (RADIX as u64 - 1)) as u32
}

#[inline(always)]
fn flip_mask(signed_keys: u32) -> u64 {
    (signed_keys as u64 & 1) << 63
}

/// Shared-memory address of element `i` of an array of `T` at `base`.
#[inline(always)]
fn sh<T>(base: SharedAddr, i: usize) -> SharedAddr {
    base + (i * core::mem::size_of::<T>()) as SharedAddr
}

/// Inclusive sum over the 256 threads of a block of one u32 each (block of exactly
/// `SORT_THREADS`); `partials` is 8 words of shared memory. Ends with a barrier.
#[inline(always)]
unsafe fn block_inclusive_sum_u32(v: u32, partials: SharedAddr) -> u32 {
    let lane = lane_id();
    let warp = warp_id() as usize;
    let mut inc = v;
    let mut off = 1;
    while off < WARP_SIZE {
        let src = if lane >= off { lane - off } else { lane };
        let other = shfl_idx_u32(inc, src);
        if lane >= off {
            inc += other;
        }
        off *= 2;
    }
    if lane == WARP_SIZE - 1 {
        st_shared_u32(sh::<u32>(partials, warp), inc);
    }
    sync_threads();
    for w in 0..warp {
        inc += ld_shared_u32(sh::<u32>(partials, w));
    }
    sync_threads();
    inc
}

/// The lanes of this warp holding digit `d` (8 bits), among those where `valid` holds: one
/// ballot per bit, as CUB's `MatchAny` does (`match.any.sync` is several times slower).
#[inline(always)]
fn match_digit(d: u32, valid: bool) -> u32 {
    let mut peers = ballot(valid);
    for b in 0..RADIX_BITS {
        let bit = (d >> b) & 1 != 0;
        let same = ballot(bit);
        peers &= if bit { same } else { !same };
    }
    peers
}

/// Count of digit `d` in the tiles before `tile`: walks back over their look-back words
/// (`states[t·256 + d]`), adding aggregates, until a tile with its inclusive count published
/// (spinning on a tile that has published nothing yet).
#[inline(always)]
unsafe fn look_back_digit(states: *const u32, tile: usize, d: usize) -> u32 {
    let mut before = 0u32;
    let mut p = tile;
    while p > 0 {
        p -= 1;
        let word = loop {
            let w = read_volatile(states.add(p * RADIX + d));
            if w >> 30 != 0 {
                break w;
            }
            spin_pause();
        };
        before += word & LB_VALUE;
        if word & LB_PREFIX != 0 {
            break;
        }
    }
    before
}

kernel! {
    /// Clears `bins` (passes·256 u32) and `tile_counters` (passes u32). Launch: grid 1,
    /// block 256.
    pub unsafe fn radix_sort_init(bins: *mut u32, tile_counters: *mut u32, passes: u32) {
        let t = thread_idx_x() as usize;
        for p in 0..passes as usize {
            *bins.add(p * RADIX + t) = 0;
        }
        if t < passes as usize {
            *tile_counters.add(t) = 0;
        }
    }
}

/// Copies of the histogram's shared counters: lane `l` counts into copy `l % HIST_PARTS`, so
/// that a warp whose keys share a digit (hot ids; every key of a narrow key range in the high
/// passes) queues on HIST_PARTS counters, not one.
pub const HIST_PARTS: usize = 4;
/// Most blocks of [`radix_sort_histogram`] (each loops over tiles): CUB's count on an H200
/// (7 per SM of 132; with 48 registers and 33 KB of shared memory 5 fit at once, so it is not a
/// single wave). Measured 59 µs for 10M keys against 61 with 1056 blocks. Fewer blocks, fewer
/// global atomics on the 256 · passes bins.
pub const HIST_MAX_BLOCKS: usize = 924;

kernel! {
    /// Digit counts of every pass over all `n` keys, added into `bins[pass·256 + digit]`, and
    /// the look-back words of every tile and pass cleared. Block `b` takes tiles
    /// `b, b + gridDim.x, …`. Launch: grid `min(max(ceil_div(n, SORT_TILE), 1), HIST_MAX_BLOCKS)`,
    /// block `SORT_THREADS`.
    pub unsafe fn radix_sort_histogram(
        keys: *const u64,
        n: i64,
        signed_keys: u32,
        passes: u32,
        bins: *mut u32,
        lookback: *mut u32,
    ) {
        let counts = shared_addr(crate::static_shared!(RS_HIST_COUNTS: [u32; 8 * crate::kernels::radix_sort::HIST_PARTS * crate::kernels::radix_sort::RADIX]));
        let t = thread_idx_x() as usize;
        let part = lane_id() as usize % HIST_PARTS;
        let n = n as usize;
        let tiles = n.div_ceil(SORT_TILE).max(1);
        let passes = passes as usize;
        for c in 0..passes * HIST_PARTS {
            st_shared_u32(sh::<u32>(counts, c * RADIX + t), 0);
        }
        let mut tile = block_idx_x() as usize;
        while tile < tiles {
            for p in 0..passes {
                *lookback.add((p * tiles + tile) * RADIX + t) = 0;
            }
            tile += grid_dim_x() as usize;
        }
        sync_threads();
        let flip = flip_mask(signed_keys);
        let mut tile = block_idx_x() as usize;
        while tile < tiles {
            let base = tile * SORT_TILE;
            let mut held = [0u64; SORT_ITEMS];
            for_each_item!(k {
                let i = base + k * SORT_THREADS as usize + t;
                if i < n {
                    held[k] = *keys.add(i);
                }
            });
            for_each_item!(k {
                let i = base + k * SORT_THREADS as usize + t;
                if i < n {
                    for p in 0..passes {
                        let d = digit(held[k], flip, p as u32 * RADIX_BITS) as usize;
                        red_add_shared_u32(sh::<u32>(counts, (p * HIST_PARTS + part) * RADIX + d), 1);
                    }
                }
            });
            tile += grid_dim_x() as usize;
        }
        sync_threads();
        for p in 0..passes {
            let mut c = 0;
            for q in 0..HIST_PARTS {
                c += ld_shared_u32(sh::<u32>(counts, (p * HIST_PARTS + q) * RADIX + t));
            }
            if c != 0 {
                atomic_add_u32(bins.add(p * RADIX + t), c);
            }
        }
    }
}

kernel! {
    /// Turns the counts of pass `blockIdx.x` into exclusive offsets, in place. Launch: grid
    /// `passes`, block `SORT_THREADS`.
    pub unsafe fn radix_sort_bin_offsets(bins: *mut u32) {
        let partials = shared_addr(crate::static_shared!(RS_OFFSETS_PARTIALS: [u32; 8]));
        let t = thread_idx_x() as usize;
        let slot = bins.add(block_idx_x() as usize * RADIX + t);
        let count = *slot;
        let inclusive = block_inclusive_sum_u32(count, partials);
        *slot = inclusive - count;
    }
}

// 3 blocks of 256 threads per SM (ptxas keeps it to 80 registers; at 106 only 2 fit): measured
// 147 µs a pass instead of 183 for 10M pairs on an H200.
launch_bounds!(radix_sort_onesweep, 256, 3);

kernel! {
    /// Pass `pass` (digit bits `8·pass ..`): reads `keys_in`/`values_in`, writes
    /// `keys_out`/`values_out` ordered by the digit, stably. `bins` and `lookback` are the whole
    /// arrays (indexed by `pass` here). Launch: grid `max(ceil_div(n, SORT_TILE), 1)`, block
    /// `SORT_THREADS`.
    pub unsafe fn radix_sort_onesweep(
        keys_in: *const u64,
        keys_out: *mut u64,
        values_in: *const u64,
        values_out: *mut u64,
        n: i64,
        pass: u32,
        signed_keys: u32,
        bins: *const u32,
        lookback: *mut u32,
        tile_counters: *mut u32,
    ) {
        // All shared memory goes through `.shared` addresses (LDS/STS/ATOMS, not generic
        // LD/ST/ATOM, which halved this kernel's speed).
        let tile_buf = shared_addr(crate::static_shared!(RS_TILE_BUF: [u64; crate::kernels::radix_sort::SORT_TILE]));
        // Global position of the key in each sorted slot of the tile, for the values' pass.
        let slot_dest = shared_addr(crate::static_shared!(RS_SLOT_DEST: [u32; crate::kernels::radix_sort::SORT_TILE]));
        let warp_counts = shared_addr(crate::static_shared!(RS_WARP_COUNTS: [u32; crate::kernels::radix_sort::WARPS * crate::kernels::radix_sort::RADIX]));
        let digit_start = shared_addr(crate::static_shared!(RS_DIGIT_START: [u32; crate::kernels::radix_sort::RADIX]));
        // Global position of slot j of digit d's run: `j + digit_shift[d]` (wrapping).
        let digit_shift = shared_addr(crate::static_shared!(RS_DIGIT_SHIFT: [u32; crate::kernels::radix_sort::RADIX]));
        let misc = shared_addr(crate::static_shared!(RS_MISC: [u32; 16]));
        // The tile's digit counts, counted before ranking ([`HIST_PARTS`] copies, as the
        // histogram's), so that the tile publishes them to the look-back early. They live in
        // the first words of `slot_dest`, which is written only after the reorder's barriers
        // (a buffer of their own took the block past the 48 KB of static shared memory).
        const _: () = assert!(HIST_PARTS * RADIX <= SORT_TILE);
        let early = slot_dest;
        let t = thread_idx_x() as usize;
        let lane = lane_id();
        let warp = warp_id() as usize;
        let tiles = (n as usize).div_ceil(SORT_TILE).max(1);
        if t == 0 {
            st_shared_u32(misc, atomic_add_u32(tile_counters.add(pass as usize), 1));
        }
        for w in 0..WARPS {
            st_shared_u32(sh::<u32>(warp_counts, w * RADIX + t), 0);
        }
        for q in 0..HIST_PARTS {
            st_shared_u32(sh::<u32>(early, q * RADIX + t), 0);
        }
        sync_threads();
        let tile = ld_shared_u32(misc) as usize;
        let base = tile * SORT_TILE;
        let valid = (n as usize).saturating_sub(base).min(SORT_TILE);
        let flip = flip_mask(signed_keys);
        let shift = pass * RADIX_BITS;

        // Warp-striped load: warp w holds tile positions [w·WARP_KEYS, (w+1)·WARP_KEYS), item i
        // of lane l at position w·WARP_KEYS + i·32 + l.
        let seg = warp * WARP_KEYS;
        let mut keys = [0u64; SORT_ITEMS];
        for_each_item!(i {
            let j = seg + i * WARP_SIZE as usize + lane as usize;
            if j < valid {
                keys[i] = *keys_in.add(base + j);
            }
        });
        // Early counts (CUB's "early counts" onesweep): the tile's count of each digit, published
        // to the look-back before the ranking below, so that the tiles after this one find it
        // sooner. Thread t then owns digit t.
        let part = lane as usize % HIST_PARTS;
        for_each_item!(i {
            let j = seg + i * WARP_SIZE as usize + lane as usize;
            if j < valid {
                let d = digit(keys[i], flip, shift) as usize;
                red_add_shared_u32(sh::<u32>(early, part * RADIX + d), 1);
            }
        });
        sync_threads();
        let d = t;
        let mut total = 0u32;
        for q in 0..HIST_PARTS {
            total += ld_shared_u32(sh::<u32>(early, q * RADIX + d));
        }
        let states = lookback.add(pass as usize * tiles * RADIX);
        let mine = states.add(tile * RADIX + d);
        write_volatile(mine, if tile > 0 { LB_AGGREGATE | total } else { LB_PREFIX | total });

        // Rank inside the warp: items in order, and inside one item lanes in order, so equal
        // digits keep their tile order.
        let counts = sh::<u32>(warp_counts, warp * RADIX);
        let mut ranks = [0u32; SORT_ITEMS];
        for_each_item!(i {
            let j = seg + i * WARP_SIZE as usize + lane as usize;
            let d = digit(keys[i], flip, shift);
            let peers = match_digit(d, j < valid);
            let leader = peers.trailing_zeros() & (WARP_SIZE - 1);
            let mut before = 0;
            if j < valid && lane == leader {
                before = atomic_add_shared_u32(sh::<u32>(counts, d as usize), peers.count_ones());
            }
            let below = (peers & ((1u32 << lane) - 1)).count_ones();
            ranks[i] = shfl_idx_u32(before, leader) + below;
        });
        sync_threads();

        // Each warp's offset inside digit t's run of the tile (the warps' counts add up to the
        // early `total`).
        let mut in_tile = 0u32;
        for w in 0..WARPS {
            let a = sh::<u32>(warp_counts, w * RADIX + d);
            let c = ld_shared_u32(a);
            st_shared_u32(a, in_tile);
            in_tile += c;
        }
        // Decoupled look-back: add the counts of the tiles before this one (its own count is
        // published already), then publish the inclusive count.
        let mut before_tile = 0u32;
        if tile > 0 {
            before_tile = look_back_digit(states, tile, d);
            write_volatile(mine, LB_PREFIX | (before_tile + total));
        }
        let start = block_inclusive_sum_u32(total, sh::<u32>(misc, 8)) - total;
        st_shared_u32(sh::<u32>(digit_start, d), start);
        let global = *bins.add(pass as usize * RADIX + d) + before_tile;
        st_shared_u32(sh::<u32>(digit_shift, d), global.wrapping_sub(start));
        sync_threads();

        // Reorder the tile in shared memory by digit.
        for_each_item!(i {
            let j = seg + i * WARP_SIZE as usize + lane as usize;
            if j < valid {
                let d = digit(keys[i], flip, shift) as usize;
                let r = ld_shared_u32(sh::<u32>(digit_start, d))
                    + ld_shared_u32(sh::<u32>(warp_counts, warp * RADIX + d))
                    + ranks[i];
                ranks[i] = r;
                st_shared_u64(sh::<u64>(tile_buf, r as usize), keys[i]);
            }
        });
        // Load the values now, into the keys' registers, so that their latency hides behind
        // the key writes below (loaded after those, they cost a quarter of the kernel's time).
        let mut values = [0u64; SORT_ITEMS];
        for_each_item!(i {
            let j = seg + i * WARP_SIZE as usize + lane as usize;
            if j < valid {
                values[i] = *values_in.add(base + j);
            }
        });
        sync_threads();
        // Write the keys out in tile order: runs of one digit are contiguous.
        for_each_item!(k {
            let j = k * SORT_THREADS as usize + t;
            if j < valid {
                let key = ld_shared_u64(sh::<u64>(tile_buf, j));
                let d = digit(key, flip, shift) as usize;
                let pos = ld_shared_u32(sh::<u32>(digit_shift, d)).wrapping_add(j as u32);
                *keys_out.add(pos as usize) = key;
                st_shared_u32(sh::<u32>(slot_dest, j), pos);
            }
        });
        sync_threads();
        // The values follow their keys through the same shared-memory reorder.
        for_each_item!(i {
            let j = seg + i * WARP_SIZE as usize + lane as usize;
            if j < valid {
                st_shared_u64(sh::<u64>(tile_buf, ranks[i] as usize), values[i]);
            }
        });
        sync_threads();
        for_each_item!(k {
            let j = k * SORT_THREADS as usize + t;
            if j < valid {
                let pos = ld_shared_u32(sh::<u32>(slot_dest, j));
                *values_out.add(pos as usize) = ld_shared_u64(sh::<u64>(tile_buf, j));
            }
        });
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::emu::EmuLaunch;

    fn cfg(grid: usize, block: u32) -> EmuLaunch {
        EmuLaunch::new(grid.max(1) as u32, block)
    }

    /// Runs the whole plan on the emulator: returns (sorted keys, values in key order).
    pub(crate) fn sort_pairs(keys: &[u64], values: &[u64], signed: bool) -> (Vec<u64>, Vec<u64>) {
        sort_pairs_with(keys, values, signed, HIST_MAX_BLOCKS, 3)
    }

    /// As [`sort_pairs`], the histogram launched with at most `hist_blocks` blocks and
    /// `resident` onesweep blocks in flight at once.
    fn sort_pairs_with(
        keys: &[u64],
        values: &[u64],
        signed: bool,
        hist_blocks: usize,
        resident: usize,
    ) -> (Vec<u64>, Vec<u64>) {
        let n = keys.len();
        let passes = 8usize;
        let tiles = n.div_ceil(SORT_TILE).max(1);
        let mut bins = vec![0xA5A5_A5A5u32; passes * RADIX];
        let mut counters = vec![0xA5A5_A5A5u32; passes];
        let mut lookback = vec![0xA5A5_A5A5u32; passes * tiles * RADIX];
        let (mut alt_k, mut alt_v) = (vec![u64::MAX; n], vec![u64::MAX; n]);
        let (mut out_k, mut out_v) = (vec![u64::MAX; n], vec![u64::MAX; n]);
        let s = signed as u64;
        unsafe {
            cfg(1, 256)
                .ptr_mut(&mut bins)
                .ptr_mut(&mut counters)
                .arg(passes)
                .run(&radix_sort_init::EMU);
            cfg(tiles.min(hist_blocks), SORT_THREADS)
                .ptr(keys)
                .arg(n)
                .arg(s)
                .arg(passes)
                .ptr_mut(&mut bins)
                .ptr_mut(&mut lookback)
                .run(&radix_sort_histogram::EMU);
            cfg(passes, SORT_THREADS)
                .ptr_mut(&mut bins)
                .run(&radix_sort_bin_offsets::EMU);
            for p in 0..passes {
                let (kin, vin) = match p {
                    0 => (keys.as_ptr(), values.as_ptr()),
                    _ if p % 2 == 1 => (alt_k.as_ptr(), alt_v.as_ptr()),
                    _ => (out_k.as_ptr(), out_v.as_ptr()),
                };
                let (kout, vout) = if p % 2 == 0 {
                    (alt_k.as_mut_ptr(), alt_v.as_mut_ptr())
                } else {
                    (out_k.as_mut_ptr(), out_v.as_mut_ptr())
                };
                // Blocks in flight at once, as on a GPU: look-backs wait on running tiles.
                cfg(tiles, SORT_THREADS)
                    .raw(kin)
                    .raw(kout)
                    .raw(vin)
                    .raw(vout)
                    .arg(n)
                    .arg(p)
                    .arg(s)
                    .ptr(&bins)
                    .ptr_mut(&mut lookback)
                    .ptr_mut(&mut counters)
                    .resident(resident)
                    .run(&radix_sort_onesweep::EMU);
            }
        }
        (out_k, out_v)
    }

    fn check(keys: &[u64], signed: bool) {
        check_with(keys, signed, HIST_MAX_BLOCKS, 3);
    }

    /// Sorts `keys` with their positions as values ([`sort_pairs_with`]) and compares with
    /// std's stable sort.
    fn check_with(keys: &[u64], signed: bool, hist_blocks: usize, resident: usize) {
        let values: Vec<u64> = (0..keys.len() as u64).collect();
        let (got_k, got_v) = sort_pairs_with(keys, &values, signed, hist_blocks, resident);
        let mut expect: Vec<(u64, u64)> = keys.iter().copied().zip(values).collect();
        if signed {
            expect.sort_by_key(|&(k, _)| k as i64); // std's sort is stable
        } else {
            expect.sort_by_key(|&(k, _)| k);
        }
        let (ek, ev): (Vec<u64>, Vec<u64>) = expect.into_iter().unzip();
        assert_eq!(got_k, ek, "keys");
        assert_eq!(got_v, ev, "values (stability)");
    }

    fn pseudo(i: u64) -> u64 {
        mix(i)
    }

    pub(crate) fn mix(mut z: u64) -> u64 {
        z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    #[test]
    fn digit_look_back_adds_aggregates_until_an_inclusive_count() {
        // 3 tiles before tile 3; digit 1: tile 0 inclusive 5, tile 1 aggregate 2, tile 2
        // aggregate 4 -> 11. Digit 0: tile 2 already inclusive (7) -> 7.
        let mut states = vec![0u32; 4 * RADIX];
        states[1] = LB_PREFIX | 5;
        states[RADIX + 1] = LB_AGGREGATE | 2;
        states[2 * RADIX + 1] = LB_AGGREGATE | 4;
        states[2 * RADIX] = LB_PREFIX | 7;
        states[RADIX] = LB_AGGREGATE | 1000; // not reached
        unsafe {
            assert_eq!(look_back_digit(states.as_ptr(), 3, 1), 11);
            assert_eq!(look_back_digit(states.as_ptr(), 3, 0), 7);
            assert_eq!(look_back_digit(states.as_ptr(), 0, 0), 0);
        }
    }

    #[test]
    fn sorts_like_std_stable_sort_over_several_tiles() {
        // Full 64-bit keys with many repeats (stability shows), over 3 tiles and a partial one.
        let n = 3 * SORT_TILE + 500;
        let keys: Vec<u64> = (0..n as u64).map(|i| pseudo(i % 977) ^ (i % 3)).collect();
        check(&keys, false);
    }

    #[test]
    fn histogram_blocks_loop_over_tiles() {
        // Two histogram blocks over five tiles: each counts and clears several tiles.
        let n = 4 * SORT_TILE + 1;
        let keys: Vec<u64> = (0..n as u64).map(|i| pseudo(i % 5003)).collect();
        check_with(&keys, false, 2, 3);
    }

    #[test]
    fn look_backs_over_tiles_still_in_flight() {
        // 16 tiles, 8 in flight: tiles look back over neighbours that have published only
        // their counts (a look-back that stops at those gives wrong positions).
        let n = 16 * SORT_TILE;
        let keys: Vec<u64> = (0..n as u64).map(|i| pseudo(i) % 1000).collect();
        check_with(&keys, false, HIST_MAX_BLOCKS, 8);
    }

    #[test]
    fn signed_keys_put_negatives_first() {
        let keys: Vec<u64> = (0..2000i64)
            .map(|i| ((pseudo(i as u64) % 2001) as i64 - 1000) as u64)
            .chain([i64::MIN as u64, i64::MAX as u64, 0, u64::MAX])
            .collect();
        check(&keys, true);
    }

    #[test]
    fn edge_inputs_all_equal_all_distinct_tiny_and_empty() {
        check(&vec![42u64; SORT_TILE + 9], true);
        let distinct: Vec<u64> = (0..SORT_TILE as u64 + 300).map(pseudo).collect();
        check(&distinct, false);
        check(&[5, 3], true);
        check(&[7], true);
        let (k, v) = sort_pairs(&[], &[], true);
        assert!(k.is_empty() && v.is_empty());
    }
}
