//! The CSR embedding-bag family, problems 1–5: what the bag problems share, so that each
//! problem module keeps to its specifics (what it computes, its dtypes, its recipe constants,
//! its oracle, its special tests).
//!
//! - Signature: [`weight`], [`INDICES`], [`OFFSETS`], [`per_sample_weights`], [`out`]
//!   (PyTorch's names; offsets are CSR with B + 1 entries, `include_last_offset=True`), and
//!   the forward problems' whole signature ([`forward_signature`]).
//! - Sizes: E, D, B per preset ([`BagSizes`]), the table's [`table_dims`], and the one-bag edge
//!   set ([`one_bag`]).
//! - Inputs: a [`BagRecipe`] draws the bag lengths ([`bag_lengths`]: log-normal, some bags
//!   emptied, bag 0 empty, bag B/2 of the longest length) and Zipf row indices; [`Bags`] starts
//!   the input set with `N`, `indices` and `offsets`.
//! - Oracle: [`Bags::of`] reads the bags of an input set, [`Bags::pool`] sum-pools them in f64,
//!   [`pooled_oracle`] and [`pooled_weight_oracle`] are a forward problem's whole oracle.
//! - Work: [`Counts`] (distinct rows, lookups, index bytes) and [`Counts::forward_work`].
//! - Statistics: [`input_stats`], the [`data_gen::InputStats`] every embedding problem reports.
//! - Reference: PyTorch's embedding-bag launch ([`embedding_bag_launch`],
//!   [`embedding_bag_plan`]) and the side outputs it writes ([`embedding_bag_scratch`]).
use crate::error::ProblemError;
use crate::families::rows::Rows;
use crate::input_set::{shared_table, InputSet, InputSetBuilder, Seeds};
use crate::launch::{LaunchSpec, ScratchSpec};
use crate::oracle::{oracle_of, Gathered, Oracle, OracleOutput, Work};
use crate::signature::TensorSpec;
use crate::sizes::{size, sizes_of, Preset, Sizes};
use data_gen::{
    bag_indices, offsets_from_lengths, seed::derive_str, uniform_f32_at, DType, HostTensor,
    IndexRecipe, Pooling,
};
use rayon::prelude::*;
use serde_json::{json, Value};
use std::ops::Range;

/// `indices` [N]: int64 rows, bag after bag.
pub const INDICES: TensorSpec = TensorSpec::input("indices", DType::I64, &["N"]);
/// `offsets` [B + 1]: where each bag starts in `indices`, and N last.
pub const OFFSETS: TensorSpec = TensorSpec::input("offsets", DType::I64, &["B + 1"]);

/// `weight` [E, D], the table.
pub const fn weight(dtype: DType) -> TensorSpec {
    TensorSpec::input("weight", dtype, &["E", "D"])
}

/// `per_sample_weights` [N]: one scale per lookup.
pub const fn per_sample_weights(dtype: DType) -> TensorSpec {
    TensorSpec::input("per_sample_weights", dtype, &["N"])
}

/// `out` [B, D]: one pooled row per bag.
pub const fn out(dtype: DType) -> TensorSpec {
    TensorSpec::output("out", dtype, &["B", "D"])
}

/// The signature of a forward bag problem: `weight`, [`INDICES`], [`OFFSETS`], then
/// [`per_sample_weights`] of dtype `psw` when there are any, and [`out`] of dtype `out`.
pub fn forward_signature(weight: TensorSpec, psw: Option<DType>, out: DType) -> Vec<TensorSpec> {
    let mut tensors = vec![weight, INDICES, OFFSETS];
    tensors.extend(psw.map(per_sample_weights));
    tensors.push(self::out(out));
    tensors
}

/// E, D, B of a single-table problem at `small` and `full`; `ci` is [`BagSizes::CI`] for all.
pub struct BagSizes {
    pub small: (i64, i64, i64),
    pub full: (i64, i64, i64),
}

impl BagSizes {
    /// Every single-table problem at `ci`: D = 40 is not a multiple of 32, so column chunks are
    /// partial (and it is a multiple of 4, as PyTorch's byte-rowwise kernel needs).
    pub const CI: (i64, i64, i64) = (4096, 40, 64);

