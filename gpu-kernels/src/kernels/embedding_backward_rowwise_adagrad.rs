//! Problem 5, `embedding_backward_rowwise_adagrad`: one training step of one table. For each
//! distinct row r looked up by the bags: g = Σ grad_output[b] over every lookup of r (bag b),
//! m[r] += mean(g²), W[r] -= lr·g / (sqrt(m[r]) + eps). Rows not looked up are left untouched.
//!
//! The reference is a multi-kernel plan in the shape of the eager composition (find the
//! distinct rows, reduce the gradient per distinct row, update), with a hash table in scratch
//! instead of a sort to find the distinct rows:
//! 1. [`adagrad_hash_clear`] empties the table (`capacity` u64 keys, all `EMPTY`) and zeroes the
//!    distinct-row counter;
//! 2. [`adagrad_hash_insert`]: one thread per lookup inserts its row by linear probing with a
//!    64-bit compare-and-swap;
//! 3. [`adagrad_hash_assign`]: one thread per table slot gives each occupied slot a compact id
//!    (an atomic counter) and records the row under that id (`rows`);
//! 4. [`adagrad_zero_rows`] zeroes the first U rows of the gradient accumulator (U = the count);
//! 5. [`adagrad_accumulate`]: one thread per (bag, column), PyTorch's (32, 8) blocks and
//!    grid-stride loop: for each lookup of the bag it finds the row's id in the table and adds
//!    `grad_output[bag, column]` to the accumulator with an fp32 atomic add (as `index_add_`);
//! 6. [`adagrad_update`]: one warp per distinct row: mean of g² by a warp reduction, the new
//!    momentum, then every column of the weight row.
use crate::dev::*;

/// An empty hash-table slot (no row id is 2^64 − 1).
pub const EMPTY: u64 = u64::MAX;

/// Home slot of `key` in a table of `capacity` (< 2^32) slots: a multiplicative hash mapped to
/// the range by a multiply-shift.
#[inline(always)]
pub fn home_slot(key: u64, capacity: u64) -> u64 {
    let h = key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
    (h * capacity) >> 32
}

/// Slot holding `key` in a fully built table (the key must be present).
#[inline(always)]
unsafe fn find_slot(keys: *const u64, capacity: u64, key: u64) -> u64 {
    let mut pos = home_slot(key, capacity);
    while *keys.add(pos as usize) != key {
        pos += 1;
        if pos == capacity {
            pos = 0;
        }
    }
    pos
}

#[inline(always)]
fn global_thread() -> u64 {
    block_idx_x() as u64 * block_dim_x() as u64 + thread_idx_x() as u64
}

kernel! {
    /// Launch: block (256, 1, 1), grid ceil_div(capacity, 256).
    pub unsafe fn adagrad_hash_clear(keys: *mut u64, capacity: i64, distinct: *mut u32) {
        let i = global_thread();
        if i < capacity as u64 {
            *keys.add(i as usize) = EMPTY;
        }
        if i == 0 {
            *distinct = 0;
        }
    }
}

kernel! {
    /// Launch: block (256, 1, 1), grid ceil_div(max(N, 1), 256). `capacity` must exceed the
    /// number of distinct rows (the plan uses 2·max(N, 1)).
    pub unsafe fn adagrad_hash_insert(indices: *const i64, num_indices: i64, keys: *mut u64, capacity: i64) {
        let j = global_thread();
        if j >= num_indices as u64 {
            return;
        }
        insert_key(keys, *indices.add(j as usize) as u64, capacity as u64);
    }
}

/// Puts `key` into the open-addressing table `keys` of `capacity` slots unless it is there
/// (linear probing from [`home_slot`], a 64-bit CAS per empty slot tried) and returns its slot.
/// `capacity` must exceed the distinct keys.
#[inline(always)]
pub unsafe fn insert_key(keys: *mut u64, key: u64, capacity: u64) -> u64 {
    let mut pos = home_slot(key, capacity);
    loop {
        let slot = keys.add(pos as usize);
        let seen = load_volatile_u64(slot);
        if seen == key {
            return pos;
        }
        if seen == EMPTY {
            let before = atomic_cas_u64(slot, EMPTY, key);
            if before == EMPTY || before == key {
                return pos;
            }
        }
        pos += 1;
        if pos == capacity {
            pos = 0;
        }
    }
}

kernel! {
    /// Launch: block (256, 1, 1), grid ceil_div(capacity, 256).
    pub unsafe fn adagrad_hash_assign(
        keys: *const u64,
        capacity: i64,
        slot_id: *mut u32,
        rows: *mut i64,
        distinct: *mut u32,
    ) {
        let i = global_thread();
        if i >= capacity as u64 {
            return;
        }
        let key = *keys.add(i as usize);
        if key == EMPTY {
            return;
        }
        let id = atomic_add_u32(distinct, 1);
        *slot_id.add(i as usize) = id;
        *rows.add(id as usize) = key as i64;
    }
}

