//! What a correct kernel leaves in its outputs, worked out once per input set so the checks can
//! compare on the device: the bytes and fingerprint of each exact output ([`Expected`]), and for
//! an in-place row update the fingerprint of the rows it must leave alone ([`ExpectedRows`]).
use super::specs::output_specs;
use crate::backend::{host_fingerprint, host_rows_fingerprint};
use bench_problems::check::{encode, poison_pattern};
use bench_problems::spec::shape_of;
use bench_problems::{OracleOutput, Problem, Sizes, TensorSpec};
use data_gen::HostTensor;
use rayon::prelude::*;
use std::collections::BTreeMap;

/// What a correct kernel leaves in one exact output: the checked part's bytes and the
/// fingerprint of their whole 32-bit words (any 1–3 trailing bytes are compared as bytes).
pub(super) struct Expected {
    /// Elements checked (the valid prefix, or all).
    pub elements: usize,
    /// The oracle encoded to the output's dtype.
    pub bytes: Vec<u8>,
    /// [`host_fingerprint`] of `bytes[..4 * words]`.
    pub fingerprint: u64,
}

impl Expected {
    pub(super) fn words(&self) -> usize {
        self.bytes.len() / 4
    }

    pub(super) fn tail(&self) -> &[u8] {
        &self.bytes[4 * self.words()..]
    }
}

/// The elements of `spec`'s output the check covers: all of them, or the valid prefix (the
/// oracle's length, for a `checked_prefix` output).
pub(super) fn checked_elements(
    problem: &dyn Problem,
    spec: &TensorSpec,
    oracle: &OracleOutput,
    numel: usize,
) -> usize {
    if problem.checked_prefix(spec.name) && oracle.len() < numel {
        oracle.len()
    } else {
        numel
    }
}

/// The [`Expected`] bytes of every output of a set (its `oracles` at `sizes`) that can be checked by fingerprint: exact
/// tolerance, no custom check, an oracle of the output's length (or its valid prefix), and no
/// expected element equal to the poison pattern (else an element the kernel never wrote would
/// hold the right bytes and pass unseen: such an output takes the full check every time).
pub(super) fn expected_outputs(
    problem: &dyn Problem,
    oracles: &BTreeMap<String, OracleOutput>,
    sizes: &Sizes,
) -> anyhow::Result<BTreeMap<String, Expected>> {
    let mut expected = BTreeMap::new();
    for spec in output_specs(problem) {
        let oracle = &oracles[spec.name];
        if !problem.tolerance(&spec).exact
            || problem.custom_checked(spec.name)
            || matches!(oracle, OracleOutput::Rows(_))
        {
            continue;
        }
        let numel: usize = shape_of(&spec, sizes)?.iter().product();
        let elements = checked_elements(problem, &spec, oracle, numel);
        if oracle.len() != elements {
            continue; // the full check says what is wrong with this oracle
        }
        let Ok(want) = encode(oracle, spec.dtype, vec![elements]) else {
            continue;
        };
        let poison = poison_pattern(spec.dtype);
        if want.bytes.par_chunks(poison.len()).any(|e| e == poison) {
            continue;
        }
        let words = want.bytes.len() / 4;
        let fingerprint = host_fingerprint(&want.bytes[..4 * words]);
        expected.insert(
            spec.name.to_string(),
            Expected {
                elements,
                bytes: want.bytes.into_vec(),
                fingerprint,
            },
        );
    }
    Ok(expected)
}

/// What the check of an in-place output with a row-update oracle needs besides the oracle's
/// row ids: the fingerprint the other rows hold when they keep their initial value, so that a
/// check copies back only the changed rows ([`Verifier::changed_rows`]). The ids go to the
/// device only for the check (they are the distinct rows a kernel must find itself).
pub(super) struct ExpectedRows {
    /// 32-bit words per row.
    pub width_words: usize,
    /// The initial value's fingerprint minus what its listed rows add to it.
    pub unchanged_fingerprint: u64,
}

/// The [`ExpectedRows`] of in-out output `spec`, whose upload `initial` has fingerprint
/// `initial_fingerprint` ([`Backend::fingerprint`] of the pristine copy), when its oracle is a
/// row update the compact check covers: no custom check, rows of whole 32-bit words, the
/// oracle's rows in range and the initial value of its shape. `None` otherwise (the full check
/// then says what is wrong).
pub(super) fn expected_rows(
    problem: &dyn Problem,
    spec: &TensorSpec,
    oracle: Option<&OracleOutput>,
    initial: &HostTensor,
    initial_fingerprint: u64,
) -> Option<ExpectedRows> {
    let Some(OracleOutput::Rows(rows)) = oracle else {
        return None;
    };
    let row_bytes = rows.width * initial.dtype.size_bytes();
    let fits = !problem.custom_checked(spec.name)
        && row_bytes > 0
        && row_bytes.is_multiple_of(4)
        && rows.total_rows.checked_mul(row_bytes) == Some(initial.bytes.len())
        && rows
            .rows
            .iter()
            .all(|&r| (0..rows.total_rows as i64).contains(&r));
    if !fits {
        return None;
    }
    let width_words = row_bytes / 4;
    let listed: Vec<u8> = rows
        .rows
        .iter()
        .flat_map(|&r| &initial.bytes[r as usize * row_bytes..(r as usize + 1) * row_bytes])
        .copied()
        .collect();
    let listed_fingerprint = host_rows_fingerprint(&rows.rows, width_words, &listed);
    Some(ExpectedRows {
        width_words,
        unchanged_fingerprint: initial_fingerprint.wrapping_sub(listed_fingerprint),
    })
}