    /// docs/design.md §3's table of problems 1 and 2: E = 8M, D = 128, B = 131072.
    pub const DEFAULT: BagSizes = BagSizes {
        small: (1 << 20, 128, 16384),
        full: (8 << 20, 128, 131072),
    };

    /// The sizes E, D, B of `preset`.
    pub fn of(&self, preset: Preset) -> Sizes {
        let (e, d, b) = match preset {
            Preset::Ci => Self::CI,
            Preset::Small => self.small,
            Preset::Full => self.full,
        };
        sizes_of(&[("E", e), ("D", d), ("B", b)])
    }
}

/// The recipe knob of a bag shape: `POOL = 1` makes every bag one lookup (one-hot features;
/// bag 0 still empty), any other value keeps the recipe's heavy-tailed lengths.
pub const POOL: &str = "POOL";

/// The timed shapes of a one-table bag problem of `base` sizes (E, D, B) under `preset`: the
/// default, the table narrower and wider with its bytes kept (E × D constant: a memory budget
/// per table), and one-hot bags. At `ci` the default and one-hot only.
pub fn table_shapes(base: Sizes, preset: Preset) -> Vec<crate::shapes::Shape> {
    let (e, d) = (base["E"], base["D"]);
    let one_hot: crate::shapes::Variation =
        ("one-hot", &[(POOL, 1)], "one lookup per bag (bag 0 empty)");
    match preset {
        Preset::Ci => crate::shapes::shapes_of(base, &[one_hot]),
        _ => crate::shapes::shapes_of(
            base,
            &[
                (
                    "d32",
                    &[("D", 32), ("E", e * d / 32)],
                    "D = 32 (Criteo Kaggle's 16 to 64), the table's bytes kept",
                ),
                (
                    "d256",
                    &[("D", 256), ("E", e * d / 256)],
                    "D = 256, the table's bytes kept",
                ),
                one_hot,
            ],
        ),
    }
}

/// E and D of `sizes` as counts: the table's rows and width.
pub fn table_dims(problem: &str, sizes: &Sizes) -> Result<(usize, usize), ProblemError> {
    Ok((
        size(sizes, problem, "E")? as usize,
        size(sizes, problem, "D")? as usize,
    ))
}

/// The table `weight` [E, D] of `problem` in `dtype` (f32, bf16 or f16), uniform in [-1, 1)
/// from `table_seed`, shared by every input set of the seed ([`shared_table`]).
pub fn uniform_table(
    problem: &str,
    [e, d]: [usize; 2],
    dtype: DType,
    table_seed: u64,
) -> Result<HostTensor, ProblemError> {
    shared_table(problem, "weight", &[e, d], table_seed, |seed| {
        let bytes = data_gen::uniform_bytes(e * d, derive_str(seed, "weight"), -1.0, 1.0, dtype);
        Ok(HostTensor::new(dtype, vec![e, d], bytes)?)
    })
}

/// The one-bag edge set: `sizes` with B = 1.
pub fn one_bag(mut sizes: Sizes) -> Sizes {
    sizes.insert("B".into(), 1);
    sizes
}

/// The extra input sets of a forward bag problem, in its `impl Problem`: the one-bag edge set
/// and the [`NON_FINITE_ROWS`] special-value set.
macro_rules! bag_check_sets {
    () => {
        fn edge_sizes(&self, preset: $crate::Preset) -> Vec<$crate::Sizes> {
            vec![$crate::families::bags::one_bag(self.sizes(preset))]
        }

        fn special_sets(&self) -> Vec<&'static str> {
            vec![$crate::families::bags::NON_FINITE_ROWS]
        }

        fn generate_special(
            &self,
            name: &str,
            preset: $crate::Preset,
            seeds: $crate::Seeds,
        ) -> Result<$crate::InputSet, $crate::ProblemError> {
            $crate::families::bags::special_set(self, name, preset, seeds)
        }
    };
}
pub(crate) use bag_check_sets;

