//! Relabelling row ids on the device, so the runner can give every timed run inputs no earlier
//! run saw: `dst[i] = (a · src[i] + b) mod bound`, a bijection of `0..bound` when `a` is coprime
//! to `bound`. The multiset of row popularities (the skew, the bag lengths) stays as it was; the
//! rows, and so the answer, change.
use crate::dev::*;

kernel! {
    /// `dst[i] = (a * src[i] + b) % bound` for `i < n` (grid-stride; any grid). Ids outside
    /// `0..bound` are copied as they are. `a`, `b` and the ids must be below 2^32, so the
    /// product fits 64 bits (the runner relabels only tables of fewer than 2^32 rows).
    pub unsafe fn relabel_rows(src: *const i64, dst: *mut i64, n: u64, bound: u64, a: u64, b: u64) {
        let stride = grid_dim_x() as u64 * block_dim_x() as u64;
        let mut i = block_idx_x() as u64 * block_dim_x() as u64 + thread_idx_x() as u64;
        while i < n {
            let v = *src.add(i as usize);
            *dst.add(i as usize) = if (v as u64) < bound {
                ((a * v as u64 + b) % bound) as i64
            } else {
                v
            };
            i += stride;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::emu::EmuLaunch;

    #[test]
    fn an_affine_map_with_a_coprime_factor_is_a_bijection_and_skips_bad_ids() {
        let bound = 1000u64;
        let src: Vec<i64> = (0..bound as i64).chain([-1, 1000, 5000]).collect();
        let mut dst = vec![0i64; src.len()];
        unsafe {
            EmuLaunch::new(3, 64)
                .ptr(&src)
                .ptr_mut(&mut dst)
                .arg(src.len())
                .arg(bound)
                .arg(7)
                .arg(123)
                .run(&super::relabel_rows::EMU)
        };
        let mut seen: Vec<i64> = dst[..bound as usize].to_vec();
        assert_eq!(dst[5], 7 * 5 + 123);
        assert_eq!(dst[200], (7 * 200 + 123) % 1000);
        seen.sort_unstable();
        assert_eq!(seen, (0..bound as i64).collect::<Vec<_>>(), "a permutation");
        assert_eq!(
            &dst[bound as usize..],
            &[-1, 1000, 5000],
            "out of range: unchanged"
        );
    }
}
