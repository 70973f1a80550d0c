//! Probes of the device's ceilings, run once per benchmark run: the fp32 FMA rate and the L2
//! read bandwidth (one launch whose blocks re-read an L2-resident buffer many times).
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

#[cfg(test)]
mod tests {
    use crate::emu::EmuLaunch;

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