/// The methods every one-table bag problem (1, 2, 4 and 5) implements alike, in its
/// `impl Problem`: its `indices` are rows of the E-row table, relabeled over them in timed runs
/// ([`Problem::relabeled_inputs`](crate::problem::Problem::relabeled_inputs)), and its input
/// statistics are [`input_stats`]'s.
macro_rules! bag_table_methods {
    () => {
        fn relabeled_inputs(&self) -> Vec<(&'static str, &'static str)> {
            vec![("indices", "E")]
        }

        fn input_stats(&self, inputs: &$crate::InputSet) -> serde_json::Value {
            $crate::families::bags::input_stats(inputs)
        }
    };
}
pub(crate) use bag_table_methods;

/// Special-value set `name` of a bag problem: [`NON_FINITE_ROWS`] is the only one.
pub fn special_set(
    problem: &dyn crate::problem::Problem,
    name: &str,
    preset: Preset,
    seeds: Seeds,
) -> Result<InputSet, ProblemError> {
    match name {
        NON_FINITE_ROWS => non_finite_rows(problem, preset, seeds),
        _ => Err(ProblemError::invalid(
            problem.name(),
            format!("no special-value set `{name}`"),
        )),
    }
}

/// Name of the special-value set of [`non_finite_rows`].
pub const NON_FINITE_ROWS: &str = "non-finite-rows";

/// Rows of the table of the special-value set at most: the set is about how NaN and infinities
/// flow through the sums, and a table of its own (its rows are written) should not cost
/// gigabytes at `full`.
pub const SPECIAL_SET_ROWS: i64 = 1 << 16;

/// The special-value set of a bag problem (`Problem::special_sets`): a generated set (the
/// preset's sizes with at most [`SPECIAL_SET_ROWS`] table rows) whose weight rows looked up
/// first by the first four nonempty bags start with NaN, +inf, −inf and −0, so those bags' sums
/// must carry NaN and infinities exactly as eager's do.
pub fn non_finite_rows(
    problem: &dyn crate::problem::Problem,
    preset: Preset,
    seeds: Seeds,
) -> Result<InputSet, ProblemError> {
    let mut sizes = problem.sizes(preset);
    sizes
        .entry("E".into())
        .and_modify(|e| *e = (*e).min(SPECIAL_SET_ROWS));
    let set = problem.generate(preset, &sizes, seeds)?;
    let (indices, offsets) = (set.i64s("indices")?, set.i64s("offsets")?);
    let rows: Vec<usize> = offsets
        .windows(2)
        .filter(|w| w[1] > w[0])
        .take(crate::special::SPECIAL_VALUES.len())
        .map(|w| indices[w[0] as usize] as usize)
        .collect();
    let d = set.count("D");
    crate::special::with_special_values(set, "weight", d, &rows)
}

/// The log-normal bag lengths (σ = 1) of a single-table problem: mean 8 up to 64 at `ci` (short
/// bags for the emulator), `mean` up to 1000 at `small` and `full`.
pub fn log_normal_pooling(preset: Preset, mean: f64) -> Pooling {
    match preset {
        Preset::Ci => Pooling::LogNormal {
            mean: 8.0,
            sigma: 1.0,
            max: 64,
        },
        Preset::Small | Preset::Full => Pooling::LogNormal {
            mean,
            sigma: 1.0,
            max: 1000,
        },
    }
}

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

/// How a single-table problem draws its bags: Zipf(`alpha`) rows with the hot rows scattered
/// over the table, lengths from `pooling`, a share of the bags emptied.
#[derive(Clone, Debug)]
pub struct BagRecipe {
    pub alpha: f64,
    pub pooling: Pooling,
    /// Share of the bags emptied after their lengths are drawn (bag 0 is empty in any case).
    pub empty_fraction: f64,
}

impl BagRecipe {
    /// Zipf(`alpha`) rows, [`log_normal_pooling`] of `mean`, no bags emptied but bag 0.
    pub fn new(preset: Preset, alpha: f64, mean: f64) -> Self {
        BagRecipe {
            alpha,
            pooling: log_normal_pooling(preset, mean),
            empty_fraction: 0.0,
        }
    }

