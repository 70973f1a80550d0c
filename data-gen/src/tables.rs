//! Table sets: synthetic (T tables of E rows, one D or mixed D) and presets with published
//! cardinalities (Criteo Kaggle, Criteo Terabyte, MLPerf DLRMv2), with a row cap or a scale
//! factor so a set fits a given memory, and batch generation over a whole set.
//!
//! Sources (see `shared/REFERENCE-DATA.md`): facebookresearch/dlrm `tools/visualize.py` (Criteo
//! Kaggle, Criteo Terabyte with a 10M cap) and `torchrec_dlrm/README.MD` (MLPerf DLRMv2: the
//! Criteo 1TB multi-hot set with rows capped at 40M and its multi-hot sizes).

use rayon::prelude::*;

use crate::error::DataGenError;
use crate::indices::IndexSampler;
use crate::permutation::RowPermutation;
use crate::pooling::{offsets_from_lengths, table_lengths, Pooling};
use crate::seed::{derive, derive_str};
use crate::zipf::BoundedZipf;

/// Criteo Kaggle (Display Advertising Challenge) cardinalities, D = 16.
pub const CRITEO_KAGGLE_ROWS: [u64; 26] = [
    1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194, 27, 14992,
    5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572,
];

/// Criteo Terabyte cardinalities with a 10M row cap, D = 64.
pub const CRITEO_TERABYTE_ROWS: [u64; 26] = [
    9980333, 36084, 17217, 7378, 20134, 3, 7112, 1442, 61, 9758201, 1333352, 313829, 10, 2208,
    11156, 122, 4, 970, 14, 9994222, 7267859, 9946608, 415421, 12420, 101, 36,
];

/// MLPerf DLRMv2 (Criteo 1TB multi-hot) cardinalities, rows capped at 40M, D = 128.
pub const MLPERF_DLRMV2_ROWS: [u64; 26] = [
    40000000, 39060, 17295, 7424, 20265, 3, 7122, 1543, 63, 40000000, 3067956, 405282, 10, 2209,
    11938, 155, 4, 976, 14, 40000000, 40000000, 40000000, 590152, 12973, 108, 36,
];

/// MLPerf DLRMv2 multi-hot sizes (lookups per sample per table; 214 in all).
pub const MLPERF_DLRMV2_HOTNESS: [u32; 26] = [
    3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1,
];

/// One embedding table.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TableSpec {
    /// Rows (E).
    pub rows: u64,
    /// Embedding width (D).
    pub dim: u32,
    /// Mean lookups per sample (the pooling factor; 1 for one-hot features).
    pub hotness: u32,
}

/// A set of tables.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TableSet {
    /// The set's name, e.g. `mlperf-dlrmv2` (with a `@cap=` or `@scale=` suffix once resized).
    pub name: String,
    /// The tables.
    pub tables: Vec<TableSpec>,
}

/// Names [`TableSet::preset`] knows.
pub const PRESETS: [&str; 3] = ["criteo-kaggle", "criteo-terabyte", "mlperf-dlrmv2"];

/// One generated batch over a table set, table-major like TBE's inputs.
#[derive(Clone, Debug, PartialEq)]
pub struct TableBatch {
    /// Batch size (B).
    pub batch: usize,
    /// Lookups, table-major: table 0's bags, then table 1's, …; each index is local to its
    /// table (`0..rows[t]`).
    pub indices: Vec<i64>,
    /// CSR offsets over all `T·B` bags (`T·B + 1` entries).
    pub offsets: Vec<i64>,
    /// First global row of each table in one concatenated weight (`T + 1` entries).
    pub row_offsets: Vec<u64>,
}

impl TableBatch {
    /// The indices as global rows of the concatenated table (`indices + row_offsets[t]`), the
    /// form [`crate::stats::bag_stats`] takes for a whole set.
    pub fn global_indices(&self) -> Vec<i64> {
        let t = self.row_offsets.len() - 1;
        let mut out = self.indices.clone();
        for table in 0..t {
            let (a, b) = (
                self.offsets[table * self.batch] as usize,
                self.offsets[(table + 1) * self.batch] as usize,
            );
            let base = self.row_offsets[table] as i64;
            out[a..b].par_iter_mut().for_each(|i| *i += base);
        }
        out
    }
}

/// How a batch over a table set is drawn.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TableSetRecipe {
    /// Zipf exponent of every table's rows.
    pub alpha: f64,
    /// `None`: every bag of table t has exactly `hotness[t]` lookups (MLPerf's multi-hot
    /// layout); `Some(sigma)`: log-normal lengths with mean `hotness[t]` and that σ.
    pub pooling_sigma: Option<f64>,
}

impl TableSet {
    /// `t` tables of `rows` rows and width `dim`, one lookup per sample each.
    pub fn synthetic(t: usize, rows: u64, dim: u32, hotness: u32) -> Self {
        Self {
            name: format!("synthetic-t{t}-e{rows}-d{dim}"),
            tables: vec![TableSpec { rows, dim, hotness }; t],
        }
    }