kernel! {
    /// Launch: block (256, 1, 1), any grid (grid-stride; the plan uses
    /// min(4096, ceil_div(max(N, 1)·D, 256))). Zeroes `grad_sum[0 .. U·D]`.
    pub unsafe fn adagrad_zero_rows(grad_sum: *mut f32, distinct: *const u32, dim: i64) {
        let total = *distinct as u64 * dim as u64;
        let stride = grid_dim_x() as u64 * block_dim_x() as u64;
        let mut e = global_thread();
        while e < total {
            *grad_sum.add(e as usize) = 0.0;
            e += stride;
        }
    }
}

kernel! {
    /// Launch: block (32, 8, 1), grid min(1024, ceil_div(max(B, 1)·ceil_div(D, 32), 8)).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn adagrad_accumulate(
        grad_output: *const f32,
        indices: *const i64,
        offsets: *const i64,
        keys: *const u64,
        slot_id: *const u32,
        capacity: i64,
        grad_sum: *mut f32,
        num_bags: i64,
        dim: i64,
    ) {
        let chunks_per_bag = (dim + block_dim_x() as i64 - 1) / block_dim_x() as i64;
        let num_chunks = num_bags * chunks_per_bag;
        let mut chunk = (block_idx_x() * block_dim_y() + thread_idx_y()) as i64;
        let stride = (grid_dim_x() * block_dim_y()) as i64;
        while chunk < num_chunks {
            let feature = (chunk % chunks_per_bag) * block_dim_x() as i64 + thread_idx_x() as i64;
            if feature < dim {
                let bag = chunk / chunks_per_bag;
                let g = *grad_output.add((bag * dim + feature) as usize);
                let end = *offsets.add(bag as usize + 1);
                let mut emb = *offsets.add(bag as usize);
                while emb < end {
                    let key = *indices.add(emb as usize) as u64;
                    let id = *slot_id.add(find_slot(keys, capacity as u64, key) as usize);
                    atomic_add_f32(grad_sum.add((id as i64 * dim + feature) as usize), g);
                    emb += 1;
                }
            }
            chunk += stride;
        }
    }
}

