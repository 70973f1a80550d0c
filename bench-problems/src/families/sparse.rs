//! What the sparse-lookup problems 6–9 share: edge size sets, the eager ATen launch shapes their
//! plans are made of (the plans mirror eager PyTorch op by op, so the same kernel ports recur),
//! the CUB-style scan and radix-sort sub-plans, and the keyed jagged tensor (KJT) of problems 7
//! and 8: its generator, its input set, and the `cumsum` and `repeat_interleave` sub-plans over
//! its int32 lengths.
use crate::error::ProblemError;
use crate::input_set::{InputSet, InputSetBuilder};
use crate::launch::{LaunchSpec, ScratchSpec};
use crate::sizes::{Preset, Sizes};
use data_gen::{
    seed::{derive, derive_str},
    uniform_f32, IndexSampler, Pooling, RowPermutation,
};
use rayon::prelude::*;

pub use crate::sizes::sizes_in;

/// `base` with the size symbols of `changes` set (an edge size set).
pub fn with_sizes(base: &Sizes, changes: &[(&str, i64)]) -> Sizes {
    let mut sizes = base.clone();
    for &(name, value) in changes {
        sizes.insert(name.into(), value);
    }
    sizes
}

/// Where each of consecutive segments of `lengths` starts (the exclusive prefix sums).
pub fn exclusive_sums(lengths: &[i64]) -> Vec<i64> {
    lengths
        .iter()
        .scan(0i64, |s, &l| {
            let start = *s;
            *s += l;
            Some(start)
        })
        .collect()
}

/// `v` cut into consecutive pieces of `lengths` elements (their sum at most `v.len()`), for
/// filling the pieces of an output in parallel.
pub fn split_by<'a, T>(mut v: &'a mut [T], lengths: &[usize]) -> Vec<&'a mut [T]> {
    let mut pieces = Vec::with_capacity(lengths.len());
    for &len in lengths {
        let (piece, rest) = std::mem::take(&mut v).split_at_mut(len);
        pieces.push(piece);
        v = rest;
    }
    pieces
}

/// The share of zeros in `lengths` (empty bags), 0 for no lengths.
pub fn empty_share(lengths: &[i64]) -> f64 {
    lengths.iter().filter(|&&l| l == 0).count() as f64 / lengths.len().max(1) as f64
}

/// Scratch buffers from `(name, bytes)` pairs, bytes an expression over size symbols.
pub fn scratch_of(pairs: &[(&str, &str)]) -> Vec<ScratchSpec> {
    pairs
        .iter()
        .map(|&(name, bytes)| ScratchSpec::new(name, bytes))
        .collect()
}

/// A TensorIterator-style elementwise launch over `n` elements (block 128, 4 per thread).
pub fn elementwise(kernel: &str, n: &str, args: &[&str]) -> LaunchSpec {
    LaunchSpec::linear(
        kernel,
        format!("max(ceil_div({n}, 512), 1)").as_str(),
        128,
        args,
    )
}

/// A grid-stride launch with ATen's `getApplyGrid`/`getApplyBlock` (block 512, one element per
/// thread).
pub fn apply_grid(kernel: &str, n: &str, args: &[&str]) -> LaunchSpec {
    LaunchSpec::linear(
        kernel,
        format!("max(ceil_div({n}, 512), 1)").as_str(),
        512,
        args,
    )
}

/// ATen's `vectorized_gather_kernel<16>` launch for `rows` rows of `slice_bytes` bytes.
pub fn gather_rows16(rows: &str, slice_bytes: &str, args: &[&str]) -> LaunchSpec {
    let grid_y = format!("min(ceil_div({slice_bytes}, 4096), 65535)");
    let block = format!("min(256, ceil_div(ceil_div({slice_bytes}, 16), 32) * 32)");
    LaunchSpec::new(
        "aten_gather_rows16",
        [rows.into(), grid_y.as_str().into(), 1.into()],
        [block.as_str().into(), 1.into(), 1.into()],
        args,
    )
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
    vec![
        LaunchSpec::linear("scan_init", init_grid.as_str(), 256, &[status, &tiles]),
        LaunchSpec::linear(kernel, tiles.as_str(), 256, &[input, output, n, status]),
    ]
}

