//! Pooling factors (bag lengths): fixed, uniform, truncated normal, heavy-tailed log-normal
//! (calibrated to an exact mean, optionally to a tail quantile), a fraction of empty bags,
//! per-table hotness lists, and CSR offsets from lengths.

use rand::Rng;
use rand_distr::{Distribution, LogNormal, Normal};
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
    /// Uniform over `min..=max`.
    Uniform {
        /// Shortest length.
        min: u32,
        /// Longest length, `>= min`.
        max: u32,
    },
    /// `round(N(mu, sd))` conditioned on lying in `[min, max]` (redrawn until it does), with
    /// `mu` calibrated (exactly, by bisection) so the mean length equals `mean`.
    TruncatedNormal {
        /// Target mean length, strictly inside `(min, max)`.
        mean: f64,
        /// Standard deviation of the underlying normal, in `(0, 1e4]`.
        sd: f64,
        /// Shortest length.
        min: u32,
        /// Longest length.
        max: u32,
    },
    /// `base`, with each bag independently made empty with probability `fraction`
    /// (mean = (1 − fraction) · base mean).
    WithEmpty {
        /// Share of bags forced empty, in `[0, 1]`.
        fraction: f64,
        /// The distribution of the other bags.
        base: Box<Pooling>,
    },
}

impl Pooling {
    /// `bags` lengths drawn from this distribution, deterministic in `seed`.
    pub fn lengths(&self, bags: usize, seed: u64) -> Result<Vec<u32>, DataGenError> {
        match self {
            &Pooling::Fixed { length } => Ok(vec![length; bags]),
            &Pooling::LogNormal { mean, sigma, max } => {
                let mu = log_normal_mu(mean, sigma, max)?;
                let dist = LogNormal::new(mu, sigma)
                    .map_err(|_| DataGenError::invalid("sigma", sigma, "rejected by LogNormal"))?;
                Ok(chunked(bags, seed, "pooling-lengths", |rng| {
                    let x: f64 = dist.sample(rng);
                    x.round().min(f64::from(max)) as u32
                }))
            }
            &Pooling::Uniform { min, max } => {
                if min > max {
                    return Err(DataGenError::invalid("min", min, "must be <= `max`"));
                }
                Ok(chunked(bags, seed, "pooling-uniform", |rng| {
                    rng.random_range(min..=max)
                }))
            }
            &Pooling::TruncatedNormal { mean, sd, min, max } => {
                let mu = truncated_normal_mu(mean, sd, min, max)?;
                let dist = Normal::new(mu, sd)
                    .map_err(|_| DataGenError::invalid("sd", sd, "rejected by Normal"))?;
                let (lo, hi) = (f64::from(min) - 0.5, f64::from(max) + 0.5);
                Ok(chunked(
                    bags,
                    seed,
                    "pooling-truncated-normal",
                    |rng| loop {
                        let x: f64 = dist.sample(rng);
                        // round(x) in [min, max] ⇔ x in [min - 0.5, max + 0.5) (ties round away).
                        if x >= lo && x < hi {
                            break (x.round() as u32).clamp(min, max);
                        }
                    },
                ))
            }
            Pooling::WithEmpty { fraction, base } => {
                let fraction = *fraction;
                if !(0.0..=1.0).contains(&fraction) {
                    return Err(DataGenError::invalid(
                        "fraction",
                        fraction,
                        "must lie in [0, 1]",
                    ));
                }
                let mut out = base.lengths(bags, derive_str(seed, "pooling-base"))?;
                let empty = chunked(bags, seed, "pooling-empty-bags", |rng| {
                    u32::from(rng.random::<f64>() < fraction)
                });
                for (len, e) in out.iter_mut().zip(empty) {
                    if e == 1 {
                        *len = 0;
                    }
                }
                Ok(out)
            }
        }
    }