kernel! {
    /// Launch: block (256, 1, 1), grid ceil_div(max(N, 1)·32, 256): warp w updates distinct
    /// row w when w < U.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn adagrad_update(
        rows: *const i64,
        distinct: *const u32,
        grad_sum: *const f32,
        weight: *mut f32,
        momentum: *mut f32,
        lr: f32,
        eps: f32,
        dim: i64,
    ) {
        let warp = global_thread() / WARP_SIZE as u64;
        if warp >= *distinct as u64 {
            return; // warp-uniform
        }
        let lane = lane_id() as i64;
        let row = *rows.add(warp as usize);
        // Lane 0 reads the old momentum (and alone stores the new one, below); the others get it
        // by a shuffle, so no lane can read a value lane 0 already replaced.
        let mine = if lane == 0 { *momentum.add(row as usize) } else { 0.0 };
        let m_old = shfl_idx_f32(mine, 0);
        let g = grad_sum.add((warp as i64 * dim) as usize);
        let mut sum_sq = 0.0f32;
        let mut c = lane;
        while c < dim {
            let v = *g.add(c as usize);
            sum_sq = fma_f32(v, v, sum_sq);
            c += WARP_SIZE as i64;
        }
        let sum_sq = warp_sum_f32(sum_sq);
        let m = m_old + sum_sq / dim as f32;
        let denom = sqrt_f32(m) + eps;
        let w = weight.add((row * dim) as usize);
        let mut c = lane;
        while c < dim {
            *w.add(c as usize) -= lr * *g.add(c as usize) / denom;
            c += WARP_SIZE as i64;
        }
        if lane == 0 {
            *momentum.add(row as usize) = m;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emu::{launch_kernel, LaunchConfig};
    use std::collections::BTreeSet;

    fn cfg(threads: usize) -> LaunchConfig {
        LaunchConfig {
            grid: [threads.div_ceil(256).max(1) as u32, 1, 1],
            block: [256, 1, 1],
            shared_bytes: 0,
        }
    }

    /// Builds the table for `indices` with `capacity` slots; returns (keys, slot ids, rows by
    /// id, distinct count).
    fn build(indices: &[i64], capacity: usize) -> (Vec<u64>, Vec<u32>, Vec<i64>, u32) {
        let mut keys = vec![0u64; capacity];
        let mut slot_id = vec![u32::MAX; capacity];
        let mut rows = vec![-7i64; indices.len().max(1)];
        let mut distinct = 12345u32;
        let (k, s, r, d) = (
            keys.as_mut_ptr() as u64,
            slot_id.as_mut_ptr() as u64,
            rows.as_mut_ptr() as u64,
            &mut distinct as *mut u32 as u64,
        );
        let cap = capacity as u64;
        unsafe {
            launch_kernel(&adagrad_hash_clear::EMU, &cfg(capacity), &[k, cap, d]).unwrap();
            let args = [indices.as_ptr() as u64, indices.len() as u64, k, cap];
            launch_kernel(&adagrad_hash_insert::EMU, &cfg(indices.len()), &args).unwrap();
            launch_kernel(
                &adagrad_hash_assign::EMU,
                &cfg(capacity),
                &[k, cap, s, r, d],
            )
            .unwrap();
        }
        (keys, slot_id, rows, distinct)
    }

    #[test]
    fn the_table_holds_each_distinct_row_once_under_collisions_and_wraparound() {
        // Keys that share home slots in a table of 2N slots, many repeats, and a home slot
        // at the very end so probing wraps to slot 0.
        let capacity = 64usize;
        let last_home = (0u64..10_000).find(|&k| home_slot(k, 64) == 63).unwrap();
        let same_home: Vec<i64> = (0u64..100_000)
            .filter(|&k| home_slot(k, 64) == 60)
            .take(6)
            .map(|k| k as i64)
            .collect();
        let mut indices = Vec::new();
        for rep in 0..4 {
            indices.extend(&same_home);
            indices.push(last_home as i64);
            indices.extend([rep, 1, 2, 3]);
        }
        let want: BTreeSet<i64> = indices.iter().copied().collect();
        assert!(want.len() < capacity);
        let (keys, slot_id, rows, distinct) = build(&indices, capacity);
        assert_eq!(distinct as usize, want.len());
        let got: BTreeSet<i64> = rows[..want.len()].iter().copied().collect();
        assert_eq!(got, want, "every distinct row gets exactly one id");
        let occupied: Vec<usize> = (0..capacity).filter(|&i| keys[i] != EMPTY).collect();
        assert_eq!(occupied.len(), want.len(), "no key is stored twice");
        for &i in &occupied {
            assert_eq!(rows[slot_id[i] as usize] as u64, keys[i]);
            assert_eq!(unsafe { find_slot(keys.as_ptr(), 64, keys[i]) }, i as u64);
        }
        assert!(keys[0] != EMPTY, "a probe wrapped around to slot 0");
    }

    #[test]
    fn an_empty_batch_leaves_an_empty_table() {
        let (keys, _, _, distinct) = build(&[], 2);
        assert_eq!(distinct, 0);
        assert!(keys.iter().all(|&k| k == EMPTY));
    }

    #[test]
    fn the_update_is_rowwise_adagrad() {
        // Two distinct rows (ids 0 and 1 map to rows 3 and 0), D = 40: more columns than lanes.
        let d = 40usize;
        let rows = [3i64, 0];
        let distinct = 2u32;
        let g: Vec<f32> = (0..2 * d).map(|i| (i as f32 - 37.0) / 16.0).collect();
        let mut weight: Vec<f32> = (0..4 * d).map(|i| (i % 7) as f32 / 8.0 - 0.4).collect();
        let mut momentum = vec![0.5f32, 0.25, 0.75, 1.5];
        let (w0, m0) = (weight.clone(), momentum.clone());
        let (lr, eps) = (0.01f32, 1e-8f32);
        let args = [
            rows.as_ptr() as u64,
            &distinct as *const u32 as u64,
            g.as_ptr() as u64,
            weight.as_mut_ptr() as u64,
            momentum.as_mut_ptr() as u64,
            lr.to_bits() as u64,
            eps.to_bits() as u64,
            d as u64,
        ];
        let cfg = LaunchConfig {
            grid: [1, 1, 1],
            block: [96, 1, 1],
            shared_bytes: 0,
        };
        unsafe { launch_kernel(&adagrad_update::EMU, &cfg, &args).unwrap() };
        for (id, &r) in rows.iter().enumerate() {
            let r = r as usize;
            let gr = &g[id * d..(id + 1) * d];
            let m = m0[r] as f64 + gr.iter().map(|&x| (x as f64).powi(2)).sum::<f64>() / d as f64;
            assert!((momentum[r] as f64 - m).abs() < 1e-5 * m, "row {r}");
            for c in 0..d {
                let want = w0[r * d + c] as f64 - 0.01 * gr[c] as f64 / (m.sqrt() + 1e-8);
                assert!(
                    (weight[r * d + c] as f64 - want).abs() < 1e-6,
                    "row {r} col {c}"
                );
            }
        }
        for r in [1usize, 2] {
            assert_eq!(momentum[r], m0[r]);
            assert_eq!(weight[r * d..(r + 1) * d], w0[r * d..(r + 1) * d]);
        }
    }
}
