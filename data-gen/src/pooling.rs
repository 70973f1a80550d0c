//! Pooling factors (bag lengths): fixed, or heavy-tailed log-normal calibrated to an exact
//! mean, plus CSR offsets from lengths.

use rand_distr::{Distribution, LogNormal};
use rayon::prelude::*;

use crate::error::DataGenError;
use crate::seed::{chunk_rng, derive_str};

/// Bags per RNG chunk. Fixed, so the output never depends on the thread count.
const BAG_CHUNK: usize = 1 << 16;

/// Pooling factors (bag lengths).
///
/// Serialized internally tagged, e.g. `{"kind": "log_normal", "mean": 20.0, "sigma": 1.0,
/// "max": 1000}` or `{"kind": "fixed", "length": 4}`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Pooling {
    /// Every bag has `length` lookups.
    Fixed {
        /// The bag length.
        length: u32,
    },
    /// Heavy-tailed: `round(exp(mu + sigma*Z))` clamped to `[0, max]`, with `mu` calibrated
    /// (exact expectation of the clamped, rounded distribution + bisection, not sampling) so
    /// that the mean length equals `mean`. Bags of length 0 occur when `exp(..) < 0.5`.
    LogNormal {
        /// Target mean length, in `(0, max)`.
        mean: f64,
        /// Standard deviation of the underlying normal, `> 0`.
        sigma: f64,
        /// Largest length, `>= 1`.
        max: u32,
    },
}

impl Pooling {
    /// `bags` lengths drawn from this distribution, deterministic in `seed`.
    pub fn lengths(&self, bags: usize, seed: u64) -> Result<Vec<u32>, DataGenError> {
        match *self {
            Pooling::Fixed { length } => Ok(vec![length; bags]),
            Pooling::LogNormal { mean, sigma, max } => {
                let mu = log_normal_mu(mean, sigma, max)?;
                let dist = LogNormal::new(mu, sigma)
                    .map_err(|_| DataGenError::invalid("sigma", sigma, "rejected by LogNormal"))?;
                let stream = derive_str(seed, "pooling-lengths");
                let mut out = vec![0u32; bags];
                out.par_chunks_mut(BAG_CHUNK)
                    .enumerate()
                    .for_each(|(c, chunk)| {
                        let mut rng = chunk_rng(stream, c);
                        for len in chunk {
                            let x: f64 = dist.sample(&mut rng);
                            *len = x.round().min(f64::from(max)) as u32;
                        }
                    });
                Ok(out)
            }
        }
    }

    /// The target mean length.
    pub fn mean(&self) -> f64 {
        match *self {
            Pooling::Fixed { length } => f64::from(length),
            Pooling::LogNormal { mean, .. } => mean,
        }
    }

    /// The largest length this distribution can produce.
    pub fn max_length(&self) -> u32 {
        match *self {
            Pooling::Fixed { length } => length,
            Pooling::LogNormal { max, .. } => max,
        }
    }

    /// Check the parameters without generating anything.
    pub fn validate(&self) -> Result<(), DataGenError> {
        match *self {
            Pooling::Fixed { .. } => Ok(()),
            Pooling::LogNormal { mean, sigma, max } => log_normal_mu(mean, sigma, max).map(|_| ()),
        }
    }
}

/// Standard normal upper tail P(Z >= x).
fn normal_sf(x: f64) -> f64 {
    0.5 * libm::erfc(x / std::f64::consts::SQRT_2)
}

/// Exact mean of `min(round(exp(mu + sigma*Z)), max)`: the sum over k = 1..=max of
/// P(length >= k) = P(exp(..) >= k - 1/2). Terms decrease in k; the sum stops once they vanish.
pub fn log_normal_clamped_mean(mu: f64, sigma: f64, max: u32) -> f64 {
    let mut sum = 0.0;
    for k in 1..=max {
        let term = normal_sf(((f64::from(k) - 0.5).ln() - mu) / sigma);
        sum += term;
        if term < 1e-18 {
            break;
        }
    }
    sum
}

