//! The correctness check of one output against its oracle.
//!
//! Floats are judged scale-invariantly: the relative L2 error ‖out − ref‖₂ / ‖ref‖₂ and the
//! largest error scaled by ‖ref‖∞, each against a bound per output dtype, so neither an all-zeros
//! tensor nor a constant can pass because the reference is small. Any poison left (an element
//! the kernel never wrote), NaN or infinity fails. Integers must match exactly.
use crate::oracle::{OracleOutput, RowUpdate};
pub use crate::poison::poison_pattern;
use data_gen::{DType, HostTensor};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// Bounds of the scale-invariant float test; `exact`: every element must equal the oracle
/// (integers), or for a float output, the oracle rounded to the output's dtype bit for bit
/// (−0 is not +0; any NaN matches a NaN).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tolerance {
    /// Bound on ‖out − ref‖₂ / ‖ref‖₂.
    pub rel_l2: f64,
    /// Bound on max|out − ref| / ‖ref‖∞.
    pub max_scaled: f64,
    pub exact: bool,
}

impl Tolerance {
    /// Bit-exact: for outputs that copy values rather than compute them (gathers, permutes).
    pub const EXACT: Tolerance = Tolerance {
        rel_l2: 0.0,
        max_scaled: 0.0,
        exact: true,
    };

    /// Defaults per output dtype. fp32 outputs of fp32-accumulated sums land near 1e-7; an fp16
    /// accumulator lands near 1e-3 and fails. bf16 outputs carry 8 bits of mantissa (2^-9 ≈ 2e-3
    /// per element after rounding).
    pub fn for_dtype(dtype: DType) -> Self {
        let float = |rel_l2, max_scaled| Tolerance {
            rel_l2,
            max_scaled,
            exact: false,
        };
        match dtype {
            DType::F64 => float(1e-12, 1e-11),
            DType::F32 => float(1e-5, 1e-4),
            DType::F16 => float(2e-3, 1e-2),
            DType::BF16 => float(1e-2, 2e-2),
            DType::I64 | DType::I32 | DType::U8 => Tolerance::EXACT,
        }
    }
}

/// The outcome of checking one output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckReport {
    pub passed: bool,
    pub elements: usize,
    /// Elements still holding the poison pattern (never written).
    pub unwritten: usize,
    /// Other NaN or infinite elements.
    pub non_finite: usize,
    pub rel_l2: f64,
    pub max_scaled: f64,
    /// Integer elements that differ.
    pub mismatches: usize,
    /// Index of the worst element (largest error, first mismatch or first unwritten).
    pub worst_index: Option<usize>,
    /// One line saying why it failed (empty when it passed).
    pub reason: String,
    /// A fingerprint on the device stood in for copying the output back: an exact output
    /// passed because its fingerprint equals that of the bytes a correct kernel writes (no copy
    /// to the host; the element counts then say what equal bytes imply: every element checked,
    /// none unwritten or different), or an in-place row update's unlisted rows were proven
    /// unchanged so that only its listed rows were copied back ([`check_changed_rows`]: the
    /// other fields are those of the full [`check_rows`], `elements` the whole tensor).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub by_fingerprint: bool,
}

impl CheckReport {
    /// A report of `elements` elements with nothing found yet (and not passed).
    pub fn empty(elements: usize) -> Self {
        CheckReport {
            passed: false,
            elements,
            unwritten: 0,
            non_finite: 0,
            rel_l2: 0.0,
            max_scaled: 0.0,
            mismatches: 0,
            worst_index: None,
            reason: String::new(),
            by_fingerprint: false,
        }
    }

    /// The report of an exact output of `elements` elements whose bytes are proven equal to
    /// the expected ones by fingerprint.
    pub fn proven_by_fingerprint(elements: usize) -> Self {
        CheckReport {
            passed: true,
            by_fingerprint: true,
            ..Self::empty(elements)
        }
    }
}

/// What a check may use besides the output and its oracle.
#[derive(Clone, Copy, Debug, Default)]
pub struct CheckContext<'a> {
    /// The oracle already encoded to the output's dtype ([`encode`]'s bytes): an exact float
    /// check compares with it instead of encoding the oracle again.
    pub encoded: Option<&'a [u8]>,
    /// The initial value of an in-out output: a [`OracleOutput::Rows`] oracle needs it.
    pub initial: Option<&'a HostTensor>,
}

/// Element `i` of raw little-endian `bytes` of `dtype`, as f64 (what `to_f64_vec` gives).
#[inline]
fn f64_at(dtype: DType, bytes: &[u8], i: usize) -> f64 {
    let b = |n: usize| &bytes[i * n..(i + 1) * n];
    match dtype {
        DType::F64 => f64::from_le_bytes(b(8).try_into().expect("8 bytes")),
        DType::F32 => f32::from_le_bytes(b(4).try_into().expect("4 bytes")) as f64,
        DType::F16 => half::f16::from_le_bytes(b(2).try_into().expect("2 bytes")).to_f64(),
        DType::BF16 => half::bf16::from_le_bytes(b(2).try_into().expect("2 bytes")).to_f64(),
        DType::I64 => i64::from_le_bytes(b(8).try_into().expect("8 bytes")) as f64,
        DType::I32 => i32::from_le_bytes(b(4).try_into().expect("4 bytes")) as f64,
        DType::U8 => bytes[i] as f64,
    }
}

