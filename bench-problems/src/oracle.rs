//! What a problem computes about an input set: the oracle's value of each output and the work
//! counts (bytes and flops) the physical floor is made of.
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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

/// Every output of an input set, by name.
pub type Oracle = BTreeMap<String, OracleOutput>;

/// An [`Oracle`] from `(name, value)` pairs.
pub fn oracle_of<const N: usize>(outputs: [(&str, OracleOutput); N]) -> Oracle {
    outputs
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
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
