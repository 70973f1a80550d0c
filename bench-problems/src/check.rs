//! The correctness check of one output against its oracle.
//!
//! Floats are judged scale-invariantly: the relative L2 error ‖out − ref‖₂ / ‖ref‖₂ and the
//! largest error scaled by ‖ref‖∞, each against a bound per output dtype, so neither an all-zeros
//! tensor nor a constant can pass because the reference is small. Any poison left (an element
//! the kernel never wrote), NaN or infinity fails. Integers must match exactly.
use crate::oracle::OracleOutput;
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
}

/// Checks `out` against `oracle` under `tol`.
pub fn check_output(out: &HostTensor, oracle: &OracleOutput, tol: &Tolerance) -> CheckReport {
    let n = out.numel();
    let mut report = CheckReport {
        passed: false,
        elements: n,
        unwritten: 0,
        non_finite: 0,
        rel_l2: 0.0,
        max_scaled: 0.0,
        mismatches: 0,
        worst_index: None,
        reason: String::new(),
    };
    if oracle.len() != n {
        report.reason = format!("output has {n} elements, the oracle {}", oracle.len());
        return report;
    }
    let size = out.dtype.size_bytes();
    let poison = poison_pattern(out.dtype);
    let unwritten: Vec<usize> = (0..n)
        .into_par_iter()
        .filter(|&i| out.bytes[i * size..(i + 1) * size] == poison[..])
        .collect();
    report.unwritten = unwritten.len();
    match oracle {
        OracleOutput::Float(reference) if tol.exact => {
            check_float_bits(out, reference, &mut report);
        }
        OracleOutput::Float(reference) => {
            let got = out.to_f64_vec();
            check_floats(&got, reference, &mut report);
        }
        OracleOutput::Int(reference) => match out.to_i64_vec() {
            Ok(got) => {
                let bad: Vec<usize> = (0..n)
                    .into_par_iter()
                    .filter(|&i| got[i] != reference[i])
                    .collect();
                report.mismatches = bad.len();
                report.worst_index = bad.first().copied();
            }
            Err(e) => report.reason = format!("integer output expected: {e}"),
        },
    }
    if report.unwritten > 0 {
        report.worst_index = unwritten.first().copied();
        report.reason = format!(
            "{} of {n} elements never written (poison left; first at {})",
            report.unwritten, unwritten[0]
        );
    } else if report.non_finite > 0 {
        report.reason = format!(
            "{} of {n} elements are NaN or infinite where the oracle's are not, or finite where \
             the oracle's are not",
            report.non_finite
        );
    } else if report.mismatches > 0 {
        let kind = if matches!(oracle, OracleOutput::Float(_)) {
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

/// Bit-exact float comparison against the oracle rounded to the output's dtype.
fn check_float_bits(out: &HostTensor, reference: &[f64], report: &mut CheckReport) {
    let want = match encode(
        &OracleOutput::Float(reference.to_vec()),
        out.dtype,
        out.shape.clone(),
    ) {
        Ok(t) => t.to_f64_vec(),
        Err(e) => {
            report.reason = format!("float output expected: {e}");
            return;
        }
    };
    let got = out.to_f64_vec();
    let bad: Vec<usize> = (0..got.len())
        .into_par_iter()
        .filter(|&i| {
            let (g, w) = (got[i], want[i]);
            !(g.is_nan() && w.is_nan()) && g.to_bits() != w.to_bits()
        })
        .collect();
    report.mismatches = bad.len();
    report.worst_index = bad.first().copied();
}

/// The scale-invariant test. Elements where the oracle is NaN or infinite (special-value input
/// sets) must be the same NaN or infinity and stay out of the norms; any other non-finite
/// element fails.
fn check_floats(got: &[f64], reference: &[f64], report: &mut CheckReport) {
    let (err2, ref2, ref_inf, worst, worst_i, non_finite) = got
        .par_iter()
        .zip(reference.par_iter())
        .enumerate()
        .map(|(i, (&g, &r))| {
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
    report.non_finite = non_finite;
    // A reference of all zeros would make every error infinite: problems guarantee it is not
    // (the self-test), and the floor keeps the arithmetic defined.
    let norm = ref2.sqrt().max(f64::MIN_POSITIVE);
    report.rel_l2 = err2.sqrt() / norm;
    report.max_scaled = worst.max(0.0) / ref_inf.max(f64::MIN_POSITIVE);
    if non_finite == 0 {
        report.worst_index = Some(worst_i);
    }
}

/// The oracle's values rounded to `dtype` (round to nearest even): what a correct kernel writes.
pub fn encode(
    oracle: &OracleOutput,
    dtype: DType,
    shape: Vec<usize>,
) -> Result<HostTensor, data_gen::DataGenError> {
    match (oracle, dtype) {
        (OracleOutput::Float(v), DType::F64) => HostTensor::from_f64(shape, v.clone()),
        (OracleOutput::Float(v), DType::F32) => {
            HostTensor::from_f32(shape, v.iter().map(|&x| x as f32).collect())
        }
        (OracleOutput::Float(v), DType::BF16) => {
            HostTensor::from_bf16(shape, v.iter().map(|&x| half::bf16::from_f64(x)).collect())
        }
        (OracleOutput::Float(v), DType::F16) => {
            HostTensor::from_f16(shape, v.iter().map(|&x| half::f16::from_f64(x)).collect())
        }
        (OracleOutput::Int(v), DType::I64) => HostTensor::from_i64(shape, v.clone()),
        (OracleOutput::Int(v), DType::I32) => {
            HostTensor::from_i32(shape, v.iter().map(|&x| x as i32).collect())
        }
        (OracleOutput::Int(v), DType::U8) => {
            HostTensor::from_u8(shape, v.iter().map(|&x| x as u8).collect())
        }
        (OracleOutput::Float(v), _) => HostTensor::from_f64(shape, v.clone()),
        (OracleOutput::Int(v), _) => HostTensor::from_i64(shape, v.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
