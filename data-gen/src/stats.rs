//! Input statistics of a set of bags: how skewed, how reused, how long the bags are. The same
//! numbers for generated inputs and for replayed traces, so the two can be compared (and set
//! beside the published locality statistics of Meta's traces).

use rayon::prelude::*;

/// One bucket of the pooling histogram: bags with `lo <= length <= hi`.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct PoolingBucket {
    /// Shortest length in the bucket.
    pub lo: u64,
    /// Longest length in the bucket.
    pub hi: u64,
    /// Bags in the bucket.
    pub bags: u64,
}

/// Statistics of (indices, offsets) over a table of `rows` rows.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct InputStats {
    /// Table rows the shares are taken over (E, or the sum over a table set).
    pub rows: u64,
    /// Bags (B, or T·B for a table set).
    pub bags: u64,
    /// Lookups (N).
    pub lookups: u64,
    /// Distinct rows looked up.
    pub distinct_rows: u64,
    /// distinct_rows / lookups.
    pub unique_fraction: f64,
    /// Share of lookups that hit the hottest 1% of the table's rows (ceil(rows/100) rows).
    pub top1pct_share: f64,
    /// Share of lookups that hit the hottest 10% of the table's rows.
    pub top10pct_share: f64,
    /// Mean lookups per distinct row (lookups / distinct_rows).
    pub mean_reuse: f64,
    /// Share of the distinct rows that are looked up exactly once.
    pub rows_touched_once: f64,
    /// Share of lookups that go to rows looked up exactly once.
    pub lookups_to_rows_touched_once: f64,
    /// Share of distinct rows among the table's rows (distinct_rows / rows).
    pub table_coverage: f64,
    /// Mean bag length.
    pub mean_pooling: f64,
    /// Longest bag.
    pub max_pooling: u64,
    /// Bags of length 0.
    pub empty_bags: u64,
    /// Bag lengths in log2 buckets: `0`, `1`, `2–3`, `4–7`, … (empty buckets left out).
    pub pooling_histogram: Vec<PoolingBucket>,
}

/// The statistics of bags given as CSR `offsets` (B + 1 entries) into `indices`, for a table of
/// `rows` rows (a `rows` of 0 means "max index + 1"). Indices outside `0..rows` are counted as
/// rows of their own (the shares stay meaningful for traces whose table size is unknown).
///
/// Cost: one pass to count rows — a dense counter when `rows` is at most ~8× the lookups,
/// otherwise a parallel sort — then a partial selection of the hottest rows; about 0.1 s for
/// 2.6M lookups over 8M rows.
pub fn bag_stats(indices: &[i64], offsets: &[i64], rows: u64) -> InputStats {
    let n = indices.len();
    let rows = if rows == 0 {
        indices
            .iter()
            .copied()
            .max()
            .map_or(0, |m| m.max(0) as u64 + 1)
    } else {
        rows
    };
    let counts = row_counts(indices, rows);
    let distinct = counts.len() as u64;
    let once = counts.iter().filter(|&&c| c == 1).count() as u64;
    let top = |share: u64| -> f64 {
        let k = rows.div_ceil(share).max(1) as usize;
        if n == 0 {
            return 0.0;
        }
        if k >= counts.len() {
            return 1.0;
        }
        let mut c = counts.clone();
        c.select_nth_unstable_by(k - 1, |a, b| b.cmp(a));
        c[..k].iter().map(|&x| u64::from(x)).sum::<u64>() as f64 / n as f64
    };
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };

    let bags = offsets.len().saturating_sub(1) as u64;
    let mut hist: Vec<u64> = Vec::new();
    let (mut empty, mut max_len) = (0u64, 0u64);
    for w in offsets.windows(2) {
        let len = (w[1] - w[0]).max(0) as u64;
        let bucket = if len == 0 {
            0
        } else {
            64 - len.leading_zeros() as usize
        };
        if hist.len() <= bucket {
            hist.resize(bucket + 1, 0);
        }
        hist[bucket] += 1;
        empty += u64::from(len == 0);
        max_len = max_len.max(len);
    }
    let pooling_histogram = hist
        .iter()
        .enumerate()
        .filter(|(_, &b)| b > 0)
        .map(|(i, &b)| PoolingBucket {
            lo: if i == 0 { 0 } else { 1 << (i - 1) },
            hi: if i == 0 { 0 } else { (1 << i) - 1 },
            bags: b,
        })
        .collect();
    let pooled: u64 = offsets
        .first()
        .zip(offsets.last())
        .map_or(0, |(a, b)| (b - a).max(0) as u64);
    InputStats {
        rows,
        bags,
        lookups: n as u64,
        distinct_rows: distinct,
        unique_fraction: ratio(distinct, n as u64),
        top1pct_share: top(100),
        top10pct_share: top(10),
        mean_reuse: ratio(n as u64, distinct),
        rows_touched_once: ratio(once, distinct),
        lookups_to_rows_touched_once: ratio(once, n as u64),
        table_coverage: ratio(distinct, rows),
        mean_pooling: ratio(pooled, bags),
        max_pooling: max_len,
        empty_bags: empty,
        pooling_histogram,
    }
}

