//! Helpers shared by the sparse-lookup problems 6–9: size lookup, launch-plan building blocks
//! (the plans mirror eager PyTorch op by op, so the same ATen-kernel ports recur), the keyed
//! jagged tensor inputs of problems 7 and 8, and the CUB-style radix sort and scan sub-plans.
use crate::launch::{Dim, LaunchSpec, ScratchSpec};
use crate::spec::ProblemError;
use data_gen::{
    seed::{derive, derive_str},
    IndexSampler, Pooling, RowPermutation,
};
use rayon::prelude::*;

pub use crate::spec::size;

/// An invalid-input error of `problem`.
pub fn invalid(problem: &str, message: impl Into<String>) -> ProblemError {
    ProblemError::Invalid {
        problem: problem.into(),
        message: message.into(),
    }
}

/// One launch: grid and block as expressions, arguments as names or expressions.
pub fn launch(kernel: &str, grid: [&str; 3], block: [&str; 3], args: &[&str]) -> LaunchSpec {
    LaunchSpec {
        kernel: kernel.into(),
        grid: grid.map(Dim::from),
        block: block.map(Dim::from),
        shared_bytes: Dim::Number(0),
        args: args.iter().map(|a| a.to_string()).collect(),
    }
}

/// A TensorIterator-style elementwise launch over `n` elements (block 128, 4 per thread).
pub fn elementwise(kernel: &str, n: &str, args: &[&str]) -> LaunchSpec {
    let grid = format!("max(ceil_div({n}, 512), 1)");
    launch(kernel, [&grid, "1", "1"], ["128", "1", "1"], args)
}

/// A grid-stride launch with ATen's `getApplyGrid`/`getApplyBlock` (block 512, one element per
/// thread).
pub fn apply_grid(kernel: &str, n: &str, args: &[&str]) -> LaunchSpec {
    let grid = format!("max(ceil_div({n}, 512), 1)");
    launch(kernel, [&grid, "1", "1"], ["512", "1", "1"], args)
}

/// ATen's `vectorized_gather_kernel<16>` launch for `rows` rows of `slice_bytes` bytes.
pub fn gather_rows16(rows: &str, slice_bytes: &str, args: &[&str]) -> LaunchSpec {
    let grid_y = format!("min(ceil_div({slice_bytes}, 4096), 65535)");
    let block = format!("min(256, ceil_div(ceil_div({slice_bytes}, 16), 32) * 32)");
    launch(
        "aten_gather_rows16",
        [rows, &grid_y, "1"],
        [&block, "1", "1"],
        args,
    )
}

/// A scratch buffer.
pub fn scratch(name: &str, bytes: &str) -> ScratchSpec {
    ScratchSpec {
        name: name.into(),
        bytes: Dim::from(bytes),
    }
}

/// Tile size of `gpu_kernels::kernels::scan` (256 threads × 8).
pub const SCAN_TILE: i64 = 2048;
/// Tile size of `gpu_kernels::kernels::radix_sort` (256 threads × 12).
pub const SORT_TILE: i64 = 3072;
/// Most blocks of `radix_sort_histogram` (`gpu_kernels::kernels::radix_sort::HIST_MAX_BLOCKS`).
pub const HIST_MAX_BLOCKS: i64 = 924;

/// `cumsum` of a 1-D tensor of `n` elements as ATen runs it (`cub::DeviceScan::InclusiveSum`:
/// tile-state init, then the single-pass scan), `kernel` being the scan kernel for the input
/// type; `status` is a scratch of [`scan_status_bytes`].
pub fn inclusive_scan(
    kernel: &str,
    input: &str,
    output: &str,
    n: &str,
    status: &str,
) -> Vec<LaunchSpec> {
    // At least one tile: with n = 0 the scan still runs one (empty) block, which publishes
    // its state.
    let tiles = format!("max(ceil_div({n}, {SCAN_TILE}), 1)");
    let init_grid = format!("ceil_div({tiles} + 1, 256)");
    let scan_grid = tiles.clone();
    vec![
        launch(
            "scan_init",
            [&init_grid, "1", "1"],
            ["256", "1", "1"],
            &[status, &tiles],
        ),
        launch(
            kernel,
            [&scan_grid, "1", "1"],
            ["256", "1", "1"],
            &[input, output, n, status],
        ),
    ]
}

/// Bytes of a scan's tile-state scratch for `n` elements.
pub fn scan_status_bytes(n: &str) -> String {
    format!("(max(ceil_div({n}, {SCAN_TILE}), 1) + 1) * 8")
}