/// Element `i` of raw little-endian integer `bytes` of `dtype`, as i64 (`None` for floats).
#[inline]
fn i64_at(dtype: DType, bytes: &[u8], i: usize) -> Option<i64> {
    let b = |n: usize| &bytes[i * n..(i + 1) * n];
    match dtype {
        DType::I64 => Some(i64::from_le_bytes(b(8).try_into().expect("8 bytes"))),
        DType::I32 => Some(i32::from_le_bytes(b(4).try_into().expect("4 bytes")) as i64),
        DType::U8 => Some(bytes[i] as i64),
        _ => None,
    }
}

/// `t`'s elements as f64, converted in parallel: equal to `t.to_f64_vec()`.
pub fn par_to_f64_vec(t: &HostTensor) -> Vec<f64> {
    let (dtype, bytes) = (t.dtype, &t.bytes[..]);
    (0..t.numel())
        .into_par_iter()
        .map(|i| f64_at(dtype, bytes, i))
        .collect()
}

/// Checks `out` against `oracle` under `tol`.
pub fn check_output(out: &HostTensor, oracle: &OracleOutput, tol: &Tolerance) -> CheckReport {
    check_output_with(out, oracle, tol, CheckContext::default())
}

/// [`check_output`] with what the caller already has: the oracle encoded to the output's dtype,
/// the initial value of an in-out output (see [`CheckContext`]). Element conversions run in
/// parallel and in place (no f64 copy of the output).
pub fn check_output_with(
    out: &HostTensor,
    oracle: &OracleOutput,
    tol: &Tolerance,
    ctx: CheckContext<'_>,
) -> CheckReport {
    let n = out.numel();
    let mut report = CheckReport::empty(n);
    if oracle.len() != n {
        report.reason = format!("output has {n} elements, the oracle {}", oracle.len());
        return report;
    }
    if let OracleOutput::Rows(rows) = oracle {
        return match ctx.initial {
            Some(initial) => check_rows(out, initial, rows, tol),
            None => {
                report.reason = "a row-update oracle is checked against the initial value, \
                                 which the check was not given"
                    .into();
                report
            }
        };
    }
    let unwritten = unwritten_elements(out);
    report.unwritten = unwritten.len();
    let (dtype, bytes) = (out.dtype, &out.bytes[..]);
    match oracle {
        OracleOutput::Float(_) if tol.exact => match ctx.encoded {
            Some(want) if want.len() == bytes.len() => {
                check_float_bits(dtype, bytes, want, &mut report)
            }
            _ => match encode(oracle, dtype, out.shape.clone()) {
                Ok(want) => check_float_bits(dtype, bytes, &want.bytes, &mut report),
                Err(e) => report.reason = format!("float output expected: {e}"),
            },
        },
        OracleOutput::Float(reference) => {
            check_floats(
                n,
                |i| f64_at(dtype, bytes, i),
                |i| reference[i],
                &mut report,
            );
        }
        OracleOutput::Int(reference) => {
            if dtype.is_float() {
                report.reason = format!("integer output expected: got {}", dtype.name());
            } else {
                let bad: Vec<usize> = (0..n)
                    .into_par_iter()
                    .filter(|&i| i64_at(dtype, bytes, i) != Some(reference[i]))
                    .collect();
                report.mismatches = bad.len();
                report.worst_index = bad.first().copied();
            }
        }
        OracleOutput::Rows(_) => unreachable!("handled above"),
    }
    conclude(
        report,
        unwritten.first().copied(),
        matches!(oracle, OracleOutput::Float(_)),
        tol,
    )
}

/// Checks `out` against `reference`, another kernel's output of the same dtype and shape (the
/// reference kernel's on the same inputs), as if `reference` were the oracle: exact outputs bit
/// for bit (any NaN matches a NaN), floats by the scale-invariant test. Nothing is copied to
/// f64 (the same verdict as `check_output` on `reference.to_f64_vec()`).
pub fn check_against(out: &HostTensor, reference: &HostTensor, tol: &Tolerance) -> CheckReport {
    let n = out.numel();
    let mut report = CheckReport::empty(n);
    if reference.numel() != n || reference.dtype != out.dtype {
        report.reason = format!(
            "output has {n} {} elements, the reference's {} {}",
            out.dtype.name(),
            reference.numel(),
            reference.dtype.name()
        );
        return report;
    }
    let unwritten = unwritten_elements(out);
    report.unwritten = unwritten.len();
    let (dtype, got, want) = (out.dtype, &out.bytes[..], &reference.bytes[..]);
    if dtype.is_float() && tol.exact {
        check_float_bits(dtype, got, want, &mut report);
    } else if dtype.is_float() {
        check_floats(
            n,
            |i| f64_at(dtype, got, i),
            |i| f64_at(dtype, want, i),
            &mut report,
        );
    } else {
        let bad: Vec<usize> = (0..n)
            .into_par_iter()
            .filter(|&i| i64_at(dtype, got, i) != i64_at(dtype, want, i))
            .collect();
        report.mismatches = bad.len();
        report.worst_index = bad.first().copied();
    }
    conclude(report, unwritten.first().copied(), dtype.is_float(), tol)
}