    /// The same with `fraction` of the bags emptied.
    pub fn with_empty_fraction(mut self, fraction: f64) -> Self {
        self.empty_fraction = fraction;
        self
    }

    /// The recipe for run records: `indices`, `pooling` (and `empty_bag_fraction`),
    /// `edge_cases`, with the problem's own entries (`values`: its tensors' distributions,
    /// scalars) added.
    pub fn record(&self, values: Value) -> Value {
        let mut edge_cases = vec![
            "bag 0 empty".to_string(),
            "bag B/2 of the longest length".into(),
        ];
        let mut record = json!({
            "indices": {"distribution": "bounded_zipf", "alpha": self.alpha, "scatter_hot_rows": true},
            "pooling": self.pooling,
        });
        if self.empty_fraction > 0.0 {
            let percent = self.empty_fraction * 100.0;
            edge_cases.insert(0, format!("{percent}% of bags empty"));
            record["empty_bag_fraction"] = json!(self.empty_fraction);
        }
        record["edge_cases"] = json!(edge_cases);
        if let (Some(record), Value::Object(values)) = (record.as_object_mut(), values) {
            record.extend(values);
        }
        record
    }

    /// The bags of an input set of `sizes` (B bags over E rows) from `seed`: lengths from
    /// [`bag_lengths`], rows from the stream `indices`.
    pub fn draw(&self, problem: &str, sizes: &Sizes, seed: u64) -> Result<Bags, ProblemError> {
        let (e, b) = (size(sizes, problem, "E")?, size(sizes, problem, "B")?);
        let pooling = match sizes.get(POOL) {
            Some(&1) => Pooling::Fixed { length: 1 },
            _ => self.pooling.clone(),
        };
        let lengths = bag_lengths(&pooling, b as usize, seed, self.empty_fraction)?;
        let recipe = IndexRecipe {
            rows: e as u64,
            alpha: self.alpha,
            scatter_hot_rows: true,
        };
        let indices = bag_indices(&recipe, &lengths, derive_str(seed, "indices"))?;
        Ok(Bags {
            indices,
            offsets: offsets_from_lengths(&lengths),
        })
    }
}

/// CSR bags: bag b looks up `indices[offsets[b]..offsets[b + 1]]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Bags {
    pub indices: Vec<i64>,
    pub offsets: Vec<i64>,
}

impl Bags {
    /// The bags of an input set (its `indices` and `offsets`).
    pub fn of(inputs: &InputSet) -> Result<Self, ProblemError> {
        Ok(Bags {
            indices: inputs.i64s("indices")?,
            offsets: inputs.i64s("offsets")?,
        })
    }

    /// Lookups (N).
    pub fn n(&self) -> usize {
        self.indices.len()
    }

