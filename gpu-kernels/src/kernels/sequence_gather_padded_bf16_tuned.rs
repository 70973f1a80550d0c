//! Problem 6, `sequence_gather_padded_bf16`, tuned: the whole problem in one launch, one block
//! per 32-row tile of one sequence, the prefix sum of the lengths folded into the blocks that
//! need it. No scratch, no second launch.
//!
//! # What a block does
//! Block k owns rows j0 .. j0 + 32 of sequence b (`tiles = ceil(L / 32)`, b = k / tiles,
//! j0 = 32·(k mod tiles)); its `kept = clamp(lengths[b] − j0, 0, rows)` first rows are
//! gathered, the rest of the tile is zeros. The tile is contiguous in `out`, and so are its
//! padded rows, so:
//! 1. **Padding first**: the padded part of the tile is one flat run of 16-byte vectors
//!    written with streaming stores (`st.global.cs`), coalesced for any D. It depends on
//!    `lengths[b]` alone, so 71% of the tiles at `full` (all padding) are a single load then
//!    stores.
//! 2. **The start of the sequence**, only in tiles with a kept row (block-uniform):
//!    Σ lengths[0..b) by the block (each thread four independent 8-byte non-coherent loads
//!    per round, a shuffle reduction per warp, one barrier, eight shared-memory words). With
//!    B = 2048 that is at most 16 KB, the same 16 KB for every block, so after the first block
//!    of an SM it is served by L1: ≈ 4,700 gathering tiles × 8 KB mean ≈ 39 MB of L1 reads at
//!    `full`, ≈ 2 MB from L2, instead of a scan kernel and its launch (a one-block scan is
//!    ≈ 5 µs in the reference's profile; a decoupled look-back would be two launches). The cost
//!    grows with B·(gathering tiles), so a plan for B in the millions would scan first; the
//!    problem's B is at most 2048.
//! 3. **The kept rows**: lane r of every warp loads the id of tile row r (one coalesced load of
//!    the tile's ≤ 32 ids, 32 = the tile height), and each vector's id comes from it by shuffle.
//!    Thread t copies the tile's vectors t, t + 256, …: four at a time, all four row loads
//!    (16-byte `ld.global.nc`) issued before any of the four stores, so a warp has four rows
//!    in flight (D = 256: a row is 32 vectors, one per lane, and a full tile is exactly one
//!    round of four). The (row, column) of each vector is advanced by a constant step with one
//!    carry, no division in the loop. The trip count is block-uniform, so every lane takes
//!    part in every shuffle.
//!
//! Every other shape takes the same steps in the same launch with one bf16 per unit instead of
//! 16 bytes (D not a multiple of 8, or `weight` / `out` not 16-byte aligned): a launch plan
//! cannot branch, so the kernel does.
//!
//! # Predicted time at `full` (B = 2048, L = 256, D = 256, E = 16M)
//! Compulsory bytes 283.7 MB (the 268.4 MB output written once, ≈ 27.8K distinct rows read,
//! 14.2 MB, the ids and lengths 1.05 MB): 67.1 µs at 4.23 TB/s, the floor. The kernel moves
//! exactly those bytes to and from HBM when the repeats of hot rows (52 MB of the 66.4 MB of
//! kept-row reads) hit L2, which the evict-first output stores help keep. Instructions are not
//! the limit: counted from the PTX, ≈ 55 per warp per tile, 6 per padding store, ≈ 150 per warp
//! for a gathering tile's prefix and ids, ≈ 100 per warp per round of four rows: ≈ 19M warp
//! instructions, ≈ 18 µs of issue over 528 schedulers at 1.98 GHz, a quarter of the floor.
//! What remains is how close a write-dominated stream gets to the copy ceiling, plus the ramp
//! (the first gathering tiles wait on lengths → prefix → ids → rows, ≈ 3 µs of latency, while
//! the padding tiles already stream) and a short tail (16 KB tiles). The bulk-copy example's
//! gather kernel, with the same tiling, is ≈ 79 µs (its 84.1 µs include a one-block scan
//! launch, ≈ 5 µs by the reference's profile). Prediction: **≈ 0.075 ms** (283.7 MB at
//! ≈ 3.8 TB/s, 90% of the floor; 70–80 µs), against 0.0966 ms for `warp_per_row_uint4` (one
//! 512-byte row per warp in 524,288 blocks, a chain of four dependent loads per row, plus the
//! scan kernel) and 0.0841 ms for `bulk_copy_sm90a`.
//!
//! Occupancy: 256 threads with launch bounds (256, 8), so 64 warps per SM; ptxas (sm_90) gives
//! the kernel 32 registers (as many as it takes without the bound), no stack frame, no
//! spills. By Little's law an SM must keep ≈ 32 KB moving per µs; a tile resides ≈ 1.7 µs on
//! average (≈ 0.5 µs for padding, ≈ 3.5 µs for gathering ones) for 16 KB, so ≈ 3.4 resident
//! tiles per SM suffice and 8 leave room.
use crate::dev::*;