/// Bytes of a scan's tile-state scratch for `n` elements.
pub fn scan_status_bytes(n: &str) -> String {
    format!("(max(ceil_div({n}, {SCAN_TILE}), 1) + 1) * 8")
}

/// The temporaries of one `cumsum` of an int32 tensor (named by the plan): its int64 copy, the
/// sums, and the scan's tile state.
pub struct CumsumI32 {
    pub wide: &'static str,
    pub cum: &'static str,
    pub status: &'static str,
}

impl CumsumI32 {
    /// `input.cumsum(0)` of `n` int32 elements as ATen runs it: a cast to int64 (`wide`), then
    /// CUB's inclusive scan into `cum`.
    pub fn plan(&self, input: &str, n: &str) -> Vec<LaunchSpec> {
        let mut plan = vec![elementwise(
            "aten_cast_i32_to_i64",
            n,
            &[self.wide, input, n],
        )];
        plan.extend(inclusive_scan(
            "inclusive_sum_i64",
            self.wide,
            self.cum,
            n,
            self.status,
        ));
        plan
    }

    /// The scratch buffers `wide`, `cum` and `status` for `n` elements.
    pub fn scratch(&self, n: &str) -> [ScratchSpec; 3] {
        [
            ScratchSpec::new(self.wide, format!("{n} * 8").as_str()),
            ScratchSpec::new(self.cum, format!("{n} * 8").as_str()),
            ScratchSpec::new(self.status, scan_status_bytes(n).as_str()),
        ]
    }
}