    /// Number of bags.
    pub fn count(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Positions in `indices` of bag `bag`'s lookups.
    pub fn lookups(&self, bag: usize) -> Range<usize> {
        self.offsets[bag] as usize..self.offsets[bag + 1] as usize
    }

    /// Starts the input set of `seed` and `sizes` with these bags: size `N`, `indices` [N] and
    /// `offsets`.
    pub fn builder(self, seed: u64, sizes: &Sizes) -> Result<InputSetBuilder, ProblemError> {
        let (n, ends) = (self.n(), self.offsets.len());
        InputSet::builder(seed, sizes)
            .size("N", n)
            .i64("indices", &[n], self.indices)?
            .i64("offsets", &[ends], self.offsets)
    }

    /// Sum pooling in f64, bags in parallel: bag b's `d` accumulators (from 0) get
    /// `add(acc, j, row)` for each of its lookups j (row `indices[j]`), in order.
    pub fn pool(&self, d: usize, add: impl Fn(&mut [f64], usize, usize) + Sync) -> Vec<f64> {
        self.pool_with(d, || (), |_, acc, j, row| add(acc, j, row))
    }

    /// [`Bags::pool`] with a scratch value per worker (`init()`, e.g. a row buffer) handed to
    /// every `add(scratch, acc, j, row)`; the sums are the same whatever the thread count.
    pub fn pool_with<S>(
        &self,
        d: usize,
        init: impl Fn() -> S + Sync + Send,
        add: impl Fn(&mut S, &mut [f64], usize, usize) + Sync,
    ) -> Vec<f64> {
        let mut out = vec![0.0f64; self.count() * d];
        out.par_chunks_mut(d)
            .enumerate()
            .for_each_init(init, |scratch, (bag, acc)| {
                for j in self.lookups(bag) {
                    add(scratch, acc, j, self.indices[j] as usize);
                }
            });
        out
    }
}

/// The oracle of a forward problem: `out` [B, D] sum-pooled in f64 by [`Bags::pool`] (`add(acc,
/// j, row)` adds lookup j, of table row `row`, to its bag's D accumulators `acc`).
pub fn pooled_oracle(
    problem: &str,
    inputs: &InputSet,
    add: impl Fn(&mut [f64], usize, usize) + Sync,
) -> Result<Oracle, ProblemError> {
    let d = size(&inputs.sizes, problem, "D")? as usize;
    let out = Bags::of(inputs)?.pool(d, add);
    Ok(oracle_of([("out", OracleOutput::Float(out))]))
}

/// [`pooled_oracle`] over a `weight` [E, D] that reads as f32: `add(acc, j, w)` gets lookup j's
/// row `w` of `weight`. Only the looked-up rows are decoded (from the tensor's bytes, as
/// `to_f32_vec` would), one at a time: the work is the lookups', not the table's.
pub fn pooled_weight_oracle(
    problem: &str,
    inputs: &InputSet,
    add: impl Fn(&mut [f64], usize, &[f32]) + Sync,
) -> Result<Oracle, ProblemError> {
    let d = size(&inputs.sizes, problem, "D")? as usize;
    let weight = Rows::named(problem, inputs, "weight")?;
    if weight.width() != d {
        return Err(ProblemError::invalid(
            problem,
            format!("`weight` rows have {} elements, D = {d}", weight.width()),
        ));
    }
    let out = Bags::of(inputs)?.pool_with(
        d,
        || vec![0.0f32; d],
        |row_buf, acc, j, row| {
            weight.f32_into(row, row_buf);
            add(acc, j, row_buf);
        },
    );
    Ok(oracle_of([("out", OracleOutput::Float(out))]))
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

/// What the work of an input set is made of, as f64: D, B, N and the distinct rows looked up.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Counts {
    pub d: f64,
    pub b: f64,
    pub n: f64,
    pub distinct: f64,
}

impl Counts {
    /// Of a single-table set: the distinct rows are those of `indices` in `0..E` (0 without
    /// indices).
    pub fn of(inputs: &InputSet) -> Self {
        Self::over(inputs, inputs.i64s("indices").ok().as_deref())
    }

    /// The same with the distinct rows counted over `rows` (e.g. global row ids), in `0..E`.
    pub fn over(inputs: &InputSet, rows: Option<&[i64]>) -> Self {
        let distinct = rows.map_or(0, |r| distinct_rows(r, inputs.count("E")));
        let s = |k: &str| inputs.count(k) as f64;
        Counts {
            d: s("D"),
            b: s("B"),
            n: s("N"),
            distinct: distinct as f64,
        }
    }

    /// Bytes of `indices` [N] and `offsets` [B + 1].
    pub fn index_bytes(&self) -> f64 {
        self.n * 8.0 + (self.b + 1.0) * 8.0
    }

