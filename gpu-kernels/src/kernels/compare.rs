//! The scale-invariant float comparison of an output with its oracle (or with another kernel's
//! output), on the device, so the runner never copies a gigabyte output back to check it: each
//! block reduces the sums and maxima the host check needs ([`FloatAcc`]) over its share of the
//! elements and writes them to its slot of `partials`; the host merges the few slots in block
//! order. The per-element rules are those of `bench_problems::check`'s host test: where the
//! oracle is NaN or infinite the output must be the same (and stays out of the norms); any
//! other non-finite element counts as non-finite; poison (the unwritten pattern) is counted
//! with the index of its first element.
use crate::dev::*;

/// Element types [`compare_floats`] reads, by code.
pub const DTYPE_F64: u32 = 0;
pub const DTYPE_F32: u32 = 1;
pub const DTYPE_F16: u32 = 2;
pub const DTYPE_BF16: u32 = 3;

/// Threads per block of [`compare_floats`] (its shared-memory reduction is sized for it).
pub const COMPARE_BLOCK: u32 = 256;

/// 64-bit words per block in `partials` ([`FloatAcc::to_words`]).
pub const ACC_WORDS: usize = 8;

/// What the comparison of a run of elements found.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FloatAcc {
    /// Σ (out − ref)² over elements whose oracle and output are finite.
    pub err2: f64,
    /// Σ ref² over elements whose oracle is finite.
    pub ref2: f64,
    /// max |ref| over elements whose oracle is finite.
    pub ref_inf: f64,
    /// The largest |out − ref| (−1 when none) and its index (the lowest on ties).
    pub worst: f64,
    pub worst_index: u64,
    /// Elements that are non-finite where the oracle is finite, or differ where it is not.
    pub non_finite: u64,
    /// Elements holding the poison pattern, and the index of the first (`u64::MAX`: none).
    pub unwritten: u64,
    pub first_unwritten: u64,
}

#[inline(always)]
fn abs(x: f64) -> f64 {
    f64::from_bits(x.to_bits() & !(1u64 << 63))
}

impl FloatAcc {
    /// Nothing seen.
    pub const EMPTY: FloatAcc = FloatAcc {
        err2: 0.0,
        ref2: 0.0,
        ref_inf: 0.0,
        worst: -1.0,
        worst_index: u64::MAX,
        non_finite: 0,
        unwritten: 0,
        first_unwritten: u64::MAX,
    };

    /// Adds element `i`: output `g` (whose raw bits equal the poison when `poisoned`) against
    /// oracle `r`.
    #[inline(always)]
    pub fn add(&mut self, i: u64, g: f64, r: f64, poisoned: bool) {
        if poisoned {
            self.unwritten += 1;
            if i < self.first_unwritten {
                self.first_unwritten = i;
            }
        }
        if !r.is_finite() {
            let same = (g.is_nan() && r.is_nan()) || g == r;
            self.non_finite += (!same) as u64;
        } else if !g.is_finite() {
            self.ref2 += r * r;
            self.ref_inf = self.ref_inf.max(abs(r));
            self.non_finite += 1;
        } else {
            let d = abs(g - r);
            self.err2 += d * d;
            self.ref2 += r * r;
            self.ref_inf = self.ref_inf.max(abs(r));
            if d > self.worst || (d == self.worst && i < self.worst_index) {
                self.worst = d;
                self.worst_index = i;
            }
        }
    }

    /// Both runs of elements together.
    #[inline(always)]
    pub fn merge(&mut self, o: &FloatAcc) {
        self.err2 += o.err2;
        self.ref2 += o.ref2;
        self.ref_inf = self.ref_inf.max(o.ref_inf);
        if o.worst > self.worst || (o.worst == self.worst && o.worst_index < self.worst_index) {
            self.worst = o.worst;
            self.worst_index = o.worst_index;
        }
        self.non_finite += o.non_finite;
        self.unwritten += o.unwritten;
        if o.first_unwritten < self.first_unwritten {
            self.first_unwritten = o.first_unwritten;
        }
    }

    /// The words of one slot of `partials`.
    pub fn to_words(&self) -> [u64; ACC_WORDS] {
        [
            self.err2.to_bits(),
            self.ref2.to_bits(),
            self.ref_inf.to_bits(),
            self.worst.to_bits(),
            self.worst_index,
            self.non_finite,
            self.unwritten,
            self.first_unwritten,
        ]
    }

    /// [`to_words`](Self::to_words) read back.
    pub fn from_words(w: &[u64; ACC_WORDS]) -> FloatAcc {
        FloatAcc {
            err2: f64::from_bits(w[0]),
            ref2: f64::from_bits(w[1]),
            ref_inf: f64::from_bits(w[2]),
            worst: f64::from_bits(w[3]),
            worst_index: w[4],
            non_finite: w[5],
            unwritten: w[6],
            first_unwritten: w[7],
        }
    }
}

/// Element `i` of `p` (of type `dtype`) as f64, with its raw bits.
#[inline(always)]
unsafe fn load(p: *const u8, dtype: u32, i: u64) -> (f64, u64) {
    let i = i as usize;
    match dtype {
        DTYPE_F64 => {
            let b = *(p as *const u64).add(i);
            (f64::from_bits(b), b)
        }
        DTYPE_F32 => {
            let b = *(p as *const u32).add(i);
            (f32::from_bits(b) as f64, b as u64)
        }
        DTYPE_F16 => {
            let b = *(p as *const u16).add(i);
            (f16_to_f32(b) as f64, b as u64)
        }
        _ => {
            let b = *(p as *const u16).add(i);
            (f32::from_bits((b as u32) << 16) as f64, b as u64)
        }
    }
}

