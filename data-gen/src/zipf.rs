//! Bounded Zipf distribution over table ranks (rank 0 is the hottest row), built on
//! `rand_distr::Zipf`.

use rand::Rng;
use rand_distr::{Distribution, Zipf};

use crate::error::DataGenError;

/// Bounded Zipf over ranks `0..n` (rank 0 hottest): P(rank k) ∝ 1/(k+1)^alpha.
/// `alpha = 0` is uniform. Any finite `alpha >= 0` (including exactly 1) is accepted.
#[derive(Clone, Debug)]
pub struct BoundedZipf {
    n: u64,
    alpha: f64,
    /// `None` when `alpha == 0` (plain uniform ranks) or `n == 1`.
    zipf: Option<Zipf<f64>>,
}

impl BoundedZipf {
    /// A Zipf over `n >= 1` ranks with exponent `alpha` (finite, `>= 0`). `n` must fit exactly
    /// in an f64 (`n <= 2^53`).
    pub fn new(n: u64, alpha: f64) -> Result<Self, DataGenError> {
        if n == 0 {
            return Err(DataGenError::invalid("n", n, "must be at least 1"));
        }
        if n > 1 << 53 {
            return Err(DataGenError::invalid("n", n, "must be at most 2^53"));
        }
        if !(alpha.is_finite() && alpha >= 0.0) {
            return Err(DataGenError::invalid(
                "alpha",
                alpha,
                "must be a finite number >= 0",
            ));
        }
        let zipf = if alpha == 0.0 || n == 1 {
            None
        } else {
            Some(Zipf::new(n as f64, alpha).map_err(|_| {
                DataGenError::invalid("alpha", alpha, "rejected by rand_distr::Zipf")
            })?)
        };
        Ok(Self { n, alpha, zipf })
    }

