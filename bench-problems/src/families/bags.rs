//! Helpers shared by the embedding-bag problems 1–5: size lookup, bag lengths with empty bags
//! and the edge bags, the rows a set of lookups touches, and input statistics.
use crate::spec::ProblemError;
use data_gen::{seed::derive_str, uniform_f32_at, Pooling};

pub use crate::spec::size;

/// `bags` lengths drawn from `pooling`; then each bag is emptied with probability
/// `empty_fraction` (a counter-based draw per bag, deterministic in `seed`); then, when there are
/// at least 3 bags, bag 0 is empty and bag B/2 has the pooling's longest length.
pub fn bag_lengths(
    pooling: &Pooling,
    bags: usize,
    seed: u64,
    empty_fraction: f64,
) -> Result<Vec<u32>, ProblemError> {
    let mut lengths = pooling.lengths(bags, derive_str(seed, "lengths"))?;
    if empty_fraction > 0.0 {
        let stream = derive_str(seed, "empty-bags");
        for (b, len) in lengths.iter_mut().enumerate() {
            if (uniform_f32_at(stream, b as u64, 0.0, 1.0) as f64) < empty_fraction {
                *len = 0;
            }
        }
    }
    if lengths.len() >= 3 {
        lengths[0] = 0;
        let mid = lengths.len() / 2;
        lengths[mid] = pooling.max_length();
    }
    Ok(lengths)
}

/// One flag per row of a table of `rows` rows: whether any of `indices` looks it up.
pub fn touched_rows(indices: &[i64], rows: usize) -> Vec<bool> {
    let mut touched = vec![false; rows];
    for &i in indices {
        if let Some(t) = usize::try_from(i).ok().and_then(|i| touched.get_mut(i)) {
            *t = true;
        }
    }
    touched
}

/// Number of distinct values of `indices` in `0..rows`.
pub fn distinct_rows(indices: &[i64], rows: usize) -> usize {
    let mut seen = vec![0u64; rows.div_ceil(64)];
    for &i in indices {
        if (i as usize) < rows {
            seen[i as usize / 64] |= 1 << (i % 64);
        }
    }
    seen.iter().map(|w| w.count_ones() as usize).sum()
}

/// Input statistics of CSR bags for run records: the same [`data_gen::InputStats`] every
/// embedding problem reports (pooling, distinct rows, reuse, hot-row shares over `rows` rows).
pub fn bag_stats(offsets: &[i64], indices: &[i64], rows: usize) -> serde_json::Value {
    serde_json::to_value(data_gen::bag_stats(indices, offsets, rows as u64))
        .unwrap_or(serde_json::Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_hold_the_edge_bags_and_about_the_empty_fraction() {
        let pooling = Pooling::LogNormal {
            mean: 20.0,
            sigma: 1.0,
            max: 300,
        };
        let lengths = bag_lengths(&pooling, 20_000, 4, 0.05).unwrap();
        assert_eq!(lengths[0], 0);
        assert_eq!(lengths[10_000], 300);
        let empty = lengths.iter().filter(|&&l| l == 0).count() as f64 / 20_000.0;
        // 5% drawn (sd 0.15%) plus the log-normal's own rare zeros.
        assert!((0.045..0.056).contains(&empty), "{empty}");
        assert_eq!(lengths, bag_lengths(&pooling, 20_000, 4, 0.05).unwrap());
        assert_ne!(lengths, bag_lengths(&pooling, 20_000, 5, 0.05).unwrap());
        let none = bag_lengths(&pooling, 20_000, 4, 0.0).unwrap();
        assert!(none.iter().filter(|&&l| l == 0).count() < 100);
    }

    #[test]
    fn touched_rows_and_stats_count_what_they_see() {
        assert_eq!(
            touched_rows(&[3, 3, 0, 9], 5),
            vec![true, false, false, true, false]
        );
        let s = bag_stats(&[0, 0, 3, 4], &[1, 1, 2, 1], 4);
        assert_eq!(s["bags"], 3);
        assert_eq!(s["empty_bags"], 1);
        assert_eq!(s["max_pooling"], 3);
        assert_eq!(s["distinct_rows"], 2);
        assert_eq!(s["mean_reuse"], 2.0);
    }
}