/// Output rows per block. 32 = a warp: lane r holds the id of tile row r.
pub const TILE_ROWS: u32 = 32;
/// Threads per block in the manifest (the kernel works with any multiple of 32 up to 1024).
pub const THREADS: u32 = 256;
/// Vectors in flight per thread in the gather.
const UNROLL: usize = 4;

/// How one unit of a row moves: 16 bytes (eight bf16) on the fast path, one bf16 otherwise.
trait Unit {
    type Bits: Copy;
    const ZERO: Self::Bits;
    /// A load of table data (read-only during the kernel).
    unsafe fn load(p: *const Self::Bits) -> Self::Bits;
    /// A store of output data (written once).
    unsafe fn store(p: *mut Self::Bits, v: Self::Bits);
}

/// Sixteen bytes: `ld.global.nc.v4.u32` and `st.global.cs.v4.u32`.
struct Vec16;

impl Unit for Vec16 {
    type Bits = [u32; 4];
    const ZERO: [u32; 4] = [0; 4];
    #[inline(always)]
    unsafe fn load(p: *const [u32; 4]) -> [u32; 4] {
        load_nc_u32x4(p as *const u32)
    }
    #[inline(always)]
    unsafe fn store(p: *mut [u32; 4], v: [u32; 4]) {
        store_cs_u32x4(p as *mut u32, v)
    }
}

/// One bf16 (its bits): any D, any alignment.
struct Bf16;

impl Unit for Bf16 {
    type Bits = u16;
    const ZERO: u16 = 0;
    #[inline(always)]
    unsafe fn load(p: *const u16) -> u16 {
        *p
    }
    #[inline(always)]
    unsafe fn store(p: *mut u16, v: u16) {
        *p = v
    }
}

/// Units `from .. to` of the tile at `tile` set to zero, the block striding over them.
#[inline(always)]
unsafe fn zero_units<U: Unit>(tile: *mut U::Bits, from: u32, to: u32) {
    let step = block_dim_x();
    let mut q = from + thread_idx_x();
    while q < to {
        U::store(tile.add(q as usize), U::ZERO);
        q += step;
    }
}