    /// A log-normal with the given `mean` whose `q`-quantile is `value` (e.g. "mean 20, p99 =
    /// 150"): σ is solved for (bisection on the exact clamped distribution), μ calibrated as in
    /// [`Pooling::LogNormal`]. Needs `mean < value < max` and `0.5 < q < 1`; a quantile that no
    /// σ reaches (too close to the mean for `q`) is an error.
    pub fn log_normal_with_quantile(
        mean: f64,
        q: f64,
        value: u32,
        max: u32,
    ) -> Result<Pooling, DataGenError> {
        if !(q > 0.5 && q < 1.0) {
            return Err(DataGenError::invalid(
                "q",
                q,
                "must lie strictly between 0.5 and 1",
            ));
        }
        if !(f64::from(value) > mean && value < max) {
            return Err(DataGenError::invalid(
                "value",
                value,
                "must lie strictly between `mean` and `max`",
            ));
        }
        let v = f64::from(value) + 0.5;
        // P(length <= value) = Φ((ln(value + 1/2) − μ(σ)) / σ); for a fixed mean it falls with σ
        // up to σ ≈ sqrt(2 ln(value/mean)), where it is smallest.
        let cdf = |sigma: f64| -> Result<f64, DataGenError> {
            let mu = log_normal_mu(mean, sigma, max)?;
            Ok(1.0 - normal_sf((v.ln() - mu) / sigma))
        };
        let (mut lo, mut hi) = (1e-3, (2.0 * (v / mean).ln()).sqrt().max(2e-3));
        if cdf(hi)? > q {
            return Err(DataGenError::invalid(
                "q",
                q,
                "no log-normal with this mean puts so little mass above `value`; raise `value` or `q`",
            ));
        }
        if cdf(lo)? < q {
            return Err(DataGenError::invalid(
                "value",
                value,
                "too close to the mean for `q`",
            ));
        }
        for _ in 0..100 {
            let mid = 0.5 * (lo + hi);
            if cdf(mid)? > q {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let sigma = 0.5 * (lo + hi);
        Ok(Pooling::LogNormal { mean, sigma, max })
    }

    /// One pooling per table from a hotness list (lookups per sample per table, e.g. MLPerf
    /// DLRMv2's multi-hot sizes): `Fixed` when `sigma` is `None`, else a log-normal with that σ,
    /// the hotness as its mean and `max_factor × hotness` as its longest bag.
    pub fn per_table_hotness(hotness: &[u32], sigma: Option<f64>, max_factor: u32) -> Vec<Pooling> {
        hotness
            .iter()
            .map(|&h| match sigma {
                None => Pooling::Fixed { length: h },
                Some(sigma) => Pooling::LogNormal {
                    mean: f64::from(h),
                    sigma,
                    max: (h.max(1) * max_factor.max(2)).max(2),
                },
            })
            .collect()
    }

    /// The target mean length.
    pub fn mean(&self) -> f64 {
        match self {
            &Pooling::Fixed { length } => f64::from(length),
            &Pooling::LogNormal { mean, .. } | &Pooling::TruncatedNormal { mean, .. } => mean,
            &Pooling::Uniform { min, max } => 0.5 * (f64::from(min) + f64::from(max)),
            Pooling::WithEmpty { fraction, base } => (1.0 - fraction) * base.mean(),
        }
    }

    /// The largest length this distribution can produce.
    pub fn max_length(&self) -> u32 {
        match self {
            &Pooling::Fixed { length } => length,
            &Pooling::LogNormal { max, .. }
            | &Pooling::Uniform { max, .. }
            | &Pooling::TruncatedNormal { max, .. } => max,
            Pooling::WithEmpty { base, .. } => base.max_length(),
        }
    }

    /// Check the parameters without generating anything.
    pub fn validate(&self) -> Result<(), DataGenError> {
        match self {
            Pooling::WithEmpty { base, .. } => {
                base.validate()?;
                self.lengths(0, 0).map(|_| ())
            }
            &Pooling::LogNormal { mean, sigma, max } => log_normal_mu(mean, sigma, max).map(|_| ()),
            &Pooling::TruncatedNormal { mean, sd, min, max } => {
                truncated_normal_mu(mean, sd, min, max).map(|_| ())
            }
            _ => self.lengths(0, 0).map(|_| ()),
        }
    }
}

/// Lengths of `T` tables × `bags` bags, table-major (`[T, B]` flattened, the layout of TBE's
/// offsets): table `t` draws from `poolings[t]` with seed `derive(seed, t)`.
pub fn table_lengths(
    poolings: &[Pooling],
    bags: usize,
    seed: u64,
) -> Result<Vec<u32>, DataGenError> {
    let per: Vec<Vec<u32>> = poolings
        .iter()
        .enumerate()
        .map(|(t, p)| p.lengths(bags, crate::seed::derive(seed, t as u64)))
        .collect::<Result<_, _>>()?;
    Ok(per.concat())
}

/// `bags` values from `draw`, in fixed chunks of bags each with its own RNG (so the result does
/// not depend on the thread count), in parallel.
fn chunked(
    bags: usize,
    seed: u64,
    stream: &str,
    draw: impl Fn(&mut crate::seed::DetRng) -> u32 + Sync,
) -> Vec<u32> {
    let stream = derive_str(seed, stream);
    let mut out = vec![0u32; bags];
    out.par_chunks_mut(BAG_CHUNK)
        .enumerate()
        .for_each(|(c, chunk)| {
            let mut rng = chunk_rng(stream, c);
            for len in chunk {
                *len = draw(&mut rng);
            }
        });
    out
}

/// Exact mean of `round(N(mu, sd))` conditioned on `[min, max]`, and the probability of that
/// interval; summed over the integers within 40 sd of `mu`.
pub fn truncated_normal_mean(mu: f64, sd: f64, min: u32, max: u32) -> (f64, f64) {
    let lo = f64::from(min).max((mu - 40.0 * sd).floor());
    let hi = f64::from(max).min((mu + 40.0 * sd).ceil());
    let (mut mass, mut first) = (0.0, 0.0);
    let mut k = lo;
    while k <= hi {
        // P(round(X) = k) = P(k − 1/2 <= X < k + 1/2).
        let p = normal_sf((k - 0.5 - mu) / sd) - normal_sf((k + 0.5 - mu) / sd);
        mass += p;
        first += p * k;
        k += 1.0;
    }
    (if mass > 0.0 { first / mass } else { f64::NAN }, mass)
}

/// The `mu` for which [`truncated_normal_mean`] equals `mean` (bisection; `mu` kept within
/// 3 sd of `[min, max]` so that redrawing accepts at least ~0.1% of draws).
pub fn truncated_normal_mu(mean: f64, sd: f64, min: u32, max: u32) -> Result<f64, DataGenError> {
    if !(sd.is_finite() && sd > 0.0 && sd <= 1e4) {
        return Err(DataGenError::invalid("sd", sd, "must lie in (0, 1e4]"));
    }
    if min > max {
        return Err(DataGenError::invalid("min", min, "must be <= `max`"));
    }
    if min == max {
        return if mean == f64::from(min) {
            Ok(mean)
        } else {
            Err(DataGenError::invalid(
                "mean",
                mean,
                "must equal `min` when `min == max`",
            ))
        };
    }
    if !(mean > f64::from(min) && mean < f64::from(max)) {
        return Err(DataGenError::invalid(
            "mean",
            mean,
            "must lie strictly between `min` and `max`",
        ));
    }
    let f = |mu: f64| truncated_normal_mean(mu, sd, min, max).0 - mean;
    let (mut lo, mut hi) = (f64::from(min) - 3.0 * sd, f64::from(max) + 3.0 * sd);
    if !(f(lo) <= 0.0 && f(hi) >= 0.0) {
        return Err(DataGenError::invalid(
            "mean",
            mean,
            "is too close to `min` or `max` for this `sd`",
        ));
    }
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if f(mid) < 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(0.5 * (lo + hi))
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

    fn mean_of(v: &[u32]) -> f64 {
        v.iter().map(|&x| f64::from(x)).sum::<f64>() / v.len() as f64
    }

    #[test]
    fn every_kind_hits_its_mean_on_a_million_bags() {
        let kinds = [
            Pooling::Fixed { length: 7 },
            Pooling::Uniform { min: 0, max: 40 },
            Pooling::TruncatedNormal {
                mean: 20.0,
                sd: 10.0,
                min: 1,
                max: 60,
            },
            // Mean close to the lower bound: mu is pushed well below the mean.
            Pooling::TruncatedNormal {
                mean: 3.0,
                sd: 4.0,
                min: 1,
                max: 100,
            },
            Pooling::WithEmpty {
                fraction: 0.25,
                base: Box::new(Pooling::LogNormal {
                    mean: 20.0,
                    sigma: 1.0,
                    max: 1000,
                }),
            },
            Pooling::log_normal_with_quantile(20.0, 0.99, 150, 2000).unwrap(),
        ];
        for (i, p) in kinds.iter().enumerate() {
            p.validate().unwrap();
            let v = p.lengths(1_000_000, 40 + i as u64).unwrap();
            let m = mean_of(&v);
            assert!((m / p.mean() - 1.0).abs() < 0.02, "{p:?}: mean {m}");
            assert!(v.iter().all(|&x| x <= p.max_length()), "{p:?}");
        }
    }

    #[test]
    fn shapes_of_the_new_kinds() {
        // Uniform: every value in range, the ends included, flat histogram.
        let v = Pooling::Uniform { min: 3, max: 6 }
            .lengths(400_000, 1)
            .unwrap();
        let mut h = [0u32; 4];
        v.iter().for_each(|&x| h[(x - 3) as usize] += 1);
        assert!(
            h.iter().all(|&c| (c as i64 - 100_000).abs() < 1500),
            "{h:?}"
        );
        // Truncated normal far from its bounds is a rounded normal: sd ≈ sqrt(sd² + 1/12).
        let v = Pooling::TruncatedNormal {
            mean: 100.0,
            sd: 10.0,
            min: 0,
            max: 1000,
        }
        .lengths(400_000, 2)
        .unwrap();
        let m = mean_of(&v);
        let sd =
            (v.iter().map(|&x| (f64::from(x) - m).powi(2)).sum::<f64>() / v.len() as f64).sqrt();
        assert!(
            (sd / (100.0f64 + 1.0 / 12.0).sqrt() - 1.0).abs() < 0.01,
            "sd {sd}"
        );
        // Near a bound the bound is respected and mass piles up next to it.
        let v = Pooling::TruncatedNormal {
            mean: 3.0,
            sd: 4.0,
            min: 1,
            max: 100,
        }
        .lengths(100_000, 3)
        .unwrap();
        assert!(v.iter().all(|&x| x >= 1));
        assert!(v.iter().filter(|&&x| x == 1).count() > 10_000);
        // Empty bags: the requested share (sd ≈ 0.0007), on top of the base's own zeros.
        let v = Pooling::WithEmpty {
            fraction: 0.3,
            base: Box::new(Pooling::Fixed { length: 5 }),
        }
        .lengths(400_000, 4)
        .unwrap();
        let empty = v.iter().filter(|&&x| x == 0).count() as f64 / v.len() as f64;
        assert!((empty - 0.3).abs() < 0.005, "{empty}");
        assert!(v.iter().all(|&x| x == 0 || x == 5));
    }

    #[test]
    fn tail_quantile_is_met() {
        let p = Pooling::log_normal_with_quantile(20.0, 0.99, 150, 2000).unwrap();
        let v = p.lengths(400_000, 5).unwrap();
        let p99 = quantile(&v, 0.99);
        assert!((140..=160).contains(&p99), "p99 {p99} of {p:?}");
        // Unreachable quantiles are errors, with the parameter named.
        let e = Pooling::log_normal_with_quantile(20.0, 0.6, 1000, 2000).unwrap_err();
        assert!(e.to_string().contains("`q`"), "{e}");
        assert!(Pooling::log_normal_with_quantile(20.0, 0.99, 10, 2000).is_err());
        assert!(Pooling::log_normal_with_quantile(20.0, 1.5, 100, 2000).is_err());
    }

    #[test]
    fn new_kinds_are_deterministic_across_threads() {
        let n = 2 * BAG_CHUNK + 9;
        let kinds = [
            Pooling::Uniform { min: 0, max: 9 },
            Pooling::TruncatedNormal {
                mean: 5.0,
                sd: 3.0,
                min: 0,
                max: 20,
            },
            Pooling::WithEmpty {
                fraction: 0.1,
                base: Box::new(Pooling::Uniform { min: 1, max: 4 }),
            },
        ];
        for p in kinds {
            let run = |threads| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap()
                    .install(|| p.lengths(n, 11).unwrap())
            };
            assert_eq!(run(1), run(3), "{p:?}");
            assert_ne!(run(1), p.lengths(n, 12).unwrap(), "{p:?}");
        }
    }

    #[test]
    fn hotness_lists_and_table_layout() {
        let pools = Pooling::per_table_hotness(&[3, 1, 100], None, 0);
        assert_eq!(pools[2], Pooling::Fixed { length: 100 });
        let l = table_lengths(&pools, 5, 1).unwrap();
        assert_eq!(l, [vec![3; 5], vec![1; 5], vec![100; 5]].concat());
        let pools = Pooling::per_table_hotness(&[2, 50], Some(1.0), 10);
        assert_eq!(pools[1].max_length(), 500);
        let l = table_lengths(&pools, 200_000, 2).unwrap();
        let (a, b) = l.split_at(200_000);
        assert!((mean_of(a) / 2.0 - 1.0).abs() < 0.02, "{}", mean_of(a));
        assert!((mean_of(b) / 50.0 - 1.0).abs() < 0.02, "{}", mean_of(b));
    }

    #[test]
    fn new_kinds_reject_bad_parameters() {
        assert!(Pooling::Uniform { min: 5, max: 4 }.validate().is_err());
        for (mean, sd, min, max) in [
            (5.0, 0.0, 0, 10),
            (5.0, 1.0, 6, 10),
            (10.0, 1.0, 0, 10),
            (0.01, 100.0, 0, 1_000_000),
        ] {
            let p = Pooling::TruncatedNormal { mean, sd, min, max };
            assert!(p.validate().is_err(), "{p:?}");
        }
        let p = Pooling::WithEmpty {
            fraction: 1.5,
            base: Box::new(Pooling::Fixed { length: 1 }),
        };
        assert!(p
            .lengths(3, 0)
            .unwrap_err()
            .to_string()
            .contains("`fraction`"));
        let s = serde_json::to_string(&Pooling::WithEmpty {
            fraction: 0.5,
            base: Box::new(Pooling::Uniform { min: 1, max: 2 }),
        })
        .unwrap();
        assert_eq!(
            s,
            r#"{"kind":"with_empty","fraction":0.5,"base":{"kind":"uniform","min":1,"max":2}}"#
        );
        assert!(serde_json::from_str::<Pooling>(&s).is_ok());
    }
}