    /// Work of a forward pass that gathers rows of `row_bytes`: compulsory, each distinct row
    /// once; logical (FBGEMM's), every lookup's row; both with the index and output bytes.
    pub fn forward_work(
        &self,
        row_bytes: f64,
        index_bytes: f64,
        out_bytes: f64,
        flops: f64,
    ) -> Work {
        Work {
            compulsory_bytes: self.distinct * row_bytes + index_bytes + out_bytes,
            logical_bytes: self.n * row_bytes + index_bytes + out_bytes,
            flops,
            gathered: Some(Gathered {
                row_bytes,
                distinct_bytes: self.distinct * row_bytes,
                lookup_bytes: self.n * row_bytes,
            }),
        }
    }
}

/// Input statistics of CSR bags for run records: the same [`data_gen::InputStats`] every
/// embedding problem reports (pooling, distinct rows, reuse, hot-row shares over `rows` rows).
pub fn bag_stats(offsets: &[i64], indices: &[i64], rows: usize) -> Value {
    serde_json::to_value(data_gen::bag_stats(indices, offsets, rows as u64)).unwrap_or(Value::Null)
}

/// [`bag_stats`] of a single-table input set (its `offsets`, `indices`, E rows); null when the
/// set lacks them.
pub fn input_stats(inputs: &InputSet) -> Value {
    match (inputs.i64s("offsets"), inputs.i64s("indices")) {
        (Ok(offsets), Ok(indices)) => bag_stats(&offsets, &indices, inputs.count("E")),
        _ => Value::Null,
    }
}

/// A launch with PyTorch's shape for its embedding-bag kernel
/// (aten/src/ATen/native/cuda/EmbeddingBag.cu, `_embedding_bag_cuda`): grid 1024, block
/// (32, 8); the min() only trims blocks that would find no work at small sizes (identical at
/// `full`).
pub fn embedding_bag_launch(kernel: &str, args: &[&str]) -> LaunchSpec {
    LaunchSpec::new(
        kernel,
        [
            "min(1024, ceil_div(B * ceil_div(D, 32), 8))".into(),
            1.into(),
            1.into(),
        ],
        [32.into(), 8.into(), 1.into()],
        args,
    )
}

/// PyTorch's one launch for a single table: its arguments in its order, `per_sample_weights`
/// when `weighted`, padding_idx = -1.
pub fn embedding_bag_plan(kernel: &str, weighted: bool) -> Vec<LaunchSpec> {
    let mut args = vec![
        "indices",
        "offsets",
        "weight",
        "out",
        "offset2bag",
        "N",
        "B",
        "D",
        "bag_size",
    ];
    if weighted {
        args.push("per_sample_weights");
    }
    // padding_idx (-1, as `F.embedding_bag` passes it) and numRows (weight.size(0)).
    args.extend(["-1", "E"]);
    vec![embedding_bag_launch(kernel, &args)]
}

/// `bag_size` of a single table: B + 1 int64 entries.
pub const BAG_SIZE_BYTES: &str = "(B + 1) * 8";

/// The side outputs PyTorch's kernel writes too: `offset2bag` (an int64 per lookup) and
/// `bag_size` of `bag_size_bytes`.
pub fn embedding_bag_scratch(bag_size_bytes: &str) -> Vec<ScratchSpec> {
    vec![
        ScratchSpec::new("offset2bag", "max(N, 1) * 8"),
        ScratchSpec::new("bag_size", bag_size_bytes),
    ]
}

/// Checks of generated bags the problems' tests share.
#[cfg(test)]
pub mod testing {
    use super::*;

    /// `set` holds B bags over E rows, CSR-consistent with N, bag 0 empty and bag B/2 of
    /// length `longest`.
    pub fn assert_well_formed(set: &InputSet, longest: i64) {
        let (b, e) = (set.count("B"), set.count("E") as i64);
        let Bags { indices, offsets } = Bags::of(set).unwrap();
        assert_eq!(offsets.len(), b + 1);
        assert_eq!(offsets[0], 0);
        assert_eq!(*offsets.last().unwrap() as usize, indices.len());
        assert_eq!(offsets[1] - offsets[0], 0, "bag 0 is empty");
        assert_eq!(
            offsets[b / 2 + 1] - offsets[b / 2],
            longest,
            "bag B/2 is the longest"
        );
        assert!(offsets.windows(2).all(|w| w[0] <= w[1]));
        assert!(indices.iter().all(|&i| (0..e).contains(&i)));
        assert_eq!(set.sizes["N"], indices.len() as i64);
    }
}

#[cfg(test)]
mod tests {
    use super::testing::assert_well_formed;
    use super::*;
    use crate::launch::Dim;