/// Names of the scratch buffers of one radix sort (prefixed, so two sorts could coexist).
pub struct SortScratch {
    pub bins: String,
    pub counters: String,
    pub lookback: String,
    pub alt_keys: String,
    pub alt_values: String,
}

impl SortScratch {
    pub fn new(prefix: &str) -> Self {
        SortScratch {
            bins: format!("{prefix}_bins"),
            counters: format!("{prefix}_tile_counters"),
            lookback: format!("{prefix}_lookback"),
            alt_keys: format!("{prefix}_alt_keys"),
            alt_values: format!("{prefix}_alt_values"),
        }
    }

    /// The scratch buffers for sorting `n` pairs.
    pub fn specs(&self, n: &str) -> Vec<ScratchSpec> {
        vec![
            scratch(&self.bins, "8 * 256 * 4"),
            scratch(&self.counters, "8 * 4"),
            scratch(
                &self.lookback,
                &format!("8 * max(ceil_div({n}, {SORT_TILE}), 1) * 256 * 4"),
            ),
            scratch(&self.alt_keys, &format!("max({n}, 1) * 8")),
            scratch(&self.alt_values, &format!("max({n}, 1) * 8")),
        ]
    }
}

/// `cub::DeviceRadixSort::SortPairs` of `n` int64 keys with int64 values over all 64 bits, as
/// ATen's `radix_sort_pairs` calls it: clear the counts, one histogram pass, the bin offsets,
/// then 8 onesweep passes ping-ponging through the alternate buffers (pass 7 writes
/// `keys_out`/`values_out`).
pub fn radix_sort_pairs(
    keys_in: &str,
    values_in: &str,
    keys_out: &str,
    values_out: &str,
    n: &str,
    s: &SortScratch,
) -> Vec<LaunchSpec> {
    let tiles = format!("max(ceil_div({n}, {SORT_TILE}), 1)");
    let block = ["256", "1", "1"];
    let mut plan = vec![
        launch(
            "radix_sort_init",
            ["1", "1", "1"],
            block,
            &[&s.bins, &s.counters, "8"],
        ),
        launch(
            "radix_sort_histogram",
            [&format!("min({tiles}, {HIST_MAX_BLOCKS})"), "1", "1"],
            block,
            &[keys_in, n, "1", "8", &s.bins, &s.lookback],
        ),
        launch("radix_sort_bin_offsets", ["8", "1", "1"], block, &[&s.bins]),
    ];
    for pass in 0..8 {
        let (k_in, v_in) = match pass {
            0 => (keys_in, values_in),
            p if p % 2 == 1 => (s.alt_keys.as_str(), s.alt_values.as_str()),
            _ => (keys_out, values_out),
        };
        let (k_out, v_out) = if pass % 2 == 0 {
            (s.alt_keys.as_str(), s.alt_values.as_str())
        } else {
            (keys_out, values_out)
        };
        let pass = pass.to_string();
        plan.push(launch(
            "radix_sort_onesweep",
            [&tiles, "1", "1"],
            block,
            &[
                k_in,
                k_out,
                v_in,
                v_out,
                n,
                &pass,
                "1",
                &s.bins,
                &s.lookback,
                &s.counters,
            ],
        ));
    }
    plan
}

/// The inputs of a keyed jagged tensor (problems 7 and 8): `T` features × `B` samples.
pub struct Kjt {
    /// Lookups per (feature, sample), feature-major (`lengths[t·B + b]`).
    pub lengths: Vec<i32>,
    /// The ids, feature-major then sample then position.
    pub values: Vec<i64>,
    /// Rows of each feature's table.
    pub rows: Vec<u64>,
}

/// Zipf exponent of the ids.
pub const KJT_ALPHA: f64 = 1.15;
/// Mean lookups per (feature, sample) over all features.
pub const KJT_MEAN_LENGTH: f64 = 16.0;

/// The model the features belong to: table rows and mean pooling factor of feature `t` of
/// `features`. A fixed function of `t` (not of the input set's seed), as the features of one
/// model do not change between batches: rows log-uniform in [10^3, 4·10^7), mean lengths
/// log-uniform in [1, 64) scaled so that their average is [`KJT_MEAN_LENGTH`].
pub fn kjt_feature_config(features: usize, max_rows: u64) -> Vec<(u64, f64)> {
    let unit = |t: usize, stream: u64| {
        (derive(0x6b6a_745f_6d6f_6465, t as u64 * 2 + stream) >> 11) as f64 / (1u64 << 53) as f64
    };
    let raw: Vec<(u64, f64)> = (0..features)
        .map(|t| {
            let rows = 10f64.powf(3.0 + unit(t, 0) * (7.6 - 3.0)) as u64;
            let mean = 64f64.powf(unit(t, 1));
            (rows.clamp(1, max_rows.max(1)), mean)
        })
        .collect();
    let avg = raw.iter().map(|&(_, m)| m).sum::<f64>() / features.max(1) as f64;
    raw.into_iter()
        .map(|(rows, m)| (rows, m * KJT_MEAN_LENGTH / avg))
        .collect()
}

