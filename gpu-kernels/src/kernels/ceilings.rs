//! Probes of the device's ceilings, run once per benchmark run: the fp32 FMA rate, the L2
//! read bandwidth (one launch whose blocks re-read an L2-resident buffer many times), and the
//! rates of the access patterns the problems use: random row gathers at a row width, from a
//! table past L2 or inside it, and scattered atomic adds into rows.
use crate::dev::*;

kernel! {
    /// Each thread runs `iters` rounds of 8 independent FMA chains (16 flops per round per
    /// chain pair) and writes one value so the work cannot be removed.
    /// Flops = grid·block·iters·16.
    pub unsafe fn ceiling_fma_f32(iters: u32, seed: f32, out: *mut f32) {
        let t = (block_idx_x() * block_dim_x() + thread_idx_x()) as f32;
        let mut a = [seed + t * 1e-7, seed - t * 1e-7, seed * 0.5, seed * 0.25, seed + 1.0, seed - 1.0, seed * 2.0, seed * 0.125];
        let m = 0.999_999_9f32;
        let c = 1e-7f32;
        let mut i = 0;
        while i < iters {
            let mut k = 0;
            while k < 8 {
                a[k] = fma_f32(a[k], m, c);
                k += 1;
            }
            i += 1;
        }
        let s = a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
        *out.add((block_idx_x() * block_dim_x() + thread_idx_x()) as usize) = s;
    }
}

kernel! {
    /// Every block reads the whole `len`-element buffer (`len` a multiple of 4·block, the buffer
    /// 16-byte aligned) `repeats` times with 16-byte loads, starting at a block-dependent
    /// offset, and writes one sum per thread. Bytes read = grid·repeats·len·4.
    pub unsafe fn ceiling_l2_read_f32(buf: *const f32, len: u32, repeats: u32, out: *mut f32) {
        let t = thread_idx_x();
        let step = block_dim_x() * 4;
        let start = (block_idx_x() * step * 7) % len;
        let mut acc = [0.0f32; 4];
        let mut r = 0;
        while r < repeats {
            let mut i = t * 4;
            while i < len {
                let mut at = start + i;
                if at >= len {
                    at -= len;
                }
                let v = load_f32x4(buf.add(at as usize));
                acc[0] += v[0];
                acc[1] += v[1];
                acc[2] += v[2];
                acc[3] += v[3];
                i += step;
            }
            r += 1;
        }
        *out.add((block_idx_x() * block_dim_x() + t) as usize) = acc[0] + acc[1] + acc[2] + acc[3];
    }
}

/// Row `k` of `rows` drawn for lookup `k` with `seed`: a counter-based hash (no index array is
/// read, so the probes measure the rows alone), uniform over the rows.
#[inline(always)]
fn probe_row(k: u32, seed: u32, rows: u32) -> u32 {
    let mut x = k.wrapping_mul(0x9E37_79B9) ^ seed;
    x ^= x >> 16;
    x = x.wrapping_mul(0x85EB_CA6B);
    x ^= x >> 13;
    x = x.wrapping_mul(0xC2B2_AE35);
    x ^= x >> 16;
    ((x as u64 * rows as u64) >> 32) as u32
}

/// How a warp splits into lane groups of one row each, for rows of `row_units` units: lanes
/// per row (at most 32) and rows a warp works on at once (a lane past the last whole group
/// idles).
#[inline(always)]
fn lane_groups(row_units: u32) -> (u32, u32) {
    let per_row = row_units.clamp(1, WARP_SIZE);
    (per_row, WARP_SIZE / per_row)
}

kernel! {
    /// Random row gathers, the access of an embedding lookup: each warp splits into groups of
    /// `row_floats / 4` lanes (at most 32), one row per group, so several rows are in flight a
    /// warp; group g of warp w reads lookups w·groups + g, then every groups·warps after, each
    /// a whole row of `row_floats` floats (a multiple of 4, the table 16-byte aligned) at a
    /// uniformly random row of `rows`, with 16-byte loads; each thread writes one sum. A table
    /// far past L2 measures gathers from HBM; one inside it, from L2.
    /// Bytes read = lookups·row_floats·4.
    pub unsafe fn ceiling_gather_rows(
        table: *const f32,
        rows: u32,
        row_floats: u32,
        lookups: u32,
        seed: u32,
        out: *mut f32,
    ) {
        let (per_row, groups) = lane_groups(row_floats / 4);
        let lane = lane_id();
        let (group, sub) = (lane / per_row, lane % per_row);
        let mut acc = [0.0f32; 4];
        if group < groups {
            let warps = grid_dim_x() * (block_dim_x() / WARP_SIZE);
            let warp = block_idx_x() * (block_dim_x() / WARP_SIZE) + warp_id();
            let mut k = warp * groups + group;
            while k < lookups {
                let row = table.add(probe_row(k, seed, rows) as usize * row_floats as usize);
                let mut c = sub * 4;
                while c < row_floats {
                    let v = load_f32x4(row.add(c as usize));
                    acc[0] += v[0];
                    acc[1] += v[1];
                    acc[2] += v[2];
                    acc[3] += v[3];
                    c += per_row * 4;
                }
                k += warps * groups;
            }
        }
        *out.add((block_idx_x() * block_dim_x() + thread_idx_x()) as usize) =
            acc[0] + acc[1] + acc[2] + acc[3];
    }
}