/// Indices of the elements of `out` that hold the poison pattern, ascending.
fn unwritten_elements(out: &HostTensor) -> Vec<usize> {
    let size = out.dtype.size_bytes();
    let poison = poison_pattern(out.dtype);
    (0..out.numel())
        .into_par_iter()
        .filter(|&i| out.bytes[i * size..(i + 1) * size] == poison[..])
        .collect()
}

/// The verdict and its one-line reason, from what the comparison found.
fn conclude(
    mut report: CheckReport,
    first_unwritten: Option<usize>,
    float: bool,
    tol: &Tolerance,
) -> CheckReport {
    let n = report.elements;
    if !report.reason.is_empty() {
        // A wrong dtype: said already.
    } else if report.unwritten > 0 {
        report.worst_index = first_unwritten;
        report.reason = format!(
            "{} of {n} elements never written (poison left; first at {})",
            report.unwritten,
            first_unwritten.unwrap_or(0)
        );
    } else if report.non_finite > 0 {
        report.reason = format!(
            "{} of {n} elements are NaN or infinite where the oracle's are not, or finite where \
             the oracle's are not",
            report.non_finite
        );
    } else if report.mismatches > 0 {
        let kind = if float {
            "float elements differ bit for bit from the oracle rounded to the output's dtype"
        } else {
            "integer elements differ"
        };
        report.reason = format!(
            "{} of {n} {kind} (first at {})",
            report.mismatches,
            report.worst_index.unwrap_or(0)
        );
    } else if !tol.exact && (report.rel_l2 > tol.rel_l2 || report.max_scaled > tol.max_scaled) {
        report.reason = format!(
            "error too large: relative L2 {:.3e} (bound {:.0e}), max/‖ref‖∞ {:.3e} (bound {:.0e})",
            report.rel_l2, tol.rel_l2, report.max_scaled, tol.max_scaled
        );
    }
    report.passed = report.reason.is_empty();
    report
}

/// Bit-exact float comparison of raw elements `got` with `want` (the oracle rounded to the
/// output's dtype): equal bits, or both NaN.
fn check_float_bits(dtype: DType, got: &[u8], want: &[u8], report: &mut CheckReport) {
    let size = dtype.size_bytes();
    let bad: Vec<usize> = (0..got.len() / size)
        .into_par_iter()
        .filter(|&i| {
            let (g, w) = (
                &got[i * size..(i + 1) * size],
                &want[i * size..(i + 1) * size],
            );
            g != w && !(f64_at(dtype, got, i).is_nan() && f64_at(dtype, want, i).is_nan())
        })
        .collect();
    report.mismatches = bad.len();
    report.worst_index = bad.first().copied();
}

/// What a scale-invariant float comparison found over its elements, however it was computed
/// (on the host by [`check_output_with`] and [`check_against`], or on the device by the
/// runner): the input of [`float_report`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FloatSums {
    /// Σ (out − ref)² over elements whose oracle and output are finite.
    pub err2: f64,
    /// Σ ref² and max |ref| over elements whose oracle is finite.
    pub ref2: f64,
    pub ref_inf: f64,
    /// The largest |out − ref| over those elements, and its first index (`None`: none).
    pub worst: f64,
    pub worst_index: Option<usize>,
    /// Elements non-finite where the oracle is finite, or not the oracle's NaN or infinity.
    pub non_finite: usize,
    /// Elements holding the poison pattern, and the first of them.
    pub unwritten: usize,
    pub first_unwritten: Option<usize>,
}

/// The report of a scale-invariant comparison of `n` float elements from its sums: the same
/// verdict and reason whether they were computed on the host or on the device.
pub fn float_report(n: usize, sums: &FloatSums, tol: &Tolerance) -> CheckReport {
    let mut report = CheckReport::empty(n);
    report.unwritten = sums.unwritten;
    apply_sums(&mut report, sums);
    conclude(report, sums.first_unwritten, true, tol)
}

/// Sets the float fields of `report` (not `unwritten`) from `sums`.
fn apply_sums(report: &mut CheckReport, sums: &FloatSums) {
    report.non_finite = sums.non_finite;
    // A reference of all zeros would make every error infinite: problems guarantee it is not
    // (the self-test), and the floor keeps the arithmetic defined.
    let norm = sums.ref2.sqrt().max(f64::MIN_POSITIVE);
    report.rel_l2 = sums.err2.sqrt() / norm;
    report.max_scaled = sums.worst.max(0.0) / sums.ref_inf.max(f64::MIN_POSITIVE);
    if sums.non_finite == 0 {
        report.worst_index = Some(sums.worst_index.unwrap_or(0));
    }
}

