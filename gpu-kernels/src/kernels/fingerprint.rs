//! A fingerprint of a device buffer, so the runner can tell whether a kernel wrote its inputs
//! without copying gigabytes back to the host: every 32-bit word is mixed with its position
//! and a secret key (SplitMix64's finaliser) and the results are summed. Any change to one word
//! changes the sum unless another change cancels it exactly; without the key (drawn by each
//! runner process, passed only to this kernel) a cheating kernel cannot compute any word's
//! contribution, so it cannot arrange such a cancellation.
use crate::dev::*;

/// SplitMix64's finaliser.
#[inline(always)]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The contribution of word `i` holding `w`, under `key`.
#[inline(always)]
pub fn word_hash(key: u64, i: u64, w: u32) -> u64 {
    mix64((w as u64) ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ key)
}

kernel! {
    /// Adds Σ word_hash(key, i, data[i]) over `words` 32-bit words to `*out` (grid-stride; any
    /// grid).
    pub unsafe fn fingerprint_words(data: *const u32, words: u64, out: *mut u64, key: u64) {
        let stride = grid_dim_x() as u64 * block_dim_x() as u64;
        let mut i = block_idx_x() as u64 * block_dim_x() as u64 + thread_idx_x() as u64;
        let mut acc = 0u64;
        while i < words {
            acc = acc.wrapping_add(word_hash(key, i, *data.add(i as usize)));
            i += stride;
        }
        atomic_add_u64(out, acc);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emu::EmuLaunch;

    fn fingerprint(data: &[u32], key: u64) -> u64 {
        let mut out = 0u64;
        unsafe {
            EmuLaunch::new(3, 64)
                .ptr(data)
                .arg(data.len())
                .raw(&mut out as *mut u64)
                .arg(key)
                .run(&super::fingerprint_words::EMU)
        };
        out
    }

    #[test]
    fn matches_the_host_formula_and_sees_any_change() {
        let data: Vec<u32> = (0..1000u32).map(|i| i.wrapping_mul(2654435761)).collect();
        let host = data.iter().enumerate().fold(0u64, |a, (i, &w)| {
            a.wrapping_add(word_hash(42, i as u64, w))
        });
        assert_eq!(fingerprint(&data, 42), host);
        assert_ne!(fingerprint(&data, 43), host, "the key matters");
        let mut changed = data.clone();
        changed[517] ^= 1;
        assert_ne!(fingerprint(&changed, 42), host);
        let mut swapped = data.clone();
        swapped.swap(3, 4);
        assert_ne!(fingerprint(&swapped, 42), host, "positions matter");
    }
}