kernel! {
    /// Compares `n` elements of `got` (type `got_dtype`; raw bits equal to `poison` count as
    /// unwritten) with `want` (type `want_dtype`) and writes block `b`'s [`FloatAcc`] to words
    /// `partials[8 b .. 8 b + 8]` (grid-stride; any grid of [`COMPARE_BLOCK`]-thread blocks).
    /// With a non-null `base` (of `got`'s type) both sides are compared as updates of it:
    /// `got − base` against `want − base` (an in-place step on a table against another's).
    pub unsafe fn compare_floats(got: *const u8, got_dtype: u32, want: *const u8, want_dtype: u32, n: u64, poison: u64, partials: *mut u64, base: *const u8) {
        let stride = grid_dim_x() as u64 * block_dim_x() as u64;
        let t = thread_idx_x() as usize;
        let mut i = block_idx_x() as u64 * block_dim_x() as u64 + t as u64;
        let mut acc = FloatAcc::EMPTY;
        while i < n {
            let (g, bits) = load(got, got_dtype, i);
            let (r, _) = load(want, want_dtype, i);
            if base.is_null() {
                acc.add(i, g, r, bits == poison);
            } else {
                let (b, _) = load(base, got_dtype, i);
                acc.add(i, g - b, r - b, bits == poison);
            }
            i += stride;
        }
        let slots = crate::static_shared!(COMPARE_ACC: [crate::kernels::compare::FloatAcc; crate::kernels::compare::COMPARE_BLOCK as usize]);
        *slots.add(t) = acc;
        sync_threads();
        let mut half = COMPARE_BLOCK as usize / 2;
        while half > 0 {
            if t < half {
                let other = *slots.add(t + half);
                (*slots.add(t)).merge(&other);
            }
            sync_threads();
            half /= 2;
        }
        if t == 0 {
            let words = (*slots).to_words();
            let out = partials.add(block_idx_x() as usize * ACC_WORDS);
            for (k, w) in words.iter().enumerate() {
                *out.add(k) = *w;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emu::EmuLaunch;

    /// The kernel on the emulator over f32 `got` and f64 `want`, merged in block order.
    fn compared(got: &[f32], want: &[f64], poison: u32, blocks: u32) -> FloatAcc {
        let mut partials = vec![0u64; blocks as usize * ACC_WORDS];
        unsafe {
            EmuLaunch::new(blocks, COMPARE_BLOCK)
                .ptr(got)
                .arg(DTYPE_F32)
                .ptr(want)
                .arg(DTYPE_F64)
                .arg(got.len())
                .arg(poison)
                .ptr_mut(&mut partials)
                .arg(0)
                .run(&super::compare_floats::EMU)
        };
        let mut acc = FloatAcc::EMPTY;
        for slot in partials.chunks(ACC_WORDS) {
            acc.merge(&FloatAcc::from_words(slot.try_into().unwrap()));
        }
        acc
    }

    #[test]
    fn blocks_reduce_to_what_one_serial_pass_finds() {
        let poison = 0x7FBA_DBADu32;
        let n = 3000;
        let want: Vec<f64> = (0..n)
            .map(|i| ((i * 37 % 101) as f64 - 50.0) * 0.125)
            .collect();
        let mut got: Vec<f32> = want.iter().map(|&r| r as f32 + 1e-4).collect();
        got[2999] += 0.5; // the worst, far from the first block
        got[1234] = f32::from_bits(poison);
        got[17] = f32::INFINITY;
        let mut want = want;
        want[40] = f64::NAN; // must be matched by a NaN
        got[40] = f32::NAN;
        want[41] = f64::NEG_INFINITY;
        got[41] = 3.0; // differs where the oracle is not finite
        let mut serial = FloatAcc::EMPTY;
        for i in 0..n {
            serial.add(i as u64, got[i] as f64, want[i], got[i].to_bits() == poison);
        }
        for blocks in [1, 3, 7] {
            let acc = compared(&got, &want, poison, blocks);
            assert_eq!(acc.worst_index, 2999, "{blocks} blocks");
            assert_eq!(acc.unwritten, 1);
            assert_eq!(acc.first_unwritten, 1234);
            // The poison is a NaN where the oracle is finite; the infinity; the −∞ mismatch.
            assert_eq!(acc.non_finite, 3);
            assert_eq!(acc.ref_inf, serial.ref_inf);
            assert_eq!(acc.worst, serial.worst);
            assert!((acc.err2 - serial.err2).abs() <= 1e-12 * serial.err2);
            assert!((acc.ref2 - serial.ref2).abs() <= 1e-12 * serial.ref2);
        }
    }

    #[test]
    fn ties_take_the_lowest_index_and_half_types_convert_exactly() {
        let mut a = FloatAcc::EMPTY;
        a.add(9, 1.0, 0.0, false);
        let mut b = FloatAcc::EMPTY;
        b.add(4, -1.0, 0.0, false);
        a.merge(&b);
        assert_eq!(a.worst_index, 4);
        for bits in [0x3C00u16, 0x0001, 0x8400, 0x7C00, 0x7E00] {
            let (v, raw) = unsafe { load(&bits as *const u16 as *const u8, DTYPE_F16, 0) };
            assert_eq!(raw, bits as u64);
            let want = f16_to_f32(bits) as f64;
            assert!(v == want || (v.is_nan() && want.is_nan()));
        }
        let bf: u16 = 0xC0A0; // -5.0
        let (v, _) = unsafe { load(&bf as *const u16 as *const u8, DTYPE_BF16, 0) };
        assert_eq!(v, -5.0);
    }
}
