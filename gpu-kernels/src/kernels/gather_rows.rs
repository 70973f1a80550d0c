//! Gathering rows of a device buffer into a compact one, so the runner can check the rows an
//! in-place update changes (copying only those back) while a fingerprint covers the rest.
use crate::dev::*;

kernel! {
    /// `dst[u * width + j] = src[rows[u] * width + j]` for every `u < n_rows` and `j < width`,
    /// in 32-bit words (grid-stride over the `n_rows * width` words of `dst`; any grid). `src`
    /// holds `src_rows` rows: an id outside `0..src_rows` is skipped (its row of `dst` keeps
    /// what it held), so a bad id never reads past the buffer.
    pub unsafe fn gather_rows(src: *const u32, src_rows: u64, rows: *const i64, n_rows: u64, width: u64, dst: *mut u32) {
        let total = n_rows.saturating_mul(width);
        let stride = grid_dim_x() as u64 * block_dim_x() as u64;
        let mut i = block_idx_x() as u64 * block_dim_x() as u64 + thread_idx_x() as u64;
        while i < total {
            let u = i / width;
            // A negative id becomes a huge one: skipped with the ids past the end.
            let row = *rows.add(u as usize) as u64;
            if row < src_rows {
                let j = i - u * width;
                *dst.add(i as usize) = *src.add((row * width + j) as usize);
            }
            i += stride;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::emu::EmuLaunch;

    /// The kernel on the emulator, `dst` starting as `fill`.
    fn gathered(src: &[u32], width: usize, rows: &[i64], fill: u32) -> Vec<u32> {
        let mut dst = vec![fill; rows.len() * width];
        unsafe {
            EmuLaunch::new(3, 64)
                .ptr(src)
                .arg(src.len() / width)
                .ptr(rows)
                .arg(rows.len())
                .arg(width)
                .ptr_mut(&mut dst)
                .run(&super::gather_rows::EMU)
        };
        dst
    }

    #[test]
    fn copies_each_listed_row_as_a_host_loop_does_and_skips_bad_ids() {
        let w: usize = 37; // not a multiple of the block, so rows straddle threads
        let src: Vec<u32> = (0..50 * w as u32)
            .map(|i| i.wrapping_mul(2654435761))
            .collect();
        // Unsorted, repeated, first and last rows, more words than one pass of the grid.
        let rows: Vec<i64> = vec![3, 49, 0, 3, 17, 48, 1, 22, 9, 9, 30, 2];
        let mut want = Vec::new();
        for &r in &rows {
            let r = r as usize;
            want.extend_from_slice(&src[r * w..(r + 1) * w]);
        }
        assert!(want.len() > 3 * 64);
        assert_eq!(gathered(&src, w, &rows, 0), want);

        // Ids outside the table leave their row of `dst` alone, the others are still copied.
        let bad = [5, -1, 50, 7];
        let got = gathered(&src, w, &bad, 0xDEAD_BEEF);
        assert_eq!(got[..w], src[5 * w..6 * w]);
        assert!(got[w..3 * w].iter().all(|&x| x == 0xDEAD_BEEF));
        assert_eq!(got[3 * w..], src[7 * w..8 * w]);

        assert!(
            gathered(&src, w, &[], 0).is_empty(),
            "no rows: nothing done"
        );
    }
}