/// A KJT of `t` features and `b` samples from `seed`: per feature, heavy-tailed (log-normal,
/// σ = 1) lengths around the feature's mean, capped at 8× that mean (bags of length 0 occur,
/// many for the features of mean ≈ 1; a feature whose bags all came out empty gets one id in its
/// first bag), and Zipf(α) ids over the feature's table with the hot
/// rows scattered. `max_rows` caps the table sizes (tiny at `ci`), `constant_id` makes every id
/// that value (an edge case).
pub fn kjt(
    t: usize,
    b: usize,
    seed: u64,
    max_rows: u64,
    constant_id: Option<i64>,
) -> Result<Kjt, ProblemError> {
    let config = kjt_feature_config(t, max_rows);
    let per_feature: Vec<Vec<u32>> = config
        .par_iter()
        .enumerate()
        .map(|(f, &(_, mean))| {
            let max = ((8.0 * mean).ceil() as u32).max(2);
            let pooling = Pooling::LogNormal {
                mean: mean.min(max as f64 * 0.9),
                sigma: 1.0,
                max,
            };
            let mut lengths =
                pooling.lengths(b, derive(derive_str(seed, "kjt-lengths"), f as u64))?;
            // No feature entirely empty (only possible with very few samples): keeps every
            // permuted output non-empty.
            if lengths.iter().all(|&l| l == 0) {
                lengths[0] = 1;
            }
            Ok(lengths)
        })
        .collect::<Result<_, ProblemError>>()?;
    let lengths: Vec<i32> = per_feature.iter().flatten().map(|&l| l as i32).collect();
    let counts: Vec<usize> = per_feature
        .iter()
        .map(|l| l.iter().map(|&x| x as usize).sum())
        .collect();
    let values_per_feature: Vec<Vec<i64>> = config
        .par_iter()
        .zip(counts.par_iter())
        .enumerate()
        .map(|(f, (&(rows, _), &count))| {
            if let Some(id) = constant_id {
                return Ok(vec![id; count]);
            }
            let table_seed = derive(derive_str(seed, "kjt-ids"), f as u64);
            // Hot rows scattered by a keyed permutation: no per-feature table of up to 4·10^7
            // entries.
            let sampler = IndexSampler::from_parts(
                data_gen::BoundedZipf::new(rows, KJT_ALPHA)?,
                RowPermutation::hashed(rows, derive_str(table_seed, "rows"))?,
            )?;
            Ok(sampler.sample(count, table_seed))
        })
        .collect::<Result<_, ProblemError>>()?;
    Ok(Kjt {
        lengths,
        values: values_per_feature.concat(),
        rows: config.iter().map(|&(r, _)| r).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feature_config_is_fixed_and_has_the_target_mean() {
        let a = kjt_feature_config(856, u64::MAX);
        assert_eq!(a, kjt_feature_config(856, u64::MAX));
        let mean = a.iter().map(|&(_, m)| m).sum::<f64>() / 856.0;
        assert!((mean - KJT_MEAN_LENGTH).abs() < 1e-9);
        assert!(a.iter().all(|&(r, _)| (1000..40_000_000).contains(&r)));
        let small = a.iter().filter(|&&(r, _)| r < 100_000).count();
        assert!(
            small > 200 && small < 700,
            "a spread of table sizes: {small}"
        );
    }

    #[test]
    fn kjt_is_feature_major_in_range_and_deterministic() {
        let k = kjt(7, 50, 3, 1000, None).unwrap();
        assert_eq!(k.lengths.len(), 350);
        let n: i64 = k.lengths.iter().map(|&l| l as i64).sum();
        assert_eq!(k.values.len() as i64, n);
        assert!(k.lengths.contains(&0), "empty bags occur");
        let mut pos = 0usize;
        for f in 0..7 {
            let count: usize = k.lengths[f * 50..(f + 1) * 50]
                .iter()
                .map(|&l| l as usize)
                .sum();
            assert!(k.values[pos..pos + count]
                .iter()
                .all(|&v| (0..k.rows[f] as i64).contains(&v)));
            pos += count;
        }
        let again = kjt(7, 50, 3, 1000, None).unwrap();
        assert_eq!((again.lengths, again.values), (k.lengths, k.values));
    }
}
