//! Dense values (weights, activations, gradients): element `i` is a pure function of
//! `(seed, i)` — a counter-based hash mapped to a uniform float — so tensors fill in parallel and
//! any element can be recomputed alone.

use half::{bf16, f16};
use rayon::prelude::*;

use crate::dtype::DType;
use crate::seed::{derive_str, mix64, GOLDEN_GAMMA};

/// Elements per parallel task (only a work-splitting grain: values do not depend on it).
const FILL_CHUNK: usize = 1 << 16;

/// The key of the value stream of `seed`.
#[inline]
fn key(seed: u64) -> u64 {
    derive_str(seed, "uniform-values")
}

/// 24 random bits of element `i` as a float in [0, 1), multiples of 2^-24 (exact in f32).
#[inline]
fn unit_at(key: u64, i: u64) -> f32 {
    // SplitMix64's i-th output with state `key`: a counter-based generator.
    let h = mix64(key.wrapping_add(i.wrapping_add(1).wrapping_mul(GOLDEN_GAMMA)));
    (h >> 40) as f32 * (1.0 / (1u64 << 24) as f32)
}

#[inline]
fn scale(u: f32, lo: f32, hi: f32) -> f32 {
    let v = lo + (hi - lo) * u;
    // Rounding can land exactly on `hi` (or, for huge ranges, past it): keep the range half-open.
    if v >= hi {
        hi.next_down().max(lo)
    } else {
        v.max(lo)
    }
}

fn check_range(lo: f32, hi: f32) {
    assert!(
        lo.is_finite() && hi.is_finite() && lo <= hi,
        "uniform values need finite lo <= hi, got [{lo}, {hi})"
    );
}

/// Element `i` of [`uniform_f32`]`(_, seed, lo, hi)`: uniform in `[lo, hi)` (`lo` when
/// `lo == hi`). Panics unless `lo` and `hi` are finite and `lo <= hi`.
pub fn uniform_f32_at(seed: u64, i: u64, lo: f32, hi: f32) -> f32 {
    check_range(lo, hi);
    scale(unit_at(key(seed), i), lo, hi)
}

/// `len` values uniform in `[lo, hi)`, element `i` equal to [`uniform_f32_at`]`(seed, i, lo, hi)`,
/// filled in parallel. Panics unless `lo` and `hi` are finite and `lo <= hi`.
pub fn uniform_f32(len: usize, seed: u64, lo: f32, hi: f32) -> Vec<f32> {
    check_range(lo, hi);
    let k = key(seed);
    let mut out = vec![0f32; len];
    out.par_chunks_mut(FILL_CHUNK)
        .enumerate()
        .for_each(|(c, chunk)| {
            let base = (c * FILL_CHUNK) as u64;
            for (j, x) in chunk.iter_mut().enumerate() {
                *x = scale(unit_at(k, base + j as u64), lo, hi);
            }
        });
    out
}

/// [`uniform_f32`]`(out.len() / size, seed, lo, hi)` as the little-endian bytes of `dtype`
/// (f32, or bf16 or f16 rounded to nearest even, as [`uniform_bf16`] and [`uniform_f16`]), written
/// into `out` in parallel: a table of gigabytes with no f32 copy. Panics for other dtypes, when
/// `out` is not whole elements, or unless `lo` and `hi` are finite and `lo <= hi`.
pub fn fill_uniform_bytes(out: &mut [u8], seed: u64, lo: f32, hi: f32, dtype: DType) {
    check_range(lo, hi);
    let size = dtype.size_bytes();
    assert!(
        matches!(dtype, DType::F32 | DType::BF16 | DType::F16) && out.len().is_multiple_of(size),
        "uniform bytes are whole f32, bf16 or f16 elements, not {} bytes of {}",
        out.len(),
        dtype.name()
    );
    let k = key(seed);
    out.par_chunks_mut(FILL_CHUNK * size)
        .enumerate()
        .for_each(|(c, chunk)| {
            let base = (c * FILL_CHUNK) as u64;
            for (j, x) in chunk.chunks_exact_mut(size).enumerate() {
                let v = scale(unit_at(k, base + j as u64), lo, hi);
                match dtype {
                    DType::F32 => x.copy_from_slice(&v.to_le_bytes()),
                    DType::BF16 => x.copy_from_slice(&bf16::from_f32(v).to_bits().to_le_bytes()),
                    _ => x.copy_from_slice(&f16::from_f32(v).to_bits().to_le_bytes()),
                }
            }
        });
}

/// `len` elements of [`fill_uniform_bytes`].
pub fn uniform_bytes(len: usize, seed: u64, lo: f32, hi: f32, dtype: DType) -> Vec<u8> {
    let mut out = vec![0u8; len * dtype.size_bytes()];
    fill_uniform_bytes(&mut out, seed, lo, hi, dtype);
    out
}

/// [`uniform_f32`] rounded to bf16 (round to nearest even). The rounding may reach `hi`.
pub fn uniform_bf16(len: usize, seed: u64, lo: f32, hi: f32) -> Vec<bf16> {
    let v = uniform_f32(len, seed, lo, hi);
    v.par_iter().map(|&x| bf16::from_f32(x)).collect()
}