/// The scale-invariant test over `n` elements, `got(i)` against `reference(i)`, into `report`
/// (its `unwritten` counted by the caller). Elements where the oracle is NaN or infinite
/// (special-value input sets) must be the same NaN or infinity and stay out of the norms; any
/// other non-finite element fails.
fn check_floats(
    n: usize,
    got: impl Fn(usize) -> f64 + Sync,
    reference: impl Fn(usize) -> f64 + Sync,
    report: &mut CheckReport,
) {
    let (err2, ref2, ref_inf, worst, worst_i, non_finite) = (0..n)
        .into_par_iter()
        .map(|i| {
            let (g, r) = (got(i), reference(i));
            if !r.is_finite() {
                let same = (g.is_nan() && r.is_nan()) || g == r;
                (0.0, 0.0, 0.0, 0.0, i, (!same) as usize)
            } else if !g.is_finite() {
                (0.0, r * r, r.abs(), 0.0, i, 1usize)
            } else {
                let d = (g - r).abs();
                (d * d, r * r, r.abs(), d, i, 0)
            }
        })
        .reduce(
            || (0.0, 0.0, 0.0, -1.0, 0, 0),
            |a, b| {
                let (w, wi) = if b.3 > a.3 { (b.3, b.4) } else { (a.3, a.4) };
                (a.0 + b.0, a.1 + b.1, a.2.max(b.2), w, wi, a.5 + b.5)
            },
        );
    let sums = FloatSums {
        err2,
        ref2,
        ref_inf,
        worst,
        worst_index: Some(worst_i),
        non_finite,
        unwritten: report.unwritten,
        first_unwritten: None,
    };
    apply_sums(report, &sums);
}

/// Checks an in-place float output against a [`RowUpdate`] oracle and the output's `initial`
/// value: rows the update does not list must be bit for bit their initial value (compared in
/// parallel); on the listed rows no poison, no non-finite value where the oracle's is finite,
/// the update (out − initial) within the oracle's update bounds, and the values within `tol`
/// (the norms over the listed rows only). Nothing is converted beyond the listed rows.
pub fn check_rows(
    out: &HostTensor,
    initial: &HostTensor,
    oracle: &RowUpdate,
    tol: &Tolerance,
) -> CheckReport {
    let n = out.numel();
    let mut report = CheckReport::empty(n);
    if initial.bytes.len() != out.bytes.len() || initial.dtype != out.dtype {
        report.reason = "size or dtype differs from the initial value".into();
        return report;
    }
    if let Err(reason) = rows_fit(initial, oracle) {
        report.reason = reason;
        return report;
    }
    // 1. Rows nobody looked up: bit for bit their initial value.
    let width = oracle.width;
    let row_bytes = width * out.dtype.size_bytes();
    let touched = oracle.touched();
    let changed: Vec<usize> = (0..oracle.total_rows)
        .into_par_iter()
        .filter(|&r| {
            let span = r * row_bytes..(r + 1) * row_bytes;
            !touched[r] && out.bytes[span.clone()] != initial.bytes[span]
        })
        .collect();
    if let Some(&first) = changed.first() {
        report.mismatches = changed.len();
        report.worst_index = Some(first * width);
        report.reason = format!(
            "{} rows that no lookup touches changed (first: row {first}); they must stay bit-identical",
            changed.len()
        );
        return report;
    }
    // 2. The listed rows, read in place.
    let listed_row = |u: usize| {
        let r = oracle.rows[u] as usize;
        &out.bytes[r * row_bytes..(r + 1) * row_bytes]
    };
    check_listed_rows(
        report,
        listed_row,
        initial,
        oracle,
        RowsReference::Oracle,
        tol,
    )
}

/// What the rows a [`RowUpdate`] lists are checked against by [`check_changed_rows`].
#[derive(Clone, Copy, Debug)]
pub enum RowsReference<'a> {
    /// The oracle's update.
    Oracle,
    /// Another kernel's rows on the same inputs (the reference kernel's), laid out as
    /// `changed` is: its update (its rows − initial) and its values stand for the oracle's.
    Kernel(&'a [u8]),
}

/// [`check_rows`] of the listed rows alone, for an output whose other rows are already proven
/// to hold their initial value (by fingerprint, on the device): `changed` holds the output's
/// row `oracle.rows[u]` at row `u`, in the initial value's dtype. They are checked against
/// `against` as `check_rows` checks them against the oracle, and a passing report is the one
/// `check_rows` gives of the whole output: `elements` counts the whole tensor, the norms are
/// over the listed rows, `worst_index` is an element of the whole tensor.
pub fn check_changed_rows(
    changed: &[u8],
    initial: &HostTensor,
    oracle: &RowUpdate,
    against: RowsReference<'_>,
    tol: &Tolerance,
) -> CheckReport {
    let mut report = CheckReport::empty(initial.numel());
    if let Err(reason) = rows_fit(initial, oracle) {
        report.reason = reason;
        return report;
    }
    let row_bytes = oracle.width * initial.dtype.size_bytes();
    let listed_bytes = oracle.rows.len() * row_bytes;
    let reference_bytes = match against {
        RowsReference::Oracle => listed_bytes,
        RowsReference::Kernel(rows) => rows.len(),
    };
    if changed.len() != listed_bytes || reference_bytes != listed_bytes {
        report.reason = format!(
            "{} bytes of changed rows ({} of the reference's), {listed_bytes} expected for {} rows",
            changed.len(),
            reference_bytes,
            oracle.rows.len()
        );
        return report;
    }
    let listed_row = |u: usize| &changed[u * row_bytes..(u + 1) * row_bytes];
    check_listed_rows(report, listed_row, initial, oracle, against, tol)
}