    fn ci_set(recipe: &BagRecipe, seed: u64) -> InputSet {
        let sizes = BagSizes::DEFAULT.of(Preset::Ci);
        let bags = recipe.draw("p", &sizes, seed).unwrap();
        bags.builder(seed, &sizes).unwrap().build()
    }

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
    fn no_empty_fraction_is_the_plain_draw_with_the_edge_bags() {
        // What problem 1 drew inline before the family: the same stream, the same edge bags.
        for preset in Preset::ALL {
            let pooling = log_normal_pooling(preset, 20.0);
            for (bags, seed) in [(64, 5), (2, 1), (20_000, 9)] {
                let mut inline = pooling.lengths(bags, derive_str(seed, "lengths")).unwrap();
                if inline.len() >= 3 {
                    inline[0] = 0;
                    inline[bags / 2] = pooling.max_length();
                }
                assert_eq!(bag_lengths(&pooling, bags, seed, 0.0).unwrap(), inline);
            }
        }
    }

    #[test]
    fn drawn_bags_are_well_formed_and_include_the_edge_bags() {
        let recipe = BagRecipe::new(Preset::Ci, 1.15, 20.0);
        let set = ci_set(&recipe, 5);
        assert_well_formed(&set, 64);
        assert_eq!(set.i64s("offsets").unwrap().len(), 65);
        assert_eq!(
            ci_set(&recipe, 5).tensors,
            set.tensors,
            "deterministic for a seed"
        );
        assert_ne!(ci_set(&recipe, 6).tensors, set.tensors);
        let one = one_bag(BagSizes::DEFAULT.of(Preset::Full));
        assert_eq!((one["B"], one["E"], one["D"]), (1, 8 << 20, 128));
    }

    #[test]
    fn the_record_says_how_the_bags_are_drawn() {
        let r = BagRecipe::new(Preset::Full, 1.09, 30.0).record(json!({"weight": "w"}));
        assert_eq!(r["indices"]["alpha"], 1.09);
        assert_eq!(r["pooling"]["mean"], 30.0);
        assert_eq!(r["weight"], "w");
        assert_eq!(r["edge_cases"][1], "bag B/2 of the longest length");
        assert!(r.get("empty_bag_fraction").is_none());
        let r = BagRecipe::new(Preset::Ci, 1.15, 20.0)
            .with_empty_fraction(0.05)
            .record(json!({}));
        assert_eq!(r["empty_bag_fraction"], 0.05);
        assert_eq!(r["edge_cases"][0], "5% of bags empty");
        assert_eq!(r["pooling"]["mean"], 8.0);
    }

    #[test]
    fn pool_sums_each_bags_lookups_in_order() {
        let bags = Bags {
            indices: vec![2, 0, 2, 1],
            offsets: vec![0, 0, 3, 4],
        };
        assert_eq!((bags.count(), bags.n(), bags.lookups(1)), (3, 4, 0..3));
        let out = bags.pool(2, |acc, j, row| {
            acc[0] += row as f64;
            acc[1] += j as f64;
        });
        assert_eq!(out, vec![0.0, 0.0, 4.0, 3.0, 1.0, 3.0]);
    }