/// `lengths[0] + … + lengths[b − 1]`, the start of sequence b in `indices`, in every thread of
/// the block. Must be called by the whole block (it ends with a barrier).
#[inline(always)]
unsafe fn block_prefix(lengths: *const i64, b: usize) -> i64 {
    let step = block_dim_x() as usize;
    let mut i = thread_idx_x() as usize;
    let mut sum = 0i64;
    while i < b {
        // Four independent loads per round (one memory latency, not four).
        let v0 = load_nc_i64(lengths.add(i));
        let v1 = if i + step < b {
            load_nc_i64(lengths.add(i + step))
        } else {
            0
        };
        let v2 = if i + 2 * step < b {
            load_nc_i64(lengths.add(i + 2 * step))
        } else {
            0
        };
        let v3 = if i + 3 * step < b {
            load_nc_i64(lengths.add(i + 3 * step))
        } else {
            0
        };
        sum = sum.wrapping_add(v0.wrapping_add(v1).wrapping_add(v2.wrapping_add(v3)));
        i += 4 * step;
    }
    let warp_total = warp_sum_i64(sum);
    let sums = shared_addr(crate::static_shared!(SEQPAD_TUNED_WARP_SUMS: [i64; 32]));
    if lane_id() == 0 {
        st_shared_u64(sums + (warp_id() * 8) as SharedAddr, warp_total as u64);
    }
    sync_threads();
    let mut total = 0i64;
    let mut w = 0;
    while w < step / WARP_SIZE as usize {
        total = total.wrapping_add(ld_shared_u64(sums + (w * 8) as SharedAddr) as i64);
        w += 1;
    }
    total
}

/// Copies the first `kept` rows of the tile at `tile` (`units` per row) from the table: row r's
/// id is lane r's `id`. Every lane of the block must call it (block-uniform trip count, the
/// shuffles take whole warps).
#[inline(always)]
unsafe fn gather_units<U: Unit>(
    weight: *const U::Bits,
    id: i64,
    tile: *mut U::Bits,
    kept: u32,
    units: u32,
) {
    let t = thread_idx_x();
    let step = block_dim_x();
    let total = kept * units;
    // Vector q = row·units + col; q advances by `step`, so (row, col) by (step_row, step_col)
    // with at most one carry.
    let (step_row, step_col) = (step / units, step % units);
    let (mut row, mut col) = (t / units, t % units);
    let mut base = 0u32;
    while base < total {
        let mut q = [0u32; UNROLL];
        let mut rows = [0u32; UNROLL];
        let mut cols = [0u32; UNROLL];
        for k in 0..UNROLL {
            q[k] = base + k as u32 * step + t;
            rows[k] = row;
            cols[k] = col;
            col += step_col;
            row += step_row;
            if col >= units {
                col -= units;
                row += 1;
            }
        }
        let mut v = [U::ZERO; UNROLL];
        for k in 0..UNROLL {
            // Every lane shuffles; only lanes with a vector left load it.
            let src = shfl_idx_i64(id, rows[k] % WARP_SIZE);
            if q[k] < total {
                v[k] = U::load(weight.add(src as usize * units as usize + cols[k] as usize));
            }
        }
        for k in 0..UNROLL {
            if q[k] < total {
                U::store(tile.add(q[k] as usize), v[k]);
            }
        }
        base += UNROLL as u32 * step;
    }
}

launch_bounds!(sequence_gather_padded_bf16_tile_per_block, 256, 8);