/// The `mu` for which [`log_normal_clamped_mean`] equals `mean`, found by bisection.
pub fn log_normal_mu(mean: f64, sigma: f64, max: u32) -> Result<f64, DataGenError> {
    if max == 0 {
        return Err(DataGenError::invalid("max", max, "must be at least 1"));
    }
    if !(sigma.is_finite() && sigma > 0.0) {
        return Err(DataGenError::invalid(
            "sigma",
            sigma,
            "must be a finite number > 0",
        ));
    }
    if !(mean > 0.0 && mean < f64::from(max)) {
        return Err(DataGenError::invalid(
            "mean",
            mean,
            "must lie strictly between 0 and `max`",
        ));
    }
    let f = |mu: f64| log_normal_clamped_mean(mu, sigma, max) - mean;
    // Bracket the root: the mean rises monotonically from 0 (mu → -inf) to max (mu → +inf).
    let (mut lo, mut hi) = (mean.ln() - 1.0, mean.ln() + 1.0);
    let mut step = 1.0 + sigma;
    while f(lo) > 0.0 {
        lo -= step;
        step *= 2.0;
    }
    step = 1.0 + sigma;
    while f(hi) < 0.0 {
        hi += step;
        step *= 2.0;
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if f(mid) < 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(0.5 * (lo + hi))
}

/// CSR offsets (`include_last_offset=True`): `B + 1` entries, starting at 0, each the running
/// sum of the lengths.
pub fn offsets_from_lengths(lengths: &[u32]) -> Vec<i64> {
    let mut offsets = Vec::with_capacity(lengths.len() + 1);
    let mut acc = 0i64;
    offsets.push(acc);
    for &len in lengths {
        acc += i64::from(len);
        offsets.push(acc);
    }
    offsets
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quantile(v: &[u32], q: f64) -> u32 {
        let mut s = v.to_vec();
        s.sort_unstable();
        s[((s.len() - 1) as f64 * q) as usize]
    }

    #[test]
    fn log_normal_mean_matches_target() {
        let p = Pooling::LogNormal {
            mean: 20.0,
            sigma: 1.0,
            max: 1000,
        };
        let v = p.lengths(1_000_000, 7).unwrap();
        assert_eq!(v.len(), 1_000_000);
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64;
        assert!((mean / 20.0 - 1.0).abs() < 0.02, "mean {mean}");
        assert!(v.iter().all(|&x| x <= 1000));
        // Heavy tail: p99 far above the mean (about exp(mu + 2.33 sigma) ≈ 6x the mean).
        let p99 = quantile(&v, 0.99);
        assert!(p99 as f64 > 3.0 * 20.0, "p99 {p99}");
        assert_eq!(p.mean(), 20.0);
    }

    #[test]
    fn clamping_is_accounted_for() {
        // A heavy sigma and a low max clamp a large share of bags; the calibrated mean must
        // still hold, and both ends (0 and max) must occur.
        let p = Pooling::LogNormal {
            mean: 8.0,
            sigma: 2.0,
            max: 40,
        };
        let v = p.lengths(400_000, 3).unwrap();
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64;
        assert!((mean / 8.0 - 1.0).abs() < 0.02, "mean {mean}");
        assert!(v.contains(&0) && v.contains(&40));
        assert!(v.iter().all(|&x| x <= 40));
    }

    #[test]
    fn calibration_inverts_the_exact_mean() {
        for (mean, sigma, max) in [(20.0, 1.0, 1000), (30.0, 0.5, 200), (1.5, 1.5, 10_000)] {
            let mu = log_normal_mu(mean, sigma, max).unwrap();
            assert!((log_normal_clamped_mean(mu, sigma, max) - mean).abs() < 1e-9);
        }
        // Without clamping the mean of exp(mu + sigma Z) is exp(mu + sigma²/2); rounding to
        // the nearest integer barely changes it for a large mean.
        let mu = log_normal_mu(500.0, 0.3, u32::MAX).unwrap();
        assert!(((mu + 0.045).exp() / 500.0 - 1.0).abs() < 1e-4, "mu {mu}");
    }

    #[test]
    fn fixed_and_determinism() {
        let p = Pooling::Fixed { length: 4 };
        assert_eq!(p.lengths(5, 0).unwrap(), vec![4; 5]);
        assert_eq!(p.mean(), 4.0);
        let q = Pooling::LogNormal {
            mean: 20.0,
            sigma: 1.0,
            max: 500,
        };
        // Several chunks, so chunk seeding is exercised.
        let n = 3 * BAG_CHUNK + 17;
        let a = q.lengths(n, 1).unwrap();
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let four = rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap();
        assert_eq!(a, one.install(|| q.lengths(n, 1).unwrap()));
        assert_eq!(a, four.install(|| q.lengths(n, 1).unwrap()));
        assert_ne!(a, q.lengths(n, 2).unwrap());
        // A prefix does not depend on how many bags are asked for.
        assert_eq!(&a[..100], &q.lengths(100, 1).unwrap()[..]);
    }

    #[test]
    fn invalid_parameters() {
        let cases = [
            (
                Pooling::LogNormal {
                    mean: 0.0,
                    sigma: 1.0,
                    max: 10,
                },
                "mean",
            ),
            (
                Pooling::LogNormal {
                    mean: 10.0,
                    sigma: 1.0,
                    max: 10,
                },
                "mean",
            ),
            (
                Pooling::LogNormal {
                    mean: f64::NAN,
                    sigma: 1.0,
                    max: 10,
                },
                "mean",
            ),
            (
                Pooling::LogNormal {
                    mean: 5.0,
                    sigma: 0.0,
                    max: 10,
                },
                "sigma",
            ),
            (
                Pooling::LogNormal {
                    mean: 5.0,
                    sigma: f64::NAN,
                    max: 10,
                },
                "sigma",
            ),
            (
                Pooling::LogNormal {
                    mean: 0.5,
                    sigma: 1.0,
                    max: 0,
                },
                "max",
            ),
        ];
        for (p, name) in cases {
            let e = p.lengths(10, 0).unwrap_err();
            assert!(e.to_string().contains(&format!("`{name}`")), "{e}");
            assert!(p.validate().is_err());
        }
    }

    #[test]
    fn serde_form() {
        let p = Pooling::LogNormal {
            mean: 20.0,
            sigma: 1.0,
            max: 1000,
        };
        let s = serde_json::to_string(&p).unwrap();
        assert_eq!(
            s,
            r#"{"kind":"log_normal","mean":20.0,"sigma":1.0,"max":1000}"#
        );
        assert_eq!(serde_json::from_str::<Pooling>(&s).unwrap(), p);
        let f: Pooling = serde_json::from_str(r#"{"kind":"fixed","length":3}"#).unwrap();
        assert_eq!(f, Pooling::Fixed { length: 3 });
    }

    #[test]
    fn csr_offsets() {
        assert_eq!(offsets_from_lengths(&[]), vec![0]);
        assert_eq!(offsets_from_lengths(&[3, 0, 2, 5]), vec![0, 3, 3, 5, 10]);
        let lengths = Pooling::LogNormal {
            mean: 10.0,
            sigma: 1.0,
            max: 100,
        }
        .lengths(1000, 5)
        .unwrap();
        let off = offsets_from_lengths(&lengths);
        assert_eq!(off.len(), lengths.len() + 1);
        for (b, &len) in lengths.iter().enumerate() {
            assert_eq!(off[b + 1] - off[b], i64::from(len));
        }
        assert_eq!(
            *off.last().unwrap(),
            lengths.iter().map(|&l| l as i64).sum::<i64>()
        );
    }
}
