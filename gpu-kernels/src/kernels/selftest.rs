//! Kernels that exercise the device layer itself (barriers, shared memory, shuffles, atomics);
//! their tests run them on the emulator against plain Rust.
use crate::dev::*;

kernel! {
    /// Each block sums `block_dim` consecutive elements of `x` with a shared-memory tree
    /// reduction (dynamic shared memory of `block_dim` f32, power-of-two block), writes its
    /// partial to `partials[block]` and adds it atomically to `total`.
    pub unsafe fn block_reduce_sum_f32(x: *const f32, n: u32, partials: *mut f32, total: *mut f32) {
        let s = dynamic_shared::<f32>();
        let t = thread_idx_x();
        let i = block_idx_x() * block_dim_x() + t;
        *s.add(t as usize) = if i < n { *x.add(i as usize) } else { 0.0 };
        sync_threads();
        let mut half = block_dim_x() / 2;
        while half > 0 {
            if t < half {
                *s.add(t as usize) += *s.add((t + half) as usize);
            }
            sync_threads();
            half /= 2;
        }
        if t == 0 {
            *partials.add(block_idx_x() as usize) = *s;
            atomic_add_f32(total, *s);
        }
    }
}

kernel! {
    /// Each warp sums 32 consecutive elements by butterfly shuffles; lane 0 writes the warp's
    /// sum to `out[global warp]`, and every lane checks it received the same total (a mismatch
    /// adds 1 to `mismatches`).
    pub unsafe fn warp_reduce_sum_f32(x: *const f32, n: u32, out: *mut f32, mismatches: *mut u32) {
        let i = block_idx_x() * block_dim_x() + thread_idx_x();
        let v = if i < n { *x.add(i as usize) } else { 0.0 };
        let total = warp_sum_f32(v);
        let lane0 = shfl_idx_f32(total, 0);
        if lane0.to_bits() != total.to_bits() {
            atomic_add_u32(mismatches, 1);
        }
        if lane_id() == 0 {
            *out.add((i / WARP_SIZE) as usize) = total;
        }
    }
}

kernel! {
    /// Reverses each block's 128-element slice through a statically sized shared array.
    pub unsafe fn static_shared_reverse_u32(x: *const u32, out: *mut u32) {
        let s = crate::static_shared!(SELFTEST_REVERSE: [u32; 128]);
        let t = thread_idx_x() as usize;
        let base = block_idx_x() as usize * 128;
        *s.add(t) = *x.add(base + t);
        sync_threads();
        *out.add(base + t) = *s.add(127 - t);
    }
}

#[cfg(test)]
mod tests {
    use crate::emu::EmuLaunch;

    fn pseudo_random(n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| ((i * 2654435761) % 1000) as f32 / 250.0 - 2.0)
            .collect()
    }

    #[test]
    fn shared_memory_block_reduction_matches_plain_rust() {
        let n = 1000u32; // not a multiple of the block: the last block is partial
        let x = pseudo_random(n as usize);
        let block = 256u32;
        let blocks = n.div_ceil(block);
        let mut partials = vec![f32::NAN; blocks as usize];
        let mut total = 0.0f32;
        unsafe {
            EmuLaunch::new(blocks, block)
                .shared(block as usize * 4)
                .ptr(&x)
                .arg(n)
                .ptr_mut(&mut partials)
                .raw(&mut total as *mut f32)
                .run(&super::block_reduce_sum_f32::EMU)
        };
        for (b, p) in partials.iter().enumerate() {
            let lo = b * block as usize;
            let hi = (lo + block as usize).min(n as usize);
            let expect: f64 = x[lo..hi].iter().map(|&v| v as f64).sum();
            assert!(
                (*p as f64 - expect).abs() < 1e-3,
                "block {b}: {p} vs {expect}"
            );
        }
        let expect: f64 = x.iter().map(|&v| v as f64).sum();
        assert!((total as f64 - expect).abs() < 1e-2, "{total} vs {expect}");
    }

    #[test]
    fn warp_shuffle_reduction_matches_plain_rust() {
        let n = 200u32;
        let x = pseudo_random(n as usize);
        let block = 96u32; // three warps per block
        let blocks = n.div_ceil(block);
        let warps = (blocks * block / 32) as usize;
        let mut out = vec![f32::NAN; warps];
        let mut mismatches = 0u32;
        unsafe {
            EmuLaunch::new(blocks, block)
                .ptr(&x)
                .arg(n)
                .ptr_mut(&mut out)
                .raw(&mut mismatches as *mut u32)
                .run(&super::warp_reduce_sum_f32::EMU)
        };
        assert_eq!(mismatches, 0, "every lane must receive the same total");
        for (w, got) in out.iter().enumerate() {
            let lo = (w * 32).min(n as usize);
            let hi = ((w + 1) * 32).min(n as usize);
            let expect: f64 = x[lo..hi].iter().map(|&v| v as f64).sum();
            assert!(
                (*got as f64 - expect).abs() < 1e-4,
                "warp {w}: {got} vs {expect}"
            );
        }
    }

    #[test]
    fn static_shared_memory_is_per_block() {
        let x: Vec<u32> = (0..384).collect();
        let mut out = vec![0u32; 384];
        unsafe {
            EmuLaunch::new(3, 128)
                .ptr(&x)
                .ptr_mut(&mut out)
                .run(&super::static_shared_reverse_u32::EMU)
        };
        for b in 0..3 {
            for t in 0..128 {
                assert_eq!(out[b * 128 + t], (b * 128 + 127 - t) as u32);
            }
        }
    }
}
