//! One chunk of a bag (up to 32 lookups, one index per lane) summed by a warp: the inner loop of
//! the tuned warp-per-bag kernels of problems 1 and 3. Each lane owns four columns of a row;
//! rows are requested [`IN_FLIGHT`] at a time with no branch between their loads (a branch per
//! load, as in a loop over a partial group, lets a load wait for the add before it), then the
//! rest of the chunk one at a time.
use crate::dev::*;

/// Rows requested back to back per lane before any of them is added.
pub const IN_FLIGHT: usize = 4;

/// Adds the rows of a chunk's `count` lookups (at most 32; lane k holds the k-th row index in
/// `mine`) to `acc`, each lane the four columns `load(row)` reads: full groups of [`IN_FLIGHT`]
/// rows into `acc[0..IN_FLIGHT]`, the last `count % IN_FLIGHT` into `acc[0]`. Every lane of the
/// warp calls it with the same `count` (the shuffles need all 32); an inactive lane (columns past
/// the row's end) shuffles but loads nothing. The counters are 32-bit: with a `usize` one
/// (64-bit on the GPU) each group's loop test took 9 instructions where CUDA's `int` takes 5, of
/// ~86 per four lookups (SASS side by side, docs/design.md).
#[inline(always)]
pub unsafe fn add_chunk<F: Fn(i64) -> [f32; 4]>(
    mine: i64,
    count: usize,
    active: bool,
    acc: &mut [[f32; 4]; IN_FLIGHT],
    load: F,
) {
    const GROUP: u32 = IN_FLIGHT as u32;
    let count = count.min(WARP_SIZE as usize) as u32;
    let mut k = 0u32;
    while k + GROUP <= count {
        let mut rows = [0i64; IN_FLIGHT];
        for (u, row) in rows.iter_mut().enumerate() {
            *row = shfl_idx_i64(mine, k + u as u32);
        }
        if active {
            // Constant bounds, indexed: the loops unroll and `acc` stays in registers (an
            // iterator over the arrays is not unrolled and puts them in local memory).
            let mut values = [[0.0f32; 4]; IN_FLIGHT];
            for u in 0..IN_FLIGHT {
                values[u] = load(rows[u]);
            }
            for u in 0..IN_FLIGHT {
                for c in 0..4 {
                    acc[u][c] += values[u][c];
                }
            }
        }
        k += GROUP;
    }
    while k < count {
        let row = shfl_idx_i64(mine, k);
        if active {
            let v = load(row);
            for c in 0..4 {
                acc[0][c] += v[c];
            }
        }
        k += 1;
    }
}

/// The four partial sums of [`add_chunk`] added up, in a fixed order.
#[inline(always)]
pub fn total(acc: &[[f32; 4]; IN_FLIGHT]) -> [f32; 4] {
    let mut sum = [0.0f32; 4];
    for (c, s) in sum.iter_mut().enumerate() {
        *s = (acc[0][c] + acc[1][c]) + (acc[2][c] + acc[3][c]);
    }
    sum
}