/// The lookup count of every row looked up at least once (in no particular order).
fn row_counts(indices: &[i64], rows: u64) -> Vec<u32> {
    let n = indices.len();
    let in_range = indices.iter().all(|&i| (0..rows as i64).contains(&i));
    if in_range && rows <= (8 * n as u64).max(1 << 20) {
        let mut counts = vec![0u32; rows as usize];
        for &i in indices {
            counts[i as usize] += 1;
        }
        counts.retain(|&c| c > 0);
        counts
    } else {
        let mut v = indices.to_vec();
        v.par_sort_unstable();
        v.chunk_by(|a, b| a == b)
            .map(|run| run.len() as u32)
            .collect()
    }
}

fn pct(x: f64) -> String {
    format!("{:.2}%", 100.0 * x)
}

impl std::fmt::Display for InputStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "lookups {}  bags {}  rows {}  distinct rows {} ({} of the table)",
            self.lookups,
            self.bags,
            self.rows,
            self.distinct_rows,
            pct(self.table_coverage)
        )?;
        writeln!(
            f,
            "unique-index fraction {}  top 1% of rows {} of lookups  top 10% {}",
            pct(self.unique_fraction),
            pct(self.top1pct_share),
            pct(self.top10pct_share)
        )?;
        writeln!(
            f,
            "reuse {:.2} lookups per distinct row  rows touched once {} ({} of lookups)",
            self.mean_reuse,
            pct(self.rows_touched_once),
            pct(self.lookups_to_rows_touched_once)
        )?;
        writeln!(
            f,
            "pooling mean {:.2}  max {}  empty bags {} ({})",
            self.mean_pooling,
            self.max_pooling,
            self.empty_bags,
            pct(if self.bags == 0 {
                0.0
            } else {
                self.empty_bags as f64 / self.bags as f64
            })
        )?;
        write!(f, "pooling histogram:")?;
        for b in &self.pooling_histogram {
            let label = if b.lo == b.hi {
                b.lo.to_string()
            } else {
                format!("{}-{}", b.lo, b.hi)
            };
            write!(f, "  [{label}] {}", b.bags)?;
        }
        writeln!(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{bag_indices, offsets_from_lengths, IndexRecipe, Pooling};

    #[test]
    fn hand_computed_example() {
        // Rows: 0 ×4, 1 ×2, 2 ×1, 3 ×1; bags: [0 0 1], [], [0 2 3 0 1].
        let idx = [0, 0, 1, 0, 2, 3, 0, 1];
        let off = [0, 3, 3, 8];
        let s = bag_stats(&idx, &off, 10);
        assert_eq!(
            (s.lookups, s.bags, s.distinct_rows, s.empty_bags),
            (8, 3, 4, 1)
        );
        assert_eq!(s.unique_fraction, 0.5);
        assert_eq!(s.top1pct_share, 0.5); // 1 row: row 0, 4 of 8
        assert_eq!(s.top10pct_share, 0.5); // ceil(10/10) = 1 row
        assert_eq!(s.mean_reuse, 2.0);
        assert_eq!(s.rows_touched_once, 0.5);
        assert_eq!(s.lookups_to_rows_touched_once, 0.25);
        assert_eq!(s.table_coverage, 0.4);
        assert!((s.mean_pooling - 8.0 / 3.0).abs() < 1e-12);
        assert_eq!(s.max_pooling, 5);
        let h: Vec<(u64, u64, u64)> = s
            .pooling_histogram
            .iter()
            .map(|b| (b.lo, b.hi, b.bags))
            .collect();
        assert_eq!(h, vec![(0, 0, 1), (2, 3, 1), (4, 7, 1)]);
        // Sparse path (rows far above the lookups) gives the same numbers.
        let big = bag_stats(&idx, &off, 1 << 40);
        assert_eq!(big.distinct_rows, 4);
        assert_eq!(big.rows_touched_once, 0.5);
        assert_eq!(big.top1pct_share, 1.0);
        // rows = 0: max index + 1.
        assert_eq!(bag_stats(&idx, &off, 0).rows, 4);
        let text = s.to_string();
        assert!(text.contains("unique-index fraction 50.00%"), "{text}");
        assert!(text.contains("[2-3] 1"), "{text}");
    }

    #[test]
    fn agrees_with_a_naive_count_on_generated_data() {
        let rows = 100_000u64;
        let lengths = Pooling::LogNormal {
            mean: 10.0,
            sigma: 1.0,
            max: 300,
        }
        .lengths(20_000, 1)
        .unwrap();
        let recipe = IndexRecipe {
            rows,
            alpha: 1.1,
            scatter_hot_rows: true,
        };
        let idx = bag_indices(&recipe, &lengths, 2).unwrap();
        let off = offsets_from_lengths(&lengths);
        let s = bag_stats(&idx, &off, rows);
        let mut m = std::collections::HashMap::new();
        for &i in &idx {
            *m.entry(i).or_insert(0u64) += 1;
        }
        let mut c: Vec<u64> = m.values().copied().collect();
        c.sort_unstable_by(|a, b| b.cmp(a));
        let n = idx.len() as f64;
        assert_eq!(s.distinct_rows, c.len() as u64);
        let top1: u64 = c[..1000].iter().sum();
        let top10: u64 = c[..10_000.min(c.len())].iter().sum();
        assert!((s.top1pct_share - top1 as f64 / n).abs() < 1e-12);
        assert!((s.top10pct_share - top10 as f64 / n).abs() < 1e-12);
        assert_eq!(
            s.empty_bags,
            lengths.iter().filter(|&&l| l == 0).count() as u64
        );
        assert_eq!(
            s.pooling_histogram.iter().map(|b| b.bags).sum::<u64>(),
            lengths.len() as u64
        );
        // Skewed data: the top 1% carries far more than 1%.
        assert!(s.top1pct_share > 0.3, "{}", s.top1pct_share);
    }

    #[test]
    fn full_size_is_fast() {
        // 2.6M lookups over 8M rows: the size of embedding_bag_sum at `full`.
        let rows = 8u64 << 20;
        let lengths = Pooling::Fixed { length: 20 }.lengths(131_072, 0).unwrap();
        let recipe = IndexRecipe {
            rows,
            alpha: 1.15,
            scatter_hot_rows: true,
        };
        let idx = bag_indices(&recipe, &lengths, 3).unwrap();
        let off = offsets_from_lengths(&lengths);
        let t = std::time::Instant::now();
        let s = bag_stats(&idx, &off, rows);
        let dt = t.elapsed();
        assert!(dt.as_secs_f64() < 0.5, "{dt:?}");
        assert_eq!(s.lookups, idx.len() as u64);
        let json = serde_json::to_value(&s).unwrap();
        assert!(json["pooling_histogram"].is_array());
    }

    #[test]
    fn a_huge_index_is_counted_without_a_table_sized_allocation() {
        // Issue 13: an index of 2^31 made `stats` allocate 8 GiB for its counts.
        let s = bag_stats(&[1 << 31, 3, 1 << 31], &[0, 2, 3], (1 << 31) + 1);
        assert_eq!((s.lookups, s.distinct_rows, s.rows), (3, 2, (1 << 31) + 1));
    }
}