/// Whether `oracle` describes a float tensor shaped as `initial`, with its rows in range and
/// an update for each; else why not.
fn rows_fit(initial: &HostTensor, oracle: &RowUpdate) -> Result<(), String> {
    let shaped = oracle.total_rows.checked_mul(oracle.width) == Some(initial.numel());
    if !shaped || !initial.dtype.is_float() {
        return Err("size or dtype differs from the initial value".into());
    }
    if let Some(bad) = oracle
        .rows
        .iter()
        .find(|&&r| !(0..oracle.total_rows as i64).contains(&r))
    {
        return Err(format!(
            "the oracle lists row {bad} of {}",
            oracle.total_rows
        ));
    }
    if oracle.delta.len() != oracle.rows.len() * oracle.width {
        return Err("the oracle's update does not cover its rows".into());
    }
    Ok(())
}

/// Step 2 of [`check_rows`] and all of [`check_changed_rows`]: `listed_row(u)` is the output's
/// row `oracle.rows[u]` (raw bytes). No poison, no non-finite value where `against`'s is
/// finite, the update (out − initial) within the oracle's update bounds, the values within
/// `tol` (norms over the listed rows only); indices in `report` are of the whole tensor.
fn check_listed_rows<'a>(
    mut report: CheckReport,
    listed_row: impl Fn(usize) -> &'a [u8] + Sync,
    initial: &HostTensor,
    oracle: &RowUpdate,
    against: RowsReference<'_>,
    tol: &Tolerance,
) -> CheckReport {
    let (dtype, init, width) = (initial.dtype, &initial.bytes[..], oracle.width);
    let size = dtype.size_bytes();
    let element = |k: usize| oracle.rows[k / width] as usize * width + k % width;
    let got = |k: usize| f64_at(dtype, listed_row(k / width), k % width);
    let init_at = |k: usize| f64_at(dtype, init, element(k));
    let want_update = |k: usize| match against {
        RowsReference::Oracle => oracle.delta[k],
        RowsReference::Kernel(rows) => f64_at(dtype, rows, k) - init_at(k),
    };
    let want_value = |k: usize| match against {
        RowsReference::Oracle => oracle.value(k / width, k % width, init_at(k)),
        RowsReference::Kernel(rows) => f64_at(dtype, rows, k),
    };
    let listed = oracle.rows.len() * width;
    let poison = poison_pattern(dtype);
    let unwritten: Vec<usize> = (0..listed)
        .into_par_iter()
        .filter(|&k| {
            let j = k % width;
            listed_row(k / width)[j * size..(j + 1) * size] == poison[..]
        })
        .map(element)
        .collect();
    report.unwritten = unwritten.len();
    let mut update = CheckReport::empty(listed);
    check_floats(listed, |k| got(k) - init_at(k), want_update, &mut update);
    check_floats(listed, got, want_value, &mut report);
    report.worst_index = report.worst_index.map(element);
    if report.unwritten == 0
        && report.non_finite == 0
        && !(update.rel_l2 <= oracle.update_rel_l2 && update.max_scaled <= oracle.update_max_scaled)
    {
        report.reason = format!(
            "the update of the {} looked-up rows is off: relative L2 {:.3e} (bound {:.0e}), max/‖update‖∞ {:.3e} (bound {:.0e})",
            oracle.rows.len(),
            update.rel_l2,
            oracle.update_rel_l2,
            update.max_scaled,
            oracle.update_max_scaled
        );
    }
    conclude(report, unwritten.first().copied(), true, tol)
}