kernel! {
    /// Scattered atomic adds, the access of a backward pass into a table: like
    /// [`ceiling_gather_rows`] (groups of `row_floats` lanes, at most 32, a row each), but each
    /// lookup adds 1 to every float of its row with reductions (`red.add`, as the backward
    /// kernels write). Bytes updated = lookups·row_floats·4.
    pub unsafe fn ceiling_scatter_add_rows(
        table: *mut f32,
        rows: u32,
        row_floats: u32,
        lookups: u32,
        seed: u32,
    ) {
        let (per_row, groups) = lane_groups(row_floats);
        let lane = lane_id();
        let (group, sub) = (lane / per_row, lane % per_row);
        if group >= groups {
            return;
        }
        let warps = grid_dim_x() * (block_dim_x() / WARP_SIZE);
        let warp = block_idx_x() * (block_dim_x() / WARP_SIZE) + warp_id();
        let mut k = warp * groups + group;
        while k < lookups {
            let row = table.add(probe_row(k, seed, rows) as usize * row_floats as usize);
            let mut c = sub;
            while c < row_floats {
                red_add_f32(row.add(c as usize), 1.0);
                c += per_row;
            }
            k += warps * groups;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::emu::EmuLaunch;

    #[test]
    fn gather_probe_reads_every_lookup_s_row() {
        // Narrow rows (two lanes each), a warp's worth and rows wider than a warp.
        for row_floats in [8, 128, 256] {
            gather_probe_reads_every_row_of(row_floats);
        }
    }

    fn gather_probe_reads_every_row_of(row_floats: u32) {
        // Row r holds r + 1 everywhere: the sums say which rows were read.
        let (rows, lookups) = (7u32, 50u32);
        let table_storage: Vec<u128> = vec![0; (rows * row_floats) as usize / 4];
        let table = table_storage.as_ptr() as *mut f32;
        for r in 0..rows as usize {
            for c in 0..row_floats as usize {
                unsafe { *table.add(r * row_floats as usize + c) = r as f32 + 1.0 };
            }
        }
        let mut out = vec![0.0f32; 2 * 64];
        unsafe {
            EmuLaunch::new(2, 64)
                .raw(table)
                .arg(rows)
                .arg(row_floats)
                .arg(lookups)
                .arg(9u32)
                .ptr_mut(&mut out)
                .run(&super::ceiling_gather_rows::EMU)
        };
        let want: f32 = (0..lookups)
            .map(|k| (super::probe_row(k, 9, rows) + 1) as f32 * row_floats as f32)
            .sum();
        assert_eq!(out.iter().sum::<f32>(), want);
        let drawn: std::collections::BTreeSet<u32> =
            (0..lookups).map(|k| super::probe_row(k, 9, rows)).collect();
        assert_eq!(drawn.len(), rows as usize, "every row is drawn");
    }

    #[test]
    fn scatter_probe_adds_one_per_lookup_to_each_float_of_its_row() {
        let (rows, row_floats, lookups) = (5u32, 40u32, 33u32);
        let mut table = vec![0.0f32; (rows * row_floats) as usize];
        unsafe {
            EmuLaunch::new(1, 64)
                .ptr_mut(&mut table)
                .arg(rows)
                .arg(row_floats)
                .arg(lookups)
                .arg(3u32)
                .run(&super::ceiling_scatter_add_rows::EMU)
        };
        for r in 0..rows {
            let hits = (0..lookups)
                .filter(|&k| super::probe_row(k, 3, rows) == r)
                .count();
            let row = &table[(r * row_floats) as usize..((r + 1) * row_floats) as usize];
            assert!(row.iter().all(|&v| v == hits as f32), "row {r}");
        }
    }

    #[test]
    fn l2_probe_reads_every_element_each_repeat() {
        let len = 512u32;
        let buf: Vec<u128> = vec![0; len as usize / 4]; // 16-byte aligned storage
        let p = buf.as_ptr() as *mut f32;
        for i in 0..len as usize {
            unsafe { *p.add(i) = 1.0 };
        }
        let mut out = vec![0.0f32; 2 * 32];
        unsafe {
            EmuLaunch::new(2, 32)
                .raw(p)
                .arg(len)
                .arg(3)
                .ptr_mut(&mut out)
                .run(&super::ceiling_l2_read_f32::EMU)
        };
        // Each block's threads together read len elements 3 times.
        for b in 0..2 {
            let s: f32 = out[b * 32..(b + 1) * 32].iter().sum();
            assert_eq!(s, 3.0 * len as f32);
        }
    }

    #[test]
    fn fma_probe_writes_every_thread() {
        let mut out = vec![f32::NAN; 64];
        unsafe {
            EmuLaunch::new(2, 32)
                .arg(10)
                .arg(1.0f32)
                .ptr_mut(&mut out)
                .run(&super::ceiling_fma_f32::EMU)
        };
        assert!(out.iter().all(|v| v.is_finite()));
    }
}