    /// `t` tables of `rows` rows whose widths cycle through `dims` (mixed D).
    pub fn synthetic_mixed(t: usize, rows: u64, dims: &[u32], hotness: u32) -> Self {
        Self {
            name: format!("synthetic-t{t}-e{rows}-mixed-d"),
            tables: (0..t)
                .map(|i| TableSpec {
                    rows,
                    dim: dims[i % dims.len().max(1)],
                    hotness,
                })
                .collect(),
        }
    }

    fn from_lists(name: &str, rows: &[u64], dim: u32, hotness: &[u32]) -> Self {
        Self {
            name: name.into(),
            tables: rows
                .iter()
                .zip(hotness)
                .map(|(&rows, &hotness)| TableSpec { rows, dim, hotness })
                .collect(),
        }
    }

    /// Criteo Kaggle: 26 one-hot tables, D = 16.
    pub fn criteo_kaggle() -> Self {
        Self::from_lists("criteo-kaggle", &CRITEO_KAGGLE_ROWS, 16, &[1; 26])
    }

    /// Criteo Terabyte (10M cap): 26 one-hot tables, D = 64.
    pub fn criteo_terabyte() -> Self {
        Self::from_lists("criteo-terabyte", &CRITEO_TERABYTE_ROWS, 64, &[1; 26])
    }

    /// MLPerf DLRMv2: 26 multi-hot tables, D = 128, 204.2M rows.
    pub fn mlperf_dlrmv2() -> Self {
        Self::from_lists(
            "mlperf-dlrmv2",
            &MLPERF_DLRMV2_ROWS,
            128,
            &MLPERF_DLRMV2_HOTNESS,
        )
    }

    /// A preset by name (see [`PRESETS`]; `_` and `-` are interchangeable).
    pub fn preset(name: &str) -> Option<Self> {
        match name.replace('_', "-").to_ascii_lowercase().as_str() {
            "criteo-kaggle" | "kaggle" => Some(Self::criteo_kaggle()),
            "criteo-terabyte" | "terabyte" => Some(Self::criteo_terabyte()),
            "mlperf-dlrmv2" | "dlrmv2" => Some(Self::mlperf_dlrmv2()),
            _ => None,
        }
    }

    /// Every table capped at `cap` rows.
    pub fn with_row_cap(&self, cap: u64) -> Result<Self, DataGenError> {
        if cap == 0 {
            return Err(DataGenError::invalid("cap", cap, "must be at least 1"));
        }
        let mut s = self.clone();
        s.tables.iter_mut().for_each(|t| t.rows = t.rows.min(cap));
        s.name = format!("{}@cap={cap}", self.name);
        Ok(s)
    }

    /// Every table's rows multiplied by `factor` (rounded up, at least 1 row).
    pub fn scaled(&self, factor: f64) -> Result<Self, DataGenError> {
        if !(factor.is_finite() && factor > 0.0) {
            return Err(DataGenError::invalid(
                "factor",
                factor,
                "must be a finite number > 0",
            ));
        }
        let mut s = self.clone();
        s.tables
            .iter_mut()
            .for_each(|t| t.rows = ((t.rows as f64 * factor).ceil() as u64).max(1));
        s.name = format!("{}@scale={factor}", self.name);
        Ok(s)
    }

