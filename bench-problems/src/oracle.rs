//! What a problem computes about an input set: the oracle's value of each output and the work
//! counts (bytes and flops) the physical floor is made of.
//!
//! An in-place output that changes only on some rows (an optimizer step on a huge table) gives
//! its oracle as a [`RowUpdate`]: the rows that change and their update, every other row being
//! its initial value (the in-out input of the same name), so neither the oracle nor its check
//! ever holds the whole table in f64.
use data_gen::HostTensor;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The oracle's value of one output: f64 for floats, exact i64 for integers.
#[derive(Clone, Debug, PartialEq)]
pub enum OracleOutput {
    Float(Vec<f64>),
    Int(Vec<i64>),
    /// An in-place float output: its initial value with [`RowUpdate::rows`] updated.
    Rows(RowUpdate),
}

/// The oracle of an in-place output as the update of some rows: rows not listed must stay bit
/// for bit their initial value; the listed ones must carry the update `delta` (new − initial,
/// in f64) to within `update_rel_l2` (‖Δout − delta‖₂ / ‖delta‖₂) and `update_max_scaled`
/// (max|Δout − delta| / ‖delta‖∞), since a tolerance on the values themselves is dominated by
/// the initial value. Checked by [`crate::check::check_rows`].
#[derive(Clone, Debug, PartialEq)]
pub struct RowUpdate {
    /// Rows of the whole tensor.
    pub total_rows: usize,
    /// Elements per row.
    pub width: usize,
    /// The rows that change, ascending and distinct.
    pub rows: Vec<i64>,
    /// Per listed row, `width` each: the update.
    pub delta: Vec<f64>,
    pub update_rel_l2: f64,
    pub update_max_scaled: f64,
}

impl RowUpdate {
    /// The whole oracle value (f64) given the initial value: for tests at small sizes only (at
    /// full size this is the copy the row form exists to avoid).
    pub fn dense(&self, initial: &HostTensor) -> Vec<f64> {
        let mut v = initial.to_f64_vec();
        let w = self.width;
        for (u, &r) in self.rows.iter().enumerate() {
            let r = r as usize;
            for (x, &d) in v[r * w..(r + 1) * w]
                .iter_mut()
                .zip(&self.delta[u * w..(u + 1) * w])
            {
                *x += d;
            }
        }
        v
    }

    /// Which of the `total_rows` rows change.
    pub fn touched(&self) -> Vec<bool> {
        let mut t = vec![false; self.total_rows];
        for &r in &self.rows {
            t[r as usize] = true;
        }
        t
    }

    /// The new value of element `j` of listed row number `u`, given the initial value there.
    pub fn value(&self, u: usize, j: usize, initial: f64) -> f64 {
        initial + self.delta[u * self.width + j]
    }
}

impl OracleOutput {
    pub fn len(&self) -> usize {
        match self {
            OracleOutput::Float(v) => v.len(),
            OracleOutput::Int(v) => v.len(),
            OracleOutput::Rows(r) => r.total_rows * r.width,
        }
    }

    /// The whole value as floats or integers: a [`RowUpdate`] made dense from `initial` (for
    /// tests and self-tests at small sizes), anything else as it is.
    pub fn densified(&self, initial: Option<&HostTensor>) -> Result<OracleOutput, String> {
        match self {
            OracleOutput::Rows(r) => {
                let initial = initial.ok_or("a row-update oracle needs the initial value")?;
                Ok(OracleOutput::Float(r.dense(initial)))
            }
            other => Ok(other.clone()),
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
    /// The part of those bytes that are table rows read at random (an embedding lookup), for
    /// the gather floor; `None` for a problem that gathers no rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gathered: Option<Gathered>,
}

/// Table rows read at random, part of a [`Work`]'s bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Gathered {
    /// The width of a row, bytes.
    pub row_bytes: f64,
    /// Of the compulsory bytes: the distinct rows, each once.
    pub distinct_bytes: f64,
    /// Of the logical bytes: every lookup's row.
    pub lookup_bytes: f64,
}