/// The oracle's values rounded to `dtype` (round to nearest even): what a correct kernel writes.
/// In parallel: an oracle of a few hundred million elements (bucketize's new lengths at
/// W = 64) took seconds to encode serially, more than computing it.
pub fn encode(
    oracle: &OracleOutput,
    dtype: DType,
    shape: Vec<usize>,
) -> Result<HostTensor, data_gen::DataGenError> {
    match (oracle, dtype) {
        (OracleOutput::Float(v), DType::F32) => {
            HostTensor::from_f32(shape, v.par_iter().map(|&x| x as f32).collect())
        }
        (OracleOutput::Float(v), DType::BF16) => HostTensor::from_bf16(
            shape,
            v.par_iter().map(|&x| half::bf16::from_f64(x)).collect(),
        ),
        (OracleOutput::Float(v), DType::F16) => HostTensor::from_f16(
            shape,
            v.par_iter().map(|&x| half::f16::from_f64(x)).collect(),
        ),
        (OracleOutput::Int(v), DType::I32) => {
            HostTensor::from_i32(shape, v.par_iter().map(|&x| x as i32).collect())
        }
        (OracleOutput::Int(v), DType::U8) => {
            HostTensor::from_u8(shape, v.par_iter().map(|&x| x as u8).collect())
        }
        (OracleOutput::Float(v), _) => HostTensor::from_pod(DType::F64, shape, v),
        (OracleOutput::Int(v), _) => HostTensor::from_pod(DType::I64, shape, v),
        (OracleOutput::Rows(_), _) => Err(data_gen::DataGenError::InvalidParameter {
            name: "oracle",
            value: "a row update".into(),
            reason: "a row-update oracle is encoded from its dense value (`densified`)",
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_in_parallel_keeps_every_element_in_its_place() {
        let n = 300_007;
        let floats: Vec<f64> = (0..n).map(|i| (i as f64).sin() * 1e3).collect();
        let ints: Vec<i64> = (0..n as i64).map(|i| i * 7919 - 1_000_000_000).collect();
        let bytes = |o: &OracleOutput, d: DType| encode(o, d, vec![n]).unwrap().bytes.to_vec();
        let (f, i) = (
            OracleOutput::Float(floats.clone()),
            OracleOutput::Int(ints.clone()),
        );
        let serial_f32: Vec<u8> = floats
            .iter()
            .flat_map(|&x| (x as f32).to_le_bytes())
            .collect();
        let serial_bf16: Vec<u8> = floats
            .iter()
            .flat_map(|&x| half::bf16::from_f64(x).to_le_bytes())
            .collect();
        let serial_i32: Vec<u8> = ints
            .iter()
            .flat_map(|&x| (x as i32).to_le_bytes())
            .collect();
        let serial_i64: Vec<u8> = ints.iter().flat_map(|&x| x.to_le_bytes()).collect();
        let serial_f64: Vec<u8> = floats.iter().flat_map(|&x| x.to_le_bytes()).collect();
        assert_eq!(bytes(&f, DType::F32), serial_f32);
        assert_eq!(bytes(&f, DType::BF16), serial_bf16);
        assert_eq!(bytes(&f, DType::F64), serial_f64);
        assert_eq!(bytes(&i, DType::I32), serial_i32);
        assert_eq!(bytes(&i, DType::I64), serial_i64);
    }

    fn tensor(v: &[f32]) -> HostTensor {
        HostTensor::from_f32(vec![v.len()], v.to_vec()).unwrap()
    }

    fn reference() -> Vec<f64> {
        (0..1000)
            .map(|i| ((i * 37 % 101) as f64 - 50.0) / 7.0)
            .collect()
    }

    #[test]
    fn legitimate_rounding_passes() {
        let r = reference();
        let out: Vec<f32> = r.iter().map(|&x| x as f32).collect();
        let rep = check_output(
            &tensor(&out),
            &OracleOutput::Float(r),
            &Tolerance::for_dtype(DType::F32),
        );
        assert!(rep.passed, "{rep:?}");
        assert!(rep.rel_l2 < 1e-7);
    }

    #[test]
    fn zeros_and_constants_fail_whatever_the_scale() {
        for scale in [1e-6, 1.0, 1e6] {
            let r: Vec<f64> = reference().iter().map(|x| x * scale).collect();
            let zeros = vec![0.0f32; r.len()];
            let mean = (r.iter().sum::<f64>() / r.len() as f64) as f32;
            let constant = vec![mean; r.len()];
            for out in [zeros, constant] {
                let rep = check_output(
                    &tensor(&out),
                    &OracleOutput::Float(r.clone()),
                    &Tolerance::for_dtype(DType::F32),
                );
                assert!(!rep.passed && rep.rel_l2 > 0.5, "scale {scale}: {rep:?}");
            }
        }
    }

    #[test]
    fn unwritten_elements_fail_even_if_the_rest_is_right() {
        let r = reference();
        let mut bytes = tensor(&r.iter().map(|&x| x as f32).collect::<Vec<_>>());
        bytes.bytes[4..8].copy_from_slice(&poison_pattern(DType::F32));
        let rep = check_output(
            &bytes,
            &OracleOutput::Float(r),
            &Tolerance::for_dtype(DType::F32),
        );
        assert!(!rep.passed);
        assert_eq!(rep.unwritten, 1);
        assert_eq!(rep.worst_index, Some(1));
    }

    #[test]
    fn half_precision_accumulation_error_fails_the_fp32_bound() {
        let r = reference();
        let out: Vec<f32> = r.iter().map(|&x| half::f16::from_f64(x).to_f32()).collect();
        let rep = check_output(
            &tensor(&out),
            &OracleOutput::Float(r),
            &Tolerance::for_dtype(DType::F32),
        );
        assert!(!rep.passed, "{rep:?}");
    }

    #[test]
    fn exact_floats_compare_bits_not_errors() {
        let r = vec![1.5, -0.0, 2.0, f64::NAN];
        let t = |v: Vec<f32>| HostTensor::from_f32(vec![v.len()], v).unwrap();
        let ok = check_output(
            &t(vec![1.5, -0.0, 2.0, f32::NAN]),
            &OracleOutput::Float(r.clone()),
            &Tolerance::EXACT,
        );
        assert!(ok.passed, "{ok:?}");
        // +0 for -0 is off by nothing in value but not bit-exact; so is the next float.
        let signed_zero = check_output(
            &t(vec![1.5, 0.0, 2.0, f32::NAN]),
            &OracleOutput::Float(r.clone()),
            &Tolerance::EXACT,
        );
        assert!(!signed_zero.passed && signed_zero.worst_index == Some(1));
        let next = check_output(
            &t(vec![
                1.5,
                -0.0,
                f32::from_bits(2.0f32.to_bits() + 1),
                f32::NAN,
            ]),
            &OracleOutput::Float(r),
            &Tolerance::EXACT,
        );
        assert!(!next.passed && next.mismatches == 1, "{next:?}");
        assert!(next.reason.contains("bit for bit"), "{}", next.reason);
    }

    #[test]
    fn non_finite_oracle_values_must_be_matched_and_stay_out_of_the_norms() {
        let mut r = reference();
        r[3] = f64::INFINITY;
        r[4] = f64::NAN;
        r[5] = f64::NEG_INFINITY;
        let mut out: Vec<f32> = r.iter().map(|&x| x as f32).collect();
        let tol = Tolerance::for_dtype(DType::F32);
        let rep = check_output(&tensor(&out), &OracleOutput::Float(r.clone()), &tol);
        assert!(rep.passed && rep.rel_l2 < 1e-7, "{rep:?}");
        out[4] = 0.0; // a NaN the kernel lost
        let rep = check_output(&tensor(&out), &OracleOutput::Float(r.clone()), &tol);
        assert!(!rep.passed && rep.non_finite == 1, "{rep:?}");
        out[4] = f32::NAN;
        out[5] = f32::INFINITY; // the wrong infinity
        assert!(!check_output(&tensor(&out), &OracleOutput::Float(r), &tol).passed);
    }

    #[test]
    fn integers_are_exact() {
        let t = HostTensor::from_i64(vec![3], vec![1, 2, 3]).unwrap();
        assert!(
            check_output(
                &t,
                &OracleOutput::Int(vec![1, 2, 3]),
                &Tolerance::for_dtype(DType::I64)
            )
            .passed
        );
        let rep = check_output(
            &t,
            &OracleOutput::Int(vec![1, 2, 4]),
            &Tolerance::for_dtype(DType::I64),
        );
        assert!(!rep.passed && rep.mismatches == 1 && rep.worst_index == Some(2));
    }

    #[test]
    fn parallel_conversions_equal_the_serial_ones() {
        let r = reference();
        let tensors = [
            tensor(&r.iter().map(|&x| x as f32).collect::<Vec<_>>()),
            HostTensor::from_f64(vec![r.len()], r.clone()).unwrap(),
            encode(&OracleOutput::Float(r.clone()), DType::BF16, vec![r.len()]).unwrap(),
            encode(&OracleOutput::Float(r.clone()), DType::F16, vec![r.len()]).unwrap(),
            HostTensor::from_i32(vec![3], vec![-1, 7, i32::MAX]).unwrap(),
            HostTensor::from_i64(vec![2], vec![-5, 1 << 40]).unwrap(),
            HostTensor::from_u8(vec![2], vec![0, 255]).unwrap(),
        ];
        for t in tensors {
            let (par, serial) = (par_to_f64_vec(&t), t.to_f64_vec());
            assert!(par
                .iter()
                .zip(&serial)
                .all(|(a, b)| a.to_bits() == b.to_bits()));
            assert_eq!(par.len(), serial.len());
        }
    }

    #[test]
    fn against_a_reference_output_is_the_check_against_it_as_an_oracle() {
        let r = reference();
        for (dtype, tol) in [
            (DType::F32, Tolerance::for_dtype(DType::F32)),
            (DType::BF16, Tolerance::EXACT),
            (DType::BF16, Tolerance::for_dtype(DType::BF16)),
        ] {
            let reference = encode(&OracleOutput::Float(r.clone()), dtype, vec![r.len()]).unwrap();
            let mut out = reference.clone();
            let size = dtype.size_bytes();
            out.bytes[7 * size] ^= 1;
            out.bytes[9 * size..10 * size].copy_from_slice(&poison_pattern(dtype));
            let as_oracle = OracleOutput::Float(reference.to_f64_vec());
            for candidate in [&reference, &out] {
                let old = check_output(candidate, &as_oracle, &tol);
                let new = check_against(candidate, &reference, &tol);
                assert_eq!(old.passed, new.passed, "{dtype:?}");
                assert_eq!(old.reason, new.reason);
                assert_eq!(
                    (old.unwritten, old.mismatches),
                    (new.unwritten, new.mismatches)
                );
            }
        }
        let ints = HostTensor::from_i32(vec![3], vec![1, 2, 3]).unwrap();
        let other = HostTensor::from_i32(vec![3], vec![1, 5, 3]).unwrap();
        let rep = check_against(&other, &ints, &Tolerance::EXACT);
        assert!(!rep.passed && rep.mismatches == 1 && rep.worst_index == Some(1));
        assert!(check_against(&ints, &ints, &Tolerance::EXACT).passed);
    }

    /// Six rows of three, rows 1 and 4 updated: the oracle, the initial value, and the
    /// correct output.
    fn row_update() -> (RowUpdate, HostTensor, Vec<f32>) {
        let init: Vec<f32> = (0..18).map(|i| i as f32 * 0.25 - 2.0).collect();
        let initial = HostTensor::from_f32(vec![6, 3], init).unwrap();
        let oracle = RowUpdate {
            total_rows: 6,
            width: 3,
            rows: vec![1, 4],
            delta: (0..6).map(|k| 0.01 * (k as f64 + 1.0)).collect(),
            update_rel_l2: 1e-4,
            update_max_scaled: 1e-3,
        };
        let correct = oracle.dense(&initial).iter().map(|&x| x as f32).collect();
        (oracle, initial, correct)
    }

    /// The listed rows of `out` (row `rows[u]` at row `u`), as bytes.
    fn listed(oracle: &RowUpdate, out: &[f32]) -> Vec<u8> {
        let w = oracle.width;
        oracle
            .rows
            .iter()
            .flat_map(|&r| &out[r as usize * w..(r as usize + 1) * w])
            .flat_map(|x| x.to_le_bytes())
            .collect()
    }

    #[test]
    fn the_changed_rows_alone_give_the_full_checks_verdict() {
        let (oracle, initial, correct) = row_update();
        let tol = Tolerance::for_dtype(DType::F32);
        let poison = f32::from_le_bytes(poison_pattern(DType::F32).try_into().unwrap());
        let with = |i: usize, x: f32| {
            let mut out = correct.clone();
            out[i] = x;
            out
        };
        let cases = [
            correct.clone(),
            with(13, correct[13] + 1e-3), // row 4, element 1: the update is off
            with(5, poison),              // row 1 never written
            with(12, f32::NAN),
        ];
        for (c, out) in cases.iter().enumerate() {
            let whole = HostTensor::from_f32(vec![6, 3], out.clone()).unwrap();
            let full = check_rows(&whole, &initial, &oracle, &tol);
            let changed = listed(&oracle, out);
            let rows = check_changed_rows(&changed, &initial, &oracle, RowsReference::Oracle, &tol);
            assert_eq!(full.passed, c == 0, "case {c}: {}", full.reason);
            assert_eq!(
                (rows.passed, rows.elements, rows.unwritten, rows.non_finite),
                (full.passed, full.elements, full.unwritten, full.non_finite),
                "case {c}"
            );
            assert_eq!(
                (rows.worst_index, &rows.reason),
                (full.worst_index, &full.reason)
            );
            if c == 1 {
                assert_eq!(rows.worst_index, Some(13), "an element of the whole tensor");
            }
        }
    }

    #[test]
    fn the_changed_rows_against_another_kernels_take_its_update_for_the_oracles() {
        let (oracle, initial, correct) = row_update();
        let tol = Tolerance::for_dtype(DType::F32);
        let reference = listed(&oracle, &correct);
        let against = RowsReference::Kernel(&reference);
        assert!(check_changed_rows(&reference, &initial, &oracle, against, &tol).passed);
        // The oracle's update ignored: the reference's rows are what is compared with.
        let mut other = oracle.clone();
        other.delta.iter_mut().for_each(|d| *d = -*d);
        assert!(check_changed_rows(&reference, &initial, &other, against, &tol).passed);
        let mut off = correct.clone();
        off[4] += 1e-3;
        let rep = check_changed_rows(&listed(&oracle, &off), &initial, &oracle, against, &tol);
        assert!(
            !rep.passed && rep.reason.contains("the update of the"),
            "{rep:?}"
        );
        assert_eq!(rep.worst_index, Some(4));
    }

    #[test]
    fn row_checks_refuse_what_does_not_fit_without_panicking() {
        let (oracle, initial, correct) = row_update();
        let tol = Tolerance::for_dtype(DType::F32);
        let changed = listed(&oracle, &correct);
        let check = |changed: &[u8], oracle: &RowUpdate, against| {
            check_changed_rows(changed, &initial, oracle, against, &tol)
        };
        let short = check(&changed[4..], &oracle, RowsReference::Oracle);
        assert!(!short.passed && short.reason.contains("bytes of changed rows"));
        let reference = check(&changed, &oracle, RowsReference::Kernel(&changed[..8]));
        assert!(!reference.passed && reference.reason.contains("bytes of changed rows"));
        let mut past = oracle.clone();
        past.rows[1] = 6;
        let rep = check(&changed, &past, RowsReference::Oracle);
        assert_eq!(rep.reason, "the oracle lists row 6 of 6");
        let whole = HostTensor::from_f32(vec![6, 3], correct.clone()).unwrap();
        assert_eq!(check_rows(&whole, &initial, &past, &tol).reason, rep.reason);
        let mut wide = oracle.clone();
        wide.width = 4;
        assert!(!check(&changed, &wide, RowsReference::Oracle).passed);
    }

    #[test]
    fn an_encoding_at_hand_gives_the_same_verdict() {
        let r = vec![1.5, -0.0, 2.0, f64::NAN];
        let oracle = OracleOutput::Float(r);
        let want = encode(&oracle, DType::F32, vec![4]).unwrap();
        let ctx = CheckContext {
            encoded: Some(&want.bytes),
            initial: None,
        };
        // Another NaN payload matches; +0 for -0 does not.
        let t = |v: Vec<f32>| HostTensor::from_f32(vec![v.len()], v).unwrap();
        let other_nan = t(vec![1.5, -0.0, 2.0, f32::from_bits(0x7FC0_0001)]);
        assert!(check_output_with(&other_nan, &oracle, &Tolerance::EXACT, ctx).passed);
        let zero = t(vec![1.5, 0.0, 2.0, f32::NAN]);
        let (a, b) = (
            check_output_with(&zero, &oracle, &Tolerance::EXACT, ctx),
            check_output(&zero, &oracle, &Tolerance::EXACT),
        );
        assert_eq!(a, b);
        assert!(!a.passed && a.worst_index == Some(1));
    }
}
