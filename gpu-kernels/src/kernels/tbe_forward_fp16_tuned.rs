//! Problem 3, `tbe_forward_fp16`: the project's tuned kernel,
//! [`tbe_forward_fp16_warp_per_bag`] (every table in one launch, one warp per bag). The
//! reference, the eager `Model`'s launch sequence, is in [`super::tbe_forward_fp16`].
use super::bag_chunk::{add_chunk, total, IN_FLIGHT};
use crate::dev::*;

kernel! {
    /// The project's tuned kernel: every table in one launch, one warp per (table, sample) bag
    /// in the table-major order of `offsets` (consecutive warps walk one table's samples, so
    /// its hot rows are shared in L2 while it is read). Each lane owns four consecutive columns,
    /// read with one 8-byte non-coherent load of four fp16 and widened exactly; a bag's indices
    /// are loaded 32 at a time and broadcast by shuffles, four lookups in flight per lane, fp32
    /// accumulation, one 16-byte store into the table's column slice of `out`. Needs D % 4 == 0
    /// (the problem's D = 128; a scalar path covers the rest). Launch: block (256, 1, 1), grid
    /// ceil_div(T·B·32, 256).
    pub unsafe fn tbe_forward_fp16_warp_per_bag(
        weight: *const u16,
        table_offsets: *const i64,
        indices: *const i64,
        offsets: *const i64,
        out: *mut f32,
        num_tables: i64,
        batch: i64,
        dim: i64,
    ) {
        let bag = ((block_idx_x() * block_dim_x() + thread_idx_x()) / WARP_SIZE) as i64;
        if bag >= num_tables * batch {
            return; // whole warps leave together
        }
        let lane = lane_id() as i64;
        let (table, sample) = (bag / batch, bag % batch);
        let (begin, end) = (load_nc_i64(offsets.add(bag as usize)), load_nc_i64(offsets.add(bag as usize + 1)));
        let rows = weight.add((load_nc_i64(table_offsets.add(table as usize)) * dim) as usize);
        let out = out.add((sample * num_tables * dim + table * dim) as usize);
        let vec4 = dim % 4 == 0;
        let (step, per_lane) = if vec4 { (WARP_SIZE as i64 * 4, 4) } else { (WARP_SIZE as i64, 1) };
        let mut pass = 0;
        while pass < dim {
            let col = pass + lane * per_lane;
            let active = col < dim;
            let mut acc = [[0.0f32; 4]; IN_FLIGHT];
            let mut base = begin;
            while base < end {
                let count = (end - base).min(WARP_SIZE as i64) as usize;
                let mine = if (lane as usize) < count {
                    load_nc_i64(indices.add((base + lane) as usize))
                } else {
                    0
                };
                // The path is chosen per chunk, outside the loads (uniform across the grid).
                if vec4 {
                    add_chunk(mine, count, active, &mut acc, |r| {
                        load_nc_u16x4(rows.add((r * dim + col) as usize)).map(f16_to_f32)
                    });
                } else {
                    add_chunk(mine, count, active, &mut acc, |r| {
                        [f16_to_f32(*rows.add((r * dim + col) as usize)), 0.0, 0.0, 0.0]
                    });
                }
                base += WARP_SIZE as i64;
            }
            if active {
                let sum = total(&acc);
                if vec4 {
                    store_f32x4(out.add(col as usize), sum);
                } else {
                    *out.add(col as usize) = sum[0];
                }
            }
            pass += step;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::tbe_forward_fp16_warp_per_bag;
    use crate::dev::f32_to_f16_rn;
    use crate::kernels::tbe_forward_fp16::tests::f16_value;

    /// The tuned kernel on the emulator against an f64 sum: T tables of different sizes, bags
    /// of 0..70 lookups (several 32-chunks, remainders of the 4-wide unroll), for D = 8 (the
    /// 8-byte path) and D = 6 (the scalar path).
    #[test]
    fn the_tuned_kernel_sums_every_bag_of_every_table() {
        use crate::emu::EmuLaunch;
        for d in [8usize, 6] {
            let (t, b) = (3usize, 21usize);
            let rows_per_table = [5usize, 17, 64];
            let mut table_offsets = vec![0i64];
            for r in rows_per_table {
                table_offsets.push(table_offsets.last().unwrap() + r as i64);
            }
            let e = *table_offsets.last().unwrap() as usize;
            let weight: Vec<u16> = (0..e * d)
                .map(|i| f32_to_f16_rn(((i * 7919) % 2003) as f32 / 1001.0 - 1.0))
                .collect();
            let (mut indices, mut offsets) = (Vec::new(), vec![0i64]);
            for (table, &rows) in rows_per_table.iter().enumerate() {
                for sample in 0..b {
                    let len = (sample * 13 + table * 5) % 71;
                    for j in 0..len {
                        indices.push(((j * 31 + sample) % rows) as i64);
                    }
                    offsets.push(indices.len() as i64);
                }
            }
            let mut out = vec![f32::NAN; b * t * d];
            unsafe {
                EmuLaunch::new(((t * b * 32).div_ceil(256)) as u32, 256)
                    .ptr(&weight)
                    .ptr(&table_offsets)
                    .ptr(&indices)
                    .ptr(&offsets)
                    .ptr_mut(&mut out)
                    .arg(t)
                    .arg(b)
                    .arg(d)
                    .run(&tbe_forward_fp16_warp_per_bag::EMU);
            }
            for table in 0..t {
                for sample in 0..b {
                    let bag = table * b + sample;
                    for c in 0..d {
                        let want: f64 = (offsets[bag]..offsets[bag + 1])
                            .map(|j| {
                                let row =
                                    table_offsets[table] as usize + indices[j as usize] as usize;
                                f16_value(weight[row * d + c])
                            })
                            .sum();
                        let got = out[sample * t * d + table * d + c] as f64;
                        assert!(
                            (got - want).abs() <= 1e-5 * (1.0 + want.abs()),
                            "D {d} table {table} sample {sample} column {c}: {got} vs {want}"
                        );
                    }
                }
            }
        }
    }
}