    /// Draw one rank in `0..n`.
    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        match &self.zipf {
            None => rng.random_range(0..self.n),
            // rand_distr returns a value in 1..=n; the clamp only guards against float rounding.
            Some(z) => (z.sample(rng) as u64).clamp(1, self.n) - 1,
        }
    }

    /// Number of ranks.
    pub fn n(&self) -> u64 {
        self.n
    }

    /// The exponent.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// Exact probability of `rank` (sums the normaliser in O(n); meant for checks and reports).
    pub fn pmf(&self, rank: u64) -> f64 {
        if rank >= self.n {
            return 0.0;
        }
        let norm: f64 = (1..=self.n).map(|k| (k as f64).powf(-self.alpha)).sum();
        ((rank + 1) as f64).powf(-self.alpha) / norm
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seed::rng;

    /// Exact pmf, computed independently of the implementation.
    fn exact_pmf(n: usize, alpha: f64) -> Vec<f64> {
        let w: Vec<f64> = (1..=n).map(|k| 1.0 / (k as f64).powf(alpha)).collect();
        let total: f64 = w.iter().sum();
        w.into_iter().map(|x| x / total).collect()
    }

    /// Ranks 0..10 each get a bucket, then groups of 10 ranks: fine where the mass is, and coarse
    /// enough in the tail that sampling noise stays far below the tolerance.
    fn bucket(rank: usize) -> usize {
        if rank < 10 {
            rank
        } else {
            9 + rank / 10
        }
    }

    /// Total variation distance between bucketed empirical frequencies and a bucketed pmf.
    fn bucketed_tv(counts: &[u64], pmf: &[f64]) -> f64 {
        let nb = bucket(counts.len() - 1) + 1;
        let total: u64 = counts.iter().sum();
        let (mut emp, mut exp) = (vec![0.0; nb], vec![0.0; nb]);
        for (k, (&c, &p)) in counts.iter().zip(pmf).enumerate() {
            emp[bucket(k)] += c as f64 / total as f64;
            exp[bucket(k)] += p;
        }
        0.5 * emp
            .iter()
            .zip(&exp)
            .map(|(a, b)| (a - b).abs())
            .sum::<f64>()
    }

    fn sample_counts(n: usize, alpha: f64, samples: usize, seed: u64) -> Vec<u64> {
        let z = BoundedZipf::new(n as u64, alpha).unwrap();
        let mut r = rng(seed);
        let mut counts = vec![0u64; n];
        for _ in 0..samples {
            let k = z.sample(&mut r);
            assert!(k < n as u64);
            counts[k as usize] += 1;
        }
        counts
    }

    #[test]
    fn frequencies_match_exact_pmf() {
        let (n, samples) = (1000, 200_000);
        for (i, &alpha) in [0.0, 0.5, 1.0, 1.15].iter().enumerate() {
            let counts = sample_counts(n, alpha, samples, 100 + i as u64);
            let pmf = exact_pmf(n, alpha);
            // Sampling noise gives TV < 0.01 over these 109 buckets.
            let tv = bucketed_tv(&counts, &pmf);
            assert!(tv < 0.02, "alpha {alpha}: total variation {tv}");
            // The head must match closely: rank 0's share, within 5 standard deviations.
            let p0 = counts[0] as f64 / samples as f64;
            let sd = (pmf[0] * (1.0 - pmf[0]) / samples as f64).sqrt();
            assert!(
                (p0 - pmf[0]).abs() < 5.0 * sd,
                "alpha {alpha}: p0 {p0} vs {}",
                pmf[0]
            );
        }
    }

    #[test]
    fn wrong_exponent_is_detectable() {
        // Guards the test above: samples at alpha 1.15 are far from the alpha 1.0 pmf.
        let counts = sample_counts(1000, 1.15, 200_000, 9);
        let tv = bucketed_tv(&counts, &exact_pmf(1000, 1.0));
        assert!(tv > 0.04, "tv {tv}");
    }

    #[test]
    fn alpha_zero_is_uniform() {
        let n = 10u64;
        let z = BoundedZipf::new(n, 0.0).unwrap();
        let mut r = rng(1);
        let mut counts = [0u32; 10];
        let samples = 100_000;
        for _ in 0..samples {
            counts[z.sample(&mut r) as usize] += 1;
        }
        for c in counts {
            // Expected 10_000 per bin, sd ≈ 95.
            assert!((c as i64 - 10_000).abs() < 500, "{counts:?}");
        }
        assert!((z.pmf(3) - 0.1).abs() < 1e-12);
    }

    #[test]
    fn tiny_and_huge_tables() {
        let z = BoundedZipf::new(1, 1.15).unwrap();
        let mut r = rng(3);
        assert!((0..100).all(|_| z.sample(&mut r) == 0));
        let z = BoundedZipf::new(2, 1.0).unwrap();
        assert!((0..1000).all(|_| z.sample(&mut r) < 2));
        let big = 16u64 << 20;
        let z = BoundedZipf::new(big, 1.09).unwrap();
        assert!((0..10_000).all(|_| z.sample(&mut r) < big));
        assert!((z.pmf(0) + z.pmf(1) - (1.0 + 2f64.powf(-1.09)) * z.pmf(0)).abs() < 1e-15);
    }

    #[test]
    fn invalid_parameters_are_errors() {
        for alpha in [-0.1, f64::NAN, f64::INFINITY] {
            let e = BoundedZipf::new(10, alpha).unwrap_err();
            assert!(e.to_string().contains("alpha"), "{e}");
        }
        let e = BoundedZipf::new(0, 1.0).unwrap_err();
        assert!(e.to_string().contains("`n` = 0"), "{e}");
        assert!(BoundedZipf::new((1 << 53) + 1, 1.0).is_err());
        assert_eq!(BoundedZipf::new(5, 1.0).unwrap().n(), 5);
        assert_eq!(BoundedZipf::new(5, 1.0).unwrap().alpha(), 1.0);
    }
}