/// [`uniform_f32`] rounded to f16 (round to nearest even). The rounding may reach `hi`.
pub fn uniform_f16(len: usize, seed: u64, lo: f32, hi: f32) -> Vec<f16> {
    let v = uniform_f32(len, seed, lo, hi);
    v.par_iter().map(|&x| f16::from_f32(x)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pure_function_of_seed_and_index() {
        let n = 3 * FILL_CHUNK + 5;
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let four = rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap();
        let a = one.install(|| uniform_f32(n, 8, -1.0, 1.0));
        let b = four.install(|| uniform_f32(n, 8, -1.0, 1.0));
        assert_eq!(a, b);
        for i in [0, 1, 77, FILL_CHUNK - 1, FILL_CHUNK, n - 1] {
            assert_eq!(a[i], uniform_f32_at(8, i as u64, -1.0, 1.0));
        }
        assert_ne!(a, uniform_f32(n, 9, -1.0, 1.0));
        // A shorter tensor is a prefix of a longer one.
        assert_eq!(&a[..10], &uniform_f32(10, 8, -1.0, 1.0)[..]);
    }

    #[test]
    fn range_and_moments() {
        let (lo, hi) = (-0.5f32, 2.0f32);
        let v = uniform_f32(1_000_000, 3, lo, hi);
        assert!(v.iter().all(|&x| (lo..hi).contains(&x)));
        let n = v.len() as f64;
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n;
        let var = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
        let width = (hi - lo) as f64;
        // sd of the mean ≈ 0.72 / 1000.
        assert!((mean - 0.75).abs() < 0.005, "mean {mean}");
        assert!(
            (var / (width * width / 12.0) - 1.0).abs() < 0.01,
            "var {var}"
        );
        // Deciles are evenly filled.
        let mut bins = [0u32; 10];
        for &x in &v {
            bins[(((x - lo) as f64 / width) * 10.0) as usize] += 1;
        }
        assert!(
            bins.iter().all(|&b| (b as i64 - 100_000).abs() < 1_500),
            "{bins:?}"
        );
        // Neighbouring elements are uncorrelated.
        let c = v
            .windows(2)
            .map(|w| (w[0] as f64 - mean) * (w[1] as f64 - mean))
            .sum::<f64>()
            / (n - 1.0);
        assert!((c / var).abs() < 0.005, "lag-1 correlation {}", c / var);
    }

    #[test]
    fn golden_values() {
        // Pins the stream: generated inputs must not change silently between versions
        // (the computation is integer hashing plus exact f32 scaling, so it is portable).
        let bits: Vec<u32> = uniform_f32(4, 42, -1.0, 1.0)
            .iter()
            .map(|x| x.to_bits())
            .collect();
        assert_eq!(bits, [1007593600, 3173360128, 3207261732, 1043310736]);
    }

    #[test]
    fn half_open_edges() {
        // The largest unit value (1 - 2^-24) must not round up to hi.
        assert!(scale(1.0 - 1.0 / (1u64 << 24) as f32, 0.0, 1.0) < 1.0);
        assert!(scale(0.999_999_9, 1e6, 1e6 + 1.0) < 1e6 + 1.0);
        assert_eq!(uniform_f32(4, 1, 2.0, 2.0), vec![2.0; 4]);
        assert_eq!(scale(0.0, -3.0, 5.0), -3.0);
    }

    #[test]
    #[should_panic(expected = "lo <= hi")]
    fn reversed_range_panics() {
        uniform_f32(1, 0, 1.0, 0.0);
    }

    #[test]
    fn half_precision_variants() {
        let f = uniform_f32(1000, 4, -1.0, 1.0);
        let b = uniform_bf16(1000, 4, -1.0, 1.0);
        let h = uniform_f16(1000, 4, -1.0, 1.0);
        for i in 0..1000 {
            assert!((b[i].to_f32() - f[i]).abs() <= f[i].abs() / 128.0 + 1e-30);
            assert!((h[i].to_f32() - f[i]).abs() <= f[i].abs() / 1024.0 + 1e-7);
        }
    }

    #[test]
    fn uniform_bytes_are_the_uniform_values_of_each_dtype() {
        let (n, seed) = (100_003, 77);
        let f = uniform_f32(n, seed, -1.0, 1.0);
        let bytes = |dtype| uniform_bytes(n, seed, -1.0, 1.0, dtype);
        assert_eq!(bytes(DType::F32), bytemuck::cast_slice::<f32, u8>(&f));
        let bf = uniform_bf16(n, seed, -1.0, 1.0);
        assert_eq!(bytes(DType::BF16), bytemuck::cast_slice::<bf16, u8>(&bf));
        let h = uniform_f16(n, seed, -1.0, 1.0);
        assert_eq!(bytes(DType::F16), bytemuck::cast_slice::<f16, u8>(&h));
    }
}