    /// The largest row cap under which the set's weights (`elem_bytes` per element) fit in
    /// `bytes`, or `None` when even one row per table does not fit.
    pub fn cap_to_fit(&self, bytes: u64, elem_bytes: u64) -> Option<u64> {
        let size = |cap: u64| {
            self.tables
                .iter()
                .map(|t| t.rows.min(cap) * u64::from(t.dim) * elem_bytes)
                .sum::<u64>()
        };
        let max = self.tables.iter().map(|t| t.rows).max()?;
        if size(1) > bytes {
            return None;
        }
        let (mut lo, mut hi) = (1u64, max);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if size(mid) <= bytes {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        Some(lo)
    }

    /// Total rows.
    pub fn total_rows(&self) -> u64 {
        self.tables.iter().map(|t| t.rows).sum()
    }

    /// Bytes of all weights at `elem_bytes` per element.
    pub fn total_bytes(&self, elem_bytes: u64) -> u64 {
        self.tables
            .iter()
            .map(|t| t.rows * u64::from(t.dim) * elem_bytes)
            .sum()
    }

    /// Lookups per sample (Σ hotness).
    pub fn lookups_per_sample(&self) -> u64 {
        self.tables.iter().map(|t| u64::from(t.hotness)).sum()
    }

    /// First global row of each table in one concatenated weight (`T + 1` entries).
    pub fn row_offsets(&self) -> Vec<u64> {
        std::iter::once(0)
            .chain(self.tables.iter().scan(0u64, |acc, t| {
                *acc += t.rows;
                Some(*acc)
            }))
            .collect()
    }

    /// One batch of `batch` samples over every table: table `t`'s rows are Zipf(`alpha`) with
    /// hot rows scattered by a hashed permutation ([`RowPermutation::hashed`]: no per-table
    /// memory, so 40M-row tables cost nothing to set up), its bag lengths from its hotness.
    /// Deterministic in `seed` whatever the thread count.
    pub fn generate(
        &self,
        batch: usize,
        recipe: &TableSetRecipe,
        seed: u64,
    ) -> Result<TableBatch, DataGenError> {
        let hotness: Vec<u32> = self.tables.iter().map(|t| t.hotness).collect();
        let poolings = Pooling::per_table_hotness(&hotness, recipe.pooling_sigma, 20);
        let lengths = table_lengths(&poolings, batch, derive_str(seed, "table-lengths"))?;
        let offsets = offsets_from_lengths(&lengths);
        let mut indices = Vec::with_capacity(*offsets.last().unwrap_or(&0) as usize);
        for (t, spec) in self.tables.iter().enumerate() {
            let table_seed = derive(derive_str(seed, "table-indices"), t as u64);
            let sampler = IndexSampler::from_parts(
                BoundedZipf::new(spec.rows, recipe.alpha)?,
                RowPermutation::hashed(spec.rows, derive_str(table_seed, "row-permutation"))?,
            )?;
            let count = (offsets[(t + 1) * batch] - offsets[t * batch]) as usize;
            indices.extend(sampler.sample(count, table_seed));
        }
        Ok(TableBatch {
            batch,
            indices,
            offsets,
            row_offsets: self.row_offsets(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_match_the_published_numbers() {
        let m = TableSet::mlperf_dlrmv2();
        assert_eq!(m.tables.len(), 26);
        assert_eq!(m.total_rows(), 204_184_588);
        assert_eq!(m.lookups_per_sample(), 214);
        // ~104.5 GB in fp32.
        assert!((m.total_bytes(4) as f64 / 1e9 - 104.5).abs() < 0.1);
        let k = TableSet::criteo_kaggle();
        assert!((k.total_rows() as f64 / 1e6 - 33.8).abs() < 0.05);
        assert_eq!(k.tables[0].dim, 16);
        assert_eq!(TableSet::criteo_terabyte().tables[0].dim, 64);
        for name in PRESETS {
            assert_eq!(TableSet::preset(name).unwrap().name, name);
        }
        assert!(TableSet::preset("MLPerf_DLRMv2").is_some());
        assert!(TableSet::preset("nope").is_none());
    }

    #[test]
    fn resizing() {
        let m = TableSet::mlperf_dlrmv2();
        let c = m.with_row_cap(4_000_000).unwrap();
        assert_eq!(c.tables[0].rows, 4_000_000);
        assert_eq!(c.tables[1].rows, 39_060);
        let s = m.scaled(0.01).unwrap();
        assert_eq!(s.tables[0].rows, 400_000);
        assert_eq!(s.tables[5].rows, 1);
        assert!(m.scaled(0.0).is_err() && m.with_row_cap(0).is_err());
        // The largest cap that fits 16 GB of fp16 weights, and one more row does not.
        let budget = 16u64 << 30;
        let cap = m.cap_to_fit(budget, 2).unwrap();
        assert!(m.with_row_cap(cap).unwrap().total_bytes(2) <= budget);
        assert!(m.with_row_cap(cap + 1).unwrap().total_bytes(2) > budget);
        assert_eq!(m.cap_to_fit(10, 2), None);
        let mixed = TableSet::synthetic_mixed(5, 100, &[64, 128], 2);
        let dims: Vec<u32> = mixed.tables.iter().map(|t| t.dim).collect();
        assert_eq!(dims, vec![64, 128, 64, 128, 64]);
        assert_eq!(
            TableSet::synthetic(3, 10, 8, 1).row_offsets(),
            vec![0, 10, 20, 30]
        );
    }

    #[test]
    fn batches_follow_hotness_and_stay_in_their_tables() {
        let set = TableSet::mlperf_dlrmv2().with_row_cap(100_000).unwrap();
        let recipe = TableSetRecipe {
            alpha: 1.15,
            pooling_sigma: None,
        };
        let b = set.generate(256, &recipe, 1).unwrap();
        assert_eq!(b.offsets.len(), 26 * 256 + 1);
        assert_eq!(b.indices.len(), 214 * 256);
        for (t, spec) in set.tables.iter().enumerate() {
            for bag in t * 256..(t + 1) * 256 {
                assert_eq!(b.offsets[bag + 1] - b.offsets[bag], i64::from(spec.hotness));
            }
            let (a, z) = (
                b.offsets[t * 256] as usize,
                b.offsets[(t + 1) * 256] as usize,
            );
            assert!(b.indices[a..z]
                .iter()
                .all(|&i| (0..spec.rows as i64).contains(&i)));
        }
        let g = b.global_indices();
        assert!(g.iter().all(|&i| (0..set.total_rows() as i64).contains(&i)));
        let run = |threads| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| set.generate(256, &recipe, 1).unwrap())
        };
        assert_eq!(run(1), run(3));
        let var = set
            .generate(
                2048,
                &TableSetRecipe {
                    alpha: 1.15,
                    pooling_sigma: Some(1.0),
                },
                2,
            )
            .unwrap();
        let mean = var.indices.len() as f64 / 2048.0;
        assert!((mean / 214.0 - 1.0).abs() < 0.05, "{mean}");
    }
}