kernel! {
    /// `out[b, j, :] = weight[indices[start_b + j], :]` for `j < min(lengths[b], L)`, zeros for
    /// the other rows of `out` [B, L, D] (bf16 bits; `start_b` = Σ lengths[0..b)).
    /// Launch: grid `B * ceil_div(L, 32)`, block 256 (any multiple of 32), no shared bytes,
    /// no scratch. 16-byte path when D % 8 = 0 and `weight`, `out` are 16-byte aligned; one
    /// bf16 at a time otherwise.
    pub unsafe fn sequence_gather_padded_bf16_tile_per_block(
        weight: *const u16,
        indices: *const i64,
        lengths: *const i64,
        out: *mut u16,
        batch: i64,
        max_len: i64,
        dim: i64,
    ) {
        let tiles = (max_len as u32).div_ceil(TILE_ROWS);
        if tiles == 0 {
            return;
        }
        let b = block_idx_x() / tiles;
        if b as i64 >= batch {
            return; // the whole block
        }
        let j0 = (block_idx_x() - b * tiles) * TILE_ROWS;
        let rows = (max_len as u32 - j0).min(TILE_ROWS);
        let len = load_nc_i64(lengths.add(b as usize));
        let kept = (len - j0 as i64).clamp(0, rows as i64) as u32;
        let first = ((b as usize * max_len as usize) + j0 as usize) * dim as usize;
        let fast = dim % 8 == 0 && (weight as usize | out as usize).is_multiple_of(16);
        // Vectors (fast) or bf16 values per row.
        let units = if fast { dim as u32 / 8 } else { dim as u32 };
        if fast {
            zero_units::<Vec16>(out.add(first) as *mut [u32; 4], kept * units, rows * units);
        } else {
            zero_units::<Bf16>(out.add(first), kept * units, rows * units);
        }
        if kept > 0 {
            // Block-uniform: the barrier in `block_prefix` is reached by every thread.
            let start = block_prefix(lengths, b as usize) + j0 as i64;
            let lane = lane_id();
            let id = if lane < kept {
                load_nc_i64(indices.add(start as usize + lane as usize))
            } else {
                0
            };
            if fast {
                gather_units::<Vec16>(
                    weight as *const [u32; 4],
                    id,
                    out.add(first) as *mut [u32; 4],
                    kept,
                    units,
                );
            } else {
                gather_units::<Bf16>(weight, id, out.add(first), kept, units);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emu::EmuLaunch;

    /// bf16 NaN bits the kernel never writes: what each output starts as.
    const POISON: u16 = 0x7fc1;
    /// Poisoned elements past the end of `out` that must stay so.
    const GUARD: usize = 256;

    /// A 16-byte-aligned buffer of `n` u16 (as the device allocator gives), starting `skew`
    /// elements in, so a test can also hand the kernel a misaligned pointer.
    struct Aligned {
        store: Vec<u128>,
        skew: usize,
        n: usize,
    }

    impl Aligned {
        fn new(n: usize, skew: usize, fill: impl Fn(usize) -> u16) -> Self {
            let mut a = Aligned {
                store: vec![0u128; (n + skew).div_ceil(8) + 1],
                skew,
                n,
            };
            for (i, x) in a.slice_mut().iter_mut().enumerate() {
                *x = fill(i);
            }
            a
        }
        fn ptr(&mut self) -> *mut u16 {
            unsafe { (self.store.as_mut_ptr() as *mut u16).add(self.skew) }
        }
        fn slice_mut(&mut self) -> &mut [u16] {
            let n = self.n;
            unsafe { std::slice::from_raw_parts_mut(self.ptr(), n) }
        }
    }

    /// The padded tensor from the definition, serially: starts by a running sum, row j of
    /// sequence b copied when j < min(lengths[b], L), zeros otherwise.
    fn oracle(weight: &[u16], indices: &[i64], lengths: &[i64], l: usize, d: usize) -> Vec<u16> {
        let mut out = vec![0u16; lengths.len() * l * d];
        let mut start = 0usize;
        for (b, &len) in lengths.iter().enumerate() {
            for j in 0..l {
                if (j as i64) < len {
                    let id = indices[start + j] as usize;
                    let dst = (b * l + j) * d;
                    out[dst..dst + d].copy_from_slice(&weight[id * d..(id + 1) * d]);
                }
            }
            start += len as usize;
        }
        out
    }

    /// Runs the kernel as the manifest launches it (grid B·ceil(L/32), block `block`) and
    /// compares every output bit with the oracle.
    fn check(lengths: &[i64], e: usize, l: usize, d: usize, out_skew: usize, block: u32) {
        let b = lengths.len();
        let n: i64 = lengths.iter().sum();
        // Ids cover the whole table, the last row included.
        let indices: Vec<i64> = (0..n)
            .map(|i| {
                if i % 17 == 3 {
                    e as i64 - 1
                } else {
                    (i * 7919 + 13) % e as i64
                }
            })
            .collect();
        // Table bits: distinct, never zero, NaN and infinity patterns included (a copy of bits).
        let mut weight = Aligned::new(e * d, 0, |i| (i as u16).wrapping_mul(40503) | 0x0101);
        let mut out = Aligned::new(b * l * d + GUARD, out_skew, |_| POISON);
        let tiles = l.div_ceil(TILE_ROWS as usize);
        unsafe {
            EmuLaunch::new((b * tiles) as u32, block)
                .raw(weight.ptr())
                .ptr(&indices)
                .ptr(lengths)
                .raw(out.ptr())
                .arg(b)
                .arg(l)
                .arg(d)
                .run(&sequence_gather_padded_bf16_tile_per_block::EMU);
        }
        let want = oracle(weight.slice_mut(), &indices, lengths, l, d);
        let got = out.slice_mut();
        assert!(
            got[b * l * d..].iter().all(|&x| x == POISON),
            "D {d}: written past the end of out"
        );
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            let (seq, j, c) = (i / (l * d), i / d % l, i % d);
            assert_eq!(
                g, w,
                "D {d} skew {out_skew}: out[{seq}, {j}, {c}] = {g:#06x}, want {w:#06x} \
                 (length {})",
                lengths[seq]
            );
        }
    }

    /// Lengths with the cases that matter for L = 40 (tiles of 32 and 8 rows): empty, exactly
    /// L, longer than L (cut, in both tiles), one row, the tile boundary (31, 32, 33), then
    /// a spread.
    fn lengths(b: usize, l: i64) -> Vec<i64> {
        let special = [0, l, l + 5, 4 * l, 1, 31, 32, 33, l - 1, 0];
        (0..b)
            .map(|i| {
                special
                    .get(i)
                    .copied()
                    .unwrap_or(((i as i64) * 37 + 11) % (2 * l + 3))
            })
            .collect()
    }

    #[test]
    fn the_16_byte_path_pads_cuts_and_copies_every_bit() {
        // D = 24: three vectors a row, so a warp's lanes span rows; D = 256: a row per warp.
        check(&lengths(23, 40), 97, 40, 24, 0, THREADS);
        check(&lengths(12, 40), 50, 40, 256, 0, THREADS);
        // D = 96 and 320 (12 and 40 vectors): a full tile is more than one step of 256
        // vectors and 256 is not a multiple of a row, so (row, column) carry between steps.
        check(&lengths(12, 40), 50, 40, 96, 0, THREADS);
        check(&lengths(10, 40), 23, 40, 320, 0, THREADS);
        // D = 8, L = 16: one vector a row, one partial tile per sequence.
        check(&lengths(15, 16), 9, 16, 8, 0, THREADS);
        // Every id the same row (E = 1), one sequence.
        check(&[40], 1, 40, 24, 0, THREADS);
        check(&[75, 3, 0, 40], 1, 40, 24, 0, THREADS);
    }

    #[test]
    fn the_scalar_path_takes_any_d_and_alignment() {
        // D = 20 and 13: not a multiple of 8; D = 24 with `out` 2 bytes off a 16-byte boundary.
        check(&lengths(23, 40), 97, 40, 20, 0, THREADS);
        check(&lengths(11, 40), 31, 40, 13, 0, THREADS);
        check(&lengths(13, 40), 97, 40, 24, 1, THREADS);
    }

    #[test]
    fn the_block_prefix_sums_several_rounds_of_lengths() {
        // 64-thread blocks: 256 lengths a round of four loads, so sequences past 256 and 512
        // take several rounds, with partial ones; L = 3 keeps the launch small.
        let lens: Vec<i64> = (0..700).map(|i| [0, 3, 1, 7, 2][i % 5]).collect();
        check(&lens, 61, 3, 8, 0, 64);
        check(&lens[..300], 61, 3, 20, 0, 64);
        // The manifest's block over B = 1100 (two rounds for the last sequences).
        let lens: Vec<i64> = (0..1100).map(|i| [2, 0, 1][i % 3]).collect();
        check(&lens, 5, 2, 8, 0, THREADS);
    }
}
