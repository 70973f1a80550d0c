//! The vocabulary of a problem: tensor specs, roles, presets, sizes, input sets, oracle outputs
//! and work counts, and the [`Problem`] trait itself.
use crate::check::Tolerance;
use crate::launch::LaunchSpec;
use data_gen::{DType, HostTensor, TensorSet};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Values of the size symbols (B, E, D, N, ...). Data-dependent ones (N) are filled in by
/// [`Problem::generate`].
pub type Sizes = BTreeMap<String, i64>;

/// Problem-size presets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Preset {
    /// Seconds on the CPU emulator.
    Ci,
    /// A quick GPU check.
    Small,
    /// The benchmark size on an H200.
    Full,
}

impl Preset {
    pub fn name(self) -> &'static str {
        match self {
            Preset::Ci => "ci",
            Preset::Small => "small",
            Preset::Full => "full",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "ci" => Some(Preset::Ci),
            "small" => Some(Preset::Small),
            "full" => Some(Preset::Full),
            _ => None,
        }
    }
}

/// What a tensor is to a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Read only; must be unchanged after the kernel.
    Input,
    /// Written by the kernel; poisoned before each run.
    Output,
    /// Read and updated in place: set to its initial value (from the input set) before every
    /// run, timed runs included (restored outside the timed region); checked like an output.
    InOut,
}

/// A named tensor of a problem's signature.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TensorSpec {
    pub name: &'static str,
    pub dtype: DType,
    /// One expression over the size symbols per dimension (e.g. `["B + 1"]`).
    pub shape: &'static [&'static str],
    pub role: Role,
}

/// One generated input set: its seed, the sizes (with data-dependent ones), float scalars
/// (learning rate, epsilon, ...: passed to kernels as f32 or f64 by the parameter's width), and
/// the tensors (inputs, and the initial value of every in-out tensor).
#[derive(Clone, Debug, Default)]
pub struct InputSet {
    pub seed: u64,
    pub sizes: Sizes,
    pub scalars: BTreeMap<String, f64>,
    pub tensors: TensorSet,
}

/// The oracle's value of one output: f64 for floats, exact i64 for integers.
#[derive(Clone, Debug, PartialEq)]
pub enum OracleOutput {
    Float(Vec<f64>),
    Int(Vec<i64>),
}

impl OracleOutput {
    pub fn len(&self) -> usize {
        match self {
            OracleOutput::Float(v) => v.len(),
            OracleOutput::Int(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Work counts of one input set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Work {
    /// Bytes that must cross HBM at least once: each distinct row read once, index arrays, outputs.
    pub compulsory_bytes: f64,
    /// FBGEMM's count: every lookup's row counted (skewed inputs hit L2 for hot rows).
    pub logical_bytes: f64,
    pub flops: f64,
}

/// Errors of the problem layer.
#[derive(Debug, thiserror::Error)]
pub enum ProblemError {
    #[error("problem {problem}: {message}")]
    Invalid { problem: String, message: String },
    #[error(transparent)]
    DataGen(#[from] data_gen::DataGenError),
    #[error("expression `{expr}`: {message}")]
    Expr { expr: String, message: String },
}

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
    /// The input recipe (distribution parameters) of a preset, for run records.
    fn recipe(&self, preset: Preset) -> serde_json::Value;
    /// Generates an input set for `sizes` with the recipe of `preset`, from `seed`
    /// (deterministic whatever the thread count).
    fn generate(&self, preset: Preset, sizes: &Sizes, seed: u64) -> Result<InputSet, ProblemError>;
    /// Extra size sets worth checking once (edge cases such as a single bag).
    fn edge_sizes(&self, preset: Preset) -> Vec<Sizes> {
        let _ = preset;
        Vec::new()
    }
    /// The oracle: every output (and in-out tensor after the update), by name.
    fn oracle(&self, inputs: &InputSet) -> Result<BTreeMap<String, OracleOutput>, ProblemError>;
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
    /// An extra check of one output beyond the tolerance test (e.g. rows an update must leave
    /// bit-identical); `Some(reason)` fails it.
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
    fn reference_scratch(&self) -> Vec<crate::launch::ScratchSpec> {
        Vec::new()
    }
}

/// The value of size symbol `name`, or an error naming `problem`.
pub fn size(sizes: &Sizes, problem: &str, name: &str) -> Result<i64, ProblemError> {
    sizes
        .get(name)
        .copied()
        .ok_or_else(|| ProblemError::Invalid {
            problem: problem.into(),
            message: format!("size {name} is not set"),
        })
}

/// Shape of a tensor spec under `sizes`.
pub fn shape_of(spec: &TensorSpec, sizes: &Sizes) -> Result<Vec<usize>, ProblemError> {
    spec.shape
        .iter()
        .map(|e| {
            let v = crate::expr::eval(e, sizes)?;
            usize::try_from(v).map_err(|_| ProblemError::Expr {
                expr: e.to_string(),
                message: format!("tensor {} has a negative dimension {v}", spec.name),
            })
        })
        .collect()
}

/// An output tensor of the right shape with every element set to its dtype's poison.
pub fn poisoned(spec: &TensorSpec, sizes: &Sizes) -> Result<HostTensor, ProblemError> {
    let shape = shape_of(spec, sizes)?;
    let numel: usize = shape.iter().product();
    let pattern = crate::check::poison_pattern(spec.dtype);
    let bytes = pattern
        .iter()
        .copied()
        .cycle()
        .take(numel * spec.dtype.size_bytes())
        .collect();
    Ok(HostTensor::new(spec.dtype, shape, bytes)?)
}
