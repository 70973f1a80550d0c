//! The [`Problem`] trait: everything the runner knows about a problem.
use crate::check::Tolerance;
use crate::error::ProblemError;
use crate::input_set::{InputSet, Seeds};
use crate::launch::{LaunchSpec, ScratchSpec};
use crate::oracle::{Oracle, Work};
use crate::signature::TensorSpec;
use crate::sizes::{Preset, Sizes};
use data_gen::HostTensor;

/// One benchmark problem.
pub trait Problem: Send + Sync {
    /// Catalog number (1–12).
    fn number(&self) -> u32;
    /// Stable name, e.g. `embedding_bag_sum`.
    fn name(&self) -> &'static str;
    /// One line on what it computes.
    fn summary(&self) -> &'static str;
    /// The signature: named tensors in kernel-argument order.
    fn tensors(&self) -> Vec<TensorSpec>;
    /// Size symbols of a preset (before data-dependent ones).
    fn sizes(&self, preset: Preset) -> Sizes;
    /// The shapes a candidate is checked and timed at under `preset`, the first the preset's
    /// own sizes named [`crate::shapes::DEFAULT_SHAPE`] (by default that one only).
    fn shapes(&self, preset: Preset) -> Vec<crate::shapes::Shape> {
        vec![crate::shapes::Shape::default_of(self.sizes(preset))]
    }
    /// The shape this is, for a problem at one of its shapes ([`crate::shapes::AtShape`]).
    fn shape_name(&self) -> Option<&str> {
        None
    }
    /// The input recipe (distribution parameters) of a preset, for run records.
    fn recipe(&self, preset: Preset) -> serde_json::Value;
    /// Generates an input set for `sizes` with the recipe of `preset`, from `seeds`
    /// (deterministic whatever the thread count): embedding tables (and an in-place update's
    /// initial state) from `seeds.table` through [`crate::input_set::shared_table`], everything
    /// else from `seeds.set`.
    fn generate(
        &self,
        preset: Preset,
        sizes: &Sizes,
        seeds: Seeds,
    ) -> Result<InputSet, ProblemError>;
    /// Extra size sets worth checking once (edge cases such as a single bag).
    fn edge_sizes(&self, preset: Preset) -> Vec<Sizes> {
        let _ = preset;
        Vec::new()
    }
    /// The edge sets at the sizes `base` of one of the problem's shapes: by default
    /// [`Problem::edge_sizes`] with the symbols `base` changes from the preset's sizes changed
    /// alike wherever the edge set keeps the preset's value ([`crate::shapes::overlay_edges`]).
    /// A problem whose edge sets follow from its sizes by a rule that overlay would break (an
    /// edge set that sets E from N) builds them from `base` itself.
    fn edge_sizes_at(&self, preset: Preset, base: &Sizes) -> Vec<Sizes> {
        crate::shapes::overlay_edges(&self.sizes(preset), self.edge_sizes(preset), base)
    }
    /// Names of the input sets with special values (±inf, NaN, −0, ties, all-equal) that the
    /// runner checks like edge sets (`special-<name>`), never times. The oracle must say what
    /// each output is on them (NaN where eager gives NaN).
    fn special_sets(&self) -> Vec<&'static str> {
        Vec::new()
    }
    /// Generates special-value set `name` (one of [`Problem::special_sets`]) at `preset`'s
    /// sizes from `seeds`.
    fn generate_special(
        &self,
        name: &str,
        preset: Preset,
        seeds: Seeds,
    ) -> Result<InputSet, ProblemError> {
        let _ = (preset, seeds);
        Err(ProblemError::invalid(
            self.name(),
            format!("no special-value input set `{name}`"),
        ))
    }
    /// The oracle: every output (and in-out tensor after the update), by name.
    fn oracle(&self, inputs: &InputSet) -> Result<Oracle, ProblemError>;
    /// Tolerance of an output; by default from its dtype.
    fn tolerance(&self, output: &TensorSpec) -> Tolerance {
        Tolerance::for_dtype(output.dtype)
    }
    /// Bytes and flops of an input set.
    fn work(&self, inputs: &InputSet) -> Work;
    /// Outputs whose valid length depends on the data (a unique count, bucketized lengths):
    /// only the first `oracle.len()` elements are checked (and must not hold poison); the rest
    /// of the buffer is free. The valid length itself should be a scalar output, checked exactly.
    fn checked_prefix(&self, output: &str) -> bool {
        let _ = output;
        false
    }
    /// Inputs of row ids that the timing may relabel, with the size symbol of their bound:
    /// before each timed pair every id `r` of such an input becomes `σ(r)` for a bijection `σ`
    /// of `0..bound` drawn for that pair, on the device, and reference and candidate run on the
    /// result. The multiset of row popularities (the skew, the bag lengths, the distinct rows)
    /// stays as generated, and the answer changes, so no timed run finds inputs an earlier run
    /// saw: a memo of earlier answers, wherever it was kept, misses. Only for problems whose
    /// timed outputs are all compared with the reference's (floats and in-place updates) and
    /// whose kernels accept any id below the bound. None by default.
    fn relabeled_inputs(&self) -> Vec<(&'static str, &'static str)> {
        Vec::new()
    }
    /// Whether [`Problem::custom_check`] inspects `output`. An exact output (tolerance `exact`)
    /// that is not custom-checked passes when its fingerprint on the device equals that of the
    /// oracle's bytes, without being copied to the host; a custom-checked one is always copied
    /// and given to `custom_check`. A problem that overrides `custom_check` must say here which
    /// outputs it looks at.
    fn custom_checked(&self, output: &str) -> bool {
        let _ = output;
        false
    }
    /// An extra check of one output beyond the tolerance test; `Some(reason)` fails it. (Rows an
    /// in-place update must leave bit-identical need none: give the oracle as
    /// [`crate::OracleOutput::Rows`].) Declare the outputs it inspects in
    /// [`Problem::custom_checked`].
    fn custom_check(
        &self,
        output: &TensorSpec,
        got: &HostTensor,
        inputs: &InputSet,
    ) -> Option<String> {
        let _ = (output, got, inputs);
        None
    }
    /// Statistics of an input set for run records (skew, pooling, ...).
    fn input_stats(&self, inputs: &InputSet) -> serde_json::Value {
        let _ = inputs;
        serde_json::Value::Null
    }
    /// The reference launch plan (kernels from `gpu-kernels`).
    fn reference(&self) -> Vec<LaunchSpec>;
    /// Scratch buffers the reference plan needs (side outputs eager PyTorch also writes).
    fn reference_scratch(&self) -> Vec<ScratchSpec> {
        Vec::new()
    }
}

/// The identity methods of a [`Problem`] impl (`number`, `name`, `summary`) in one line:
/// `problem_identity!(1, "embedding_bag_sum", "one fp32 table, sum pooling");`.
macro_rules! problem_identity {
    ($number:expr, $name:expr, $summary:expr $(,)?) => {
        fn number(&self) -> u32 {
            $number
        }

        fn name(&self) -> &'static str {
            $name
        }

        fn summary(&self) -> &'static str {
            $summary
        }
    };
}
pub(crate) use problem_identity;
