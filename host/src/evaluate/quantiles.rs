//! Small statistics for timings: percentiles and a bootstrap confidence interval of a median.
use rand::{Rng, SeedableRng};

/// The `q`-quantile (0..=1) by linear interpolation; NaN for no data.
pub(crate) fn quantile(xs: &[f64], q: f64) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let pos = q.clamp(0.0, 1.0) * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

pub fn median(xs: &[f64]) -> f64 {
    quantile(xs, 0.5)
}

/// Percentile bootstrap 95% interval of the median of `xs` (resampling with replacement,
/// `rounds` times, seeded so a result set can be recomputed).
pub(crate) fn bootstrap_median_ci(xs: &[f64], rounds: usize, seed: u64) -> (f64, f64) {
    if xs.len() < 2 {
        let m = median(xs);
        return (m, m);
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut medians = Vec::with_capacity(rounds);
    let mut sample = vec![0.0; xs.len()];
    for _ in 0..rounds {
        for s in sample.iter_mut() {
            *s = xs[rng.random_range(0..xs.len())];
        }
        medians.push(median(&sample));
    }
    (quantile(&medians, 0.025), quantile(&medians, 0.975))
}

/// Geometric mean of positive values.
pub(crate) fn geomean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    (xs.iter().map(|x| x.ln()).sum::<f64>() / xs.len() as f64).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles() {
        let xs = [5.0, 1.0, 3.0, 2.0, 4.0];
        assert_eq!(median(&xs), 3.0);
        assert_eq!(quantile(&xs, 0.0), 1.0);
        assert_eq!(quantile(&xs, 1.0), 5.0);
        assert_eq!(quantile(&xs, 0.25), 2.0);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn bootstrap_interval_covers_and_shrinks() {
        let noisy: Vec<f64> = (0..200)
            .map(|i| 2.0 + ((i * 7919) % 101) as f64 / 1000.0 - 0.05)
            .collect();
        let (lo, hi) = bootstrap_median_ci(&noisy, 1000, 1);
        let m = median(&noisy);
        assert!(lo <= m && m <= hi);
        assert!(hi - lo < 0.03, "{lo}..{hi}");
        let few = &noisy[..10];
        let (l2, h2) = bootstrap_median_ci(few, 1000, 1);
        assert!(h2 - l2 > hi - lo, "fewer samples, wider interval");
    }

    #[test]
    fn geomean_of_reciprocals_is_one() {
        assert!((geomean(&[2.0, 0.5]) - 1.0).abs() < 1e-12);
    }
}