/// ATen's `repeat_interleave(repeats, output_size=total)` kernel over `n` int32 repeats, given
/// their inclusive cumsum `cum`: writes the segment number of each of the `total` outputs.
pub fn repeat_interleave(repeats: &str, cum: &str, out: &str, n: &str, total: &str) -> LaunchSpec {
    LaunchSpec::linear(
        "aten_repeat_interleave_i32",
        format!("min(ceil_div({n}, 16), 2048)").as_str(),
        512,
        &[repeats, cum, out, n, total],
    )
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
        let lookback = format!("8 * max(ceil_div({n}, {SORT_TILE}), 1) * 256 * 4");
        let pairs = format!("max({n}, 1) * 8");
        vec![
            ScratchSpec::new(&self.bins, "8 * 256 * 4"),
            ScratchSpec::new(&self.counters, "8 * 4"),
            ScratchSpec::new(&self.lookback, lookback.as_str()),
            ScratchSpec::new(&self.alt_keys, pairs.as_str()),
            ScratchSpec::new(&self.alt_values, pairs.as_str()),
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
    let histogram_grid = format!("min({tiles}, {HIST_MAX_BLOCKS})");
    let mut plan = vec![
        LaunchSpec::linear("radix_sort_init", 1, 256, &[&s.bins, &s.counters, "8"]),
        LaunchSpec::linear(
            "radix_sort_histogram",
            histogram_grid.as_str(),
            256,
            &[keys_in, n, "1", "8", &s.bins, &s.lookback],
        ),
        LaunchSpec::linear("radix_sort_bin_offsets", 8, 256, &[&s.bins]),
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
        plan.push(LaunchSpec::linear(
            "radix_sort_onesweep",
            tiles.as_str(),
            256,
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

/// `torch.arange(n)` (int64) into `out` as eager launches it: RangeFactories'
/// `elementwise_kernel_with_index` (`aten_arange_with_index_i64`), one element per thread,
/// blocks of 64.
pub fn arange_with_index(out: &str, n: &str) -> LaunchSpec {
    LaunchSpec::linear(
        "aten_arange_with_index_i64",
        format!("max(ceil_div({n}, 64), 1)").as_str(),
        64,
        &[out, "0", "1", n],
    )
}

/// `keys.sort(stable=True)` with the positions it came from, as eager's `sort` and `argsort`
/// run it: `positions = arange(n)` ([`arange_with_index`]), then [`radix_sort_pairs`] of (key, position) into
/// `sorted_keys` and `order`.
pub fn sort_with_positions(
    keys: &str,
    positions: &str,
    sorted_keys: &str,
    order: &str,
    n: &str,
    s: &SortScratch,
) -> Vec<LaunchSpec> {
    let mut plan = vec![arange_with_index(positions, n)];
    plan.extend(radix_sort_pairs(keys, positions, sorted_keys, order, n, s));
    plan
}

/// The run-length part of eager's `torch.unique(sorted=True, return_inverse=True)` once its
/// sort has run (problems 5 and 9): flags where the sorted keys change
/// (`unique_adjacent_difference` into `inv_loc`), their inclusive scan (`run`), the inverse
/// scattered back through the sort's `sorted_indices`, and each run's key and end (`unique`,
/// `run_ends`, `num_unique`). Reads `sorted`; scratch `inv_loc`, `run`, `scan_status`,
/// `run_ends` of the caller's.
pub fn unique_from_sorted(unique: &str, inverse: &str) -> Vec<LaunchSpec> {
    let mut plan = vec![apply_grid(
        "unique_adjacent_difference",
        "N",
        &["inv_loc", "sorted", "N"],
    )];
    plan.extend(inclusive_scan(
        "inclusive_sum_i32_to_i64",
        "inv_loc",
        "run",
        "N",
        "scan_status",
    ));
    plan.extend([
        apply_grid(
            "aten_scatter_i64",
            "N",
            &[inverse, "sorted_indices", "run", "N"],
        ),
        apply_grid(
            "unique_run_ends",
            "N",
            &["sorted", "run", unique, "run_ends", "num_unique", "N"],
        ),
    ]);
    plan
}

/// Eager's `torch.unique(indices, sorted=True, return_inverse=True)` over the N `indices`
/// (problems 5 and 9): `indices.sort(stable=True)` with its positions
/// ([`sort_with_positions`]: positions `range`, sorted keys `sorted`, their positions
/// `sorted_indices`, scratch [`SortScratch`] `sort`), then [`unique_from_sorted`] into `unique`
/// and `inverse`. Its N-sized temporaries are [`unique_scratch`].
pub fn unique_of_indices(unique: &str, inverse: &str) -> Vec<LaunchSpec> {
    let mut plan = sort_with_positions(
        "indices",
        "range",
        "sorted",
        "sorted_indices",
        "N",
        &SortScratch::new("sort"),
    );
    plan.extend(unique_from_sorted(unique, inverse));
    plan
}

/// The scratch of [`unique_of_indices`] before its outputs: the sort's positions, keys and
/// their positions, the run flags and their scan (with its tile state). The caller adds
/// `run_ends`, `num_unique`, the outputs it does not return and the sort's own scratch
/// (`SortScratch::new("sort").specs("N")`).
pub fn unique_scratch() -> Vec<ScratchSpec> {
    scratch_of(&[
        ("range", "max(N, 1) * 8"),
        ("sorted", "max(N, 1) * 8"),
        ("sorted_indices", "max(N, 1) * 8"),
        ("inv_loc", "max(N, 1) * 4"),
        ("run", "max(N, 1) * 8"),
        ("scan_status", &scan_status_bytes("N")),
    ])
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
    // Every feature draws its ids straight into its piece of the one buffer of all ids.
    let mut values = vec![0i64; counts.iter().sum()];
    split_by(&mut values, &counts)
        .into_par_iter()
        .zip(&config)
        .enumerate()
        .try_for_each(|(f, (ids, &(rows, _)))| {
            if let Some(id) = constant_id {
                ids.fill(id);
                return Ok(());
            }
            let table_seed = derive(derive_str(seed, "kjt-ids"), f as u64);
            // Hot rows scattered by a keyed permutation: no per-feature table of up to 4·10^7
            // entries.
            let sampler = IndexSampler::from_parts(
                data_gen::BoundedZipf::new(rows, KJT_ALPHA)?,
                RowPermutation::hashed(rows, derive_str(table_seed, "rows"))?,
            )?;
            sampler.sample_into(ids, table_seed);
            Ok::<_, ProblemError>(())
        })?;
    Ok(Kjt {
        lengths,
        values,
        rows: config.iter().map(|&(r, _)| r).collect(),
    })
}

/// Table rows are capped at this many at `ci` (the ids' range does not matter to a permute or a
/// bucketize, only their values do; small tables keep the generator quick).
pub fn kjt_max_rows(preset: Preset) -> u64 {
    match preset {
        Preset::Ci => 5000,
        Preset::Small | Preset::Full => u64::MAX,
    }
}

/// The recipe of a KJT's weights.
pub fn kjt_weights_recipe() -> serde_json::Value {
    serde_json::json!({"distribution": "uniform", "low": 0.0, "high": 1.0})
}

/// A KJT problem's input set under way, with the lengths and table rows of its KJT (what the
/// problem derives its other inputs from).
pub struct KjtInputs {
    pub set: InputSetBuilder,
    pub lengths: Vec<i32>,
    pub rows: Vec<u64>,
}

/// The KJT of `t` features × `b` samples of an input set of `seed` ([`kjt`] from the stream
/// `kjt`, tables capped by [`kjt_max_rows`]) as tensors: `lengths [T, B]` int32, the ids as
/// `values [N]` int64 (the problem names them), `weights [N]` fp32 uniform in [0, 1) (stream
/// `weights`), and the size N.
pub fn kjt_inputs(
    preset: Preset,
    sizes: &Sizes,
    seed: u64,
    (t, b): (usize, usize),
    values: &str,
    constant_id: Option<i64>,
) -> Result<KjtInputs, ProblemError> {
    let Kjt {
        lengths,
        values: ids,
        rows,
    } = kjt(
        t,
        b,
        derive_str(seed, "kjt"),
        kjt_max_rows(preset),
        constant_id,
    )?;
    let n = ids.len();
    let weights = uniform_f32(n, derive_str(seed, "weights"), 0.0, 1.0);
    let set = InputSet::builder(seed, sizes)
        .size("N", n)
        .i32("lengths", &[t, b], lengths.clone())?
        .i64(values, &[n], ids)?
        .f32("weights", &[n], weights)?;
    Ok(KjtInputs { set, lengths, rows })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sizes::sizes_of;

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

    #[test]
    fn kjt_inputs_count_the_values_and_name_the_ids() {
        let sizes = sizes_of(&[("T", 3), ("B", 8)]);
        let k = kjt_inputs(Preset::Ci, &sizes, 4, (3, 8), "ids", None).unwrap();
        let set = k.set.build();
        let n: i64 = k.lengths.iter().map(|&l| l as i64).sum();
        assert_eq!(set.sizes["N"], n);
        assert_eq!(set.i64s("lengths").unwrap().len(), 24);
        assert_eq!(set.i64s("ids").unwrap().len() as i64, n);
        let weights = set.f32s("weights").unwrap();
        assert_eq!(weights.len() as i64, n);
        assert!(weights.iter().all(|w| (0.0..1.0).contains(w)));
        assert_eq!(k.rows.len(), 3);
        let same = kjt_inputs(Preset::Ci, &sizes, 4, (3, 8), "ids", Some(0)).unwrap();
        assert!(same
            .set
            .build()
            .i64s("ids")
            .unwrap()
            .iter()
            .all(|&i| i == 0));
    }

    #[test]
    fn sub_plans_name_their_buffers() {
        let c = CumsumI32 {
            wide: "w",
            cum: "c",
            status: "s",
        };
        let plan = c.plan("lengths", "T * B");
        assert_eq!(plan[0].args, ["w", "lengths", "T * B"]);
        assert_eq!(plan.last().unwrap().args, ["w", "c", "T * B", "s"]);
        let names: Vec<String> = c.scratch("N").into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["w", "c", "s"]);
        let sort = sort_with_positions("k", "p", "sk", "o", "N", &SortScratch::new("x"));
        assert_eq!(sort.len(), 1 + 3 + 8);
        assert_eq!(sort[0].kernel, "aten_arange_with_index_i64");
        assert_eq!(sort[0].args, ["p", "0", "1", "N"]);
        assert_eq!(sort.last().unwrap().args[1], "sk");
        assert_eq!(exclusive_sums(&[2, 0, 3]), vec![0, 2, 2]);
        assert_eq!(empty_share(&[2, 0, 3, 0]), 0.5);
        let base = sizes_of(&[("B", 3), ("E", 9)]);
        assert_eq!(
            with_sizes(&base, &[("E", 1)]),
            sizes_of(&[("B", 3), ("E", 1)])
        );
        assert_eq!(sizes_in(&base, "p", ["E", "B"]).unwrap(), [9, 3]);
        assert!(sizes_in(&base, "p", ["D"]).is_err());
    }
}