    #[test]
    fn the_pooled_oracle_hands_each_lookup_its_weight_row() {
        let set = InputSet::builder(1, &sizes_of(&[("E", 3), ("D", 2), ("B", 2)]))
            .i64("indices", &[3], vec![2, 0, 2])
            .unwrap()
            .i64("offsets", &[3], vec![0, 1, 3])
            .unwrap()
            .f32("weight", &[3, 2], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
            .unwrap()
            .build();
        assert_eq!(table_dims("p", &set.sizes).unwrap(), (3, 2));
        let oracle = pooled_weight_oracle("p", &set, |acc, j, row| {
            acc[0] += row[0] as f64 * j as f64;
            acc[1] += row[1] as f64;
        });
        let out = vec![0.0, 6.0, 1.0 + 5.0 * 2.0, 2.0 + 6.0];
        assert_eq!(oracle.unwrap()["out"], OracleOutput::Float(out));
        let rows = pooled_oracle("p", &set, |acc, _, row| acc[0] += row as f64).unwrap();
        assert_eq!(rows["out"], OracleOutput::Float(vec![2.0, 0.0, 2.0, 0.0]));
        assert!(pooled_oracle("p", &InputSet::default(), |_, _, _| ()).is_err());
    }

    #[test]
    fn touched_rows_and_stats_count_what_they_see() {
        assert_eq!(
            touched_rows(&[3, 3, 0, 9], 5),
            vec![true, false, false, true, false]
        );
        assert_eq!(distinct_rows(&[3, 3, 5, 0, 5], 8), 3);
        let s = bag_stats(&[0, 0, 3, 4], &[1, 1, 2, 1], 4);
        assert_eq!(s["bags"], 3);
        assert_eq!(s["empty_bags"], 1);
        assert_eq!(s["max_pooling"], 3);
        assert_eq!(s["distinct_rows"], 2);
        assert_eq!(s["mean_reuse"], 2.0);
    }

    #[test]
    fn input_stats_describe_the_skew() {
        let set = ci_set(&BagRecipe::new(Preset::Ci, 1.15, 20.0), 3);
        let stats = input_stats(&set);
        let top1 = stats["top1pct_share"].as_f64().expect("top-1% share");
        assert!(
            top1 > 0.1,
            "Zipf 1.15 puts well over 1% of lookups on the top 1% of rows: {stats}"
        );
        assert_eq!(stats["lookups"].as_u64(), Some(set.sizes["N"] as u64));
        assert_eq!(input_stats(&InputSet::default()), Value::Null);
    }

    #[test]
    fn work_counts_distinct_rows_once_and_every_lookup() {
        let set = InputSet::builder(1, &sizes_of(&[("E", 8), ("D", 2), ("B", 2)]))
            .size("N", 5)
            .i64("indices", &[5], vec![3, 3, 5, 0, 5])
            .unwrap()
            .build();
        let c = Counts::of(&set);
        assert_eq!((c.d, c.b, c.n, c.distinct), (2.0, 2.0, 5.0, 3.0));
        assert_eq!(c.index_bytes(), 5.0 * 8.0 + 3.0 * 8.0);
        let w = c.forward_work(8.0, 64.0, 16.0, 10.0);
        assert_eq!(
            (w.compulsory_bytes, w.logical_bytes, w.flops),
            (3.0 * 8.0 + 80.0, 5.0 * 8.0 + 80.0, 10.0)
        );
        assert_eq!(Counts::over(&set, None).distinct, 0.0);
    }

    #[test]
    fn the_forward_signature_has_pytorchs_names_in_order() {
        let names = |t: Vec<TensorSpec>| t.iter().map(|t| t.name).collect::<Vec<_>>();
        let plain = forward_signature(weight(DType::F32), None, DType::F32);
        assert_eq!(names(plain), ["weight", "indices", "offsets", "out"]);
        let weighted = forward_signature(weight(DType::BF16), Some(DType::BF16), DType::BF16);
        assert_eq!(weighted[3], per_sample_weights(DType::BF16));
        assert_eq!(
            weighted[4],
            TensorSpec::output("out", DType::BF16, &["B", "D"])
        );
        assert_eq!(weighted[2].shape, ["B + 1"]);
    }

    #[test]
    fn the_plan_is_pytorchs_launch_with_its_arguments() {
        let [plain] = &embedding_bag_plan("k", false)[..] else {
            panic!()
        };
        let [weighted] = &embedding_bag_plan("k", true)[..] else {
            panic!()
        };
        assert_eq!(plain.block, [32, 8, 1].map(Dim::from));
        assert_eq!(
            plain.grid[0],
            Dim::from("min(1024, ceil_div(B * ceil_div(D, 32), 8))")
        );
        assert_eq!(plain.args.len(), 11);
        assert_eq!(plain.args[..9], weighted.args[..9]);
        assert_eq!(plain.args[9..], ["-1", "E"]);
        assert_eq!(weighted.args[9..], ["per_sample_weights", "-1", "E"]);
        let scratch = embedding_bag_scratch(BAG_SIZE_BYTES);
        assert_eq!(scratch[0], ScratchSpec::new("offset2bag", "max(N, 1) * 8"));
        assert_eq!(scratch[1].bytes, Dim::from("(B + 1) * 8"));
    }
}
