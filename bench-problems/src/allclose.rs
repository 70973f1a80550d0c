//! KernelBench's correctness test, for comparison with ours ([`crate::check`]):
//! `torch.allclose(out, ref, atol=atol, rtol=rtol)`, every element within
//! `atol + rtol·|ref|` of the reference. An absolute tolerance cannot tell a small reference
//! from zero, which is how an all-zeros tensor passed some KernelBench problems; the self-test
//! ([`crate::selftest::degenerate_verdicts`]) measures what this test says of the degenerate
//! outputs our check rejects. Nothing in the runner uses it.
//!
//! Semantics are torch's (`at::isclose`, `equal_nan=False`): an element is close when it equals
//! the reference (so equal infinities of the same sign are close), or when |out − ref| is finite
//! and at most `atol + |rtol·ref|`; a NaN is close to nothing, not even a NaN. The reference is
//! the f64 oracle and the arithmetic is f64 (torch computes in the tensors' common dtype);
//! integer outputs are compared as numbers, their difference taken exactly. A row-update oracle
//! ([`OracleOutput::Rows`]) is compared in its dense form, made from the initial value.
use crate::oracle::OracleOutput;
use data_gen::HostTensor;

/// Whether `out` is element for element within `atol + rtol·|ref|` of `oracle` (torch's
/// `allclose`). `initial` is the initial value of an in-place output, which a row-update oracle
/// needs; `Err` when it is missing or the element counts differ (torch would refuse shapes that
/// do not broadcast).
pub fn allclose(
    out: &HostTensor,
    oracle: &OracleOutput,
    initial: Option<&HostTensor>,
    atol: f64,
    rtol: f64,
) -> Result<bool, String> {
    let n = out.numel();
    if oracle.len() != n {
        return Err(format!(
            "output has {n} elements, the oracle {}",
            oracle.len()
        ));
    }
    let dense;
    let oracle = match oracle {
        OracleOutput::Rows(_) => {
            dense = oracle.densified(initial)?;
            &dense
        }
        other => other,
    };
    Ok(match oracle {
        OracleOutput::Int(reference) if !out.dtype.is_float() => {
            let got = out.to_i64_vec().map_err(|e| e.to_string())?;
            got.iter()
                .zip(reference)
                .all(|(&a, &b)| isclose_int(a, b, atol, rtol))
        }
        OracleOutput::Int(reference) => out
            .to_f64_vec()
            .iter()
            .zip(reference)
            .all(|(&a, &b)| isclose(a, b as f64, atol, rtol)),
        OracleOutput::Float(reference) => out
            .to_f64_vec()
            .iter()
            .zip(reference)
            .all(|(&a, &b)| isclose(a, b, atol, rtol)),
        OracleOutput::Rows(_) => unreachable!("densified above"),
    })
}

/// torch's `isclose` of one float element `a` against the reference `b` (`equal_nan=False`).
pub fn isclose(a: f64, b: f64, atol: f64, rtol: f64) -> bool {
    if a == b {
        return true;
    }
    let error = (a - b).abs();
    error.is_finite() && error <= atol + (rtol * b).abs()
}

/// [`isclose`] of integers: the difference exact, the bound in f64.
pub fn isclose_int(a: i64, b: i64, atol: f64, rtol: f64) -> bool {
    a == b || ((a as i128 - b as i128).unsigned_abs() as f64) <= atol + (rtol * b as f64).abs()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oracle::RowUpdate;

    fn f32s(v: &[f32]) -> HostTensor {
        HostTensor::from_f32(vec![v.len()], v.to_vec()).unwrap()
    }

    fn floats(v: &[f64]) -> OracleOutput {
        OracleOutput::Float(v.to_vec())
    }

    #[test]
    fn elements_within_atol_plus_rtol_times_reference_are_close() {
        // Bound at (1e-2, 1e-2) for a reference of 1: 0.02; of 100: 1.01; of 0: 0.01.
        assert!(isclose(1.015, 1.0, 1e-2, 1e-2));
        assert!(!isclose(1.025, 1.0, 1e-2, 1e-2));
        assert!(isclose(101.0, 100.0, 1e-2, 1e-2));
        assert!(!isclose(101.5, 100.0, 1e-2, 1e-2));
        assert!(isclose(0.005, 0.0, 1e-2, 1e-2));
        assert!(!isclose(0.02, 0.0, 1e-2, 1e-2));
        // The bound uses |rtol·ref|, so a negative reference is symmetric.
        assert!(isclose(-101.0, -100.0, 1e-2, 1e-2));
        // Zero passes for any reference of magnitude ≤ atol / (1 − rtol).
        assert!(isclose(0.0, 0.0101, 1e-2, 1e-2));
        assert!(!isclose(0.0, 0.0102, 1e-2, 1e-2));
        assert!(isclose(0.0, 1e-4, 1e-4, 1e-4));
        assert!(!isclose(0.0, 2e-4, 1e-4, 1e-4));
        // Zero tolerances: equality only.
        assert!(isclose(3.0, 3.0, 0.0, 0.0));
        assert!(!isclose(3.0 + 1e-15, 3.0, 0.0, 0.0));
    }

    #[test]
    fn nan_is_close_to_nothing_and_infinities_only_to_themselves() {
        let inf = f64::INFINITY;
        assert!(!isclose(f64::NAN, f64::NAN, 1e-2, 1e-2));
        assert!(!isclose(f64::NAN, 1.0, 1e-2, 1e-2));
        assert!(!isclose(1.0, f64::NAN, 1e-2, 1e-2));
        assert!(isclose(inf, inf, 1e-2, 1e-2));
        assert!(isclose(-inf, -inf, 1e-2, 1e-2));
        assert!(!isclose(inf, -inf, 1e-2, 1e-2));
        assert!(!isclose(1e300, inf, 1e-2, 1e-2));
        assert!(!isclose(inf, 1e300, 1e-2, 1e-2));
        // A finite difference that overflows is not close.
        assert!(!isclose(f64::MAX, -f64::MAX, 1e-2, 1e-2));
    }

    #[test]
    fn integers_are_compared_as_numbers() {
        assert!(isclose_int(7, 7, 0.0, 0.0));
        assert!(!isclose_int(8, 7, 1e-2, 1e-2));
        // Off by one is close once 0.01 + 0.01·|ref| ≥ 1, i.e. |ref| ≥ 99.
        assert!(isclose_int(101, 100, 1e-2, 1e-2));
        assert!(!isclose_int(99, 98, 1e-2, 1e-2));
        assert!(isclose_int(-101, -100, 1e-2, 1e-2));
        // Extremes do not overflow the difference.
        assert!(!isclose_int(i64::MAX, i64::MIN, 1e-2, 1e-2));
    }

    #[test]
    fn allclose_needs_every_element_close() {
        let reference = floats(&[1.0, -2.0, 0.5]);
        assert_eq!(
            allclose(&f32s(&[1.0, -2.0, 0.5]), &reference, None, 0.0, 0.0),
            Ok(true)
        );
        assert_eq!(
            allclose(&f32s(&[1.01, -2.02, 0.5]), &reference, None, 1e-2, 1e-2),
            Ok(true)
        );
        assert_eq!(
            allclose(&f32s(&[1.01, -2.05, 0.5]), &reference, None, 1e-2, 1e-2),
            Ok(false)
        );
        assert_eq!(
            allclose(&f32s(&[1.0, -2.0, f32::NAN]), &reference, None, 1e-2, 1e-2),
            Ok(false)
        );
        // All zeros against a small reference: accepted at 1e-2, not at 1e-4.
        let small = floats(&[0.004, -0.008, 0.001]);
        assert_eq!(
            allclose(&f32s(&[0.0; 3]), &small, None, 1e-2, 1e-2),
            Ok(true)
        );
        assert_eq!(
            allclose(&f32s(&[0.0; 3]), &small, None, 1e-4, 1e-4),
            Ok(false)
        );
        assert!(allclose(&f32s(&[0.0; 2]), &small, None, 1e-2, 1e-2).is_err());
    }

    #[test]
    fn allclose_of_other_dtypes() {
        let ints = OracleOutput::Int(vec![0, 250, -3]);
        let i32s = |v: &[i32]| HostTensor::from_i32(vec![v.len()], v.to_vec()).unwrap();
        assert_eq!(
            allclose(&i32s(&[0, 250, -3]), &ints, None, 0.0, 0.0),
            Ok(true)
        );
        // 251 against 250: 1 ≤ 0.01 + 2.5.
        assert_eq!(
            allclose(&i32s(&[0, 251, -3]), &ints, None, 1e-2, 1e-2),
            Ok(true)
        );
        assert_eq!(
            allclose(&i32s(&[0, 250, -2]), &ints, None, 1e-2, 1e-2),
            Ok(false)
        );
        let u8s = HostTensor::from_u8(vec![3], vec![0, 250, 253]).unwrap();
        assert_eq!(allclose(&u8s, &ints, None, 1e-2, 1e-2), Ok(false));
        // bf16 output: 1.0 + 2^-7 = 1.0078125 against 1.0 is within 1e-2 but not 1e-4.
        let bf = HostTensor::from_bf16(vec![1], vec![half::bf16::from_f64(1.0078125)]).unwrap();
        assert_eq!(allclose(&bf, &floats(&[1.0]), None, 1e-2, 1e-2), Ok(true));
        assert_eq!(allclose(&bf, &floats(&[1.0]), None, 1e-4, 1e-4), Ok(false));
    }

    #[test]
    fn a_row_update_is_compared_in_its_dense_form() {
        // 3 rows of 2; row 1 gains (0.5, -0.5).
        let initial = f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let rows = OracleOutput::Rows(RowUpdate {
            total_rows: 3,
            width: 2,
            rows: vec![1],
            delta: vec![0.5, -0.5],
            update_rel_l2: 1e-5,
            update_max_scaled: 1e-4,
        });
        let updated = f32s(&[1.0, 2.0, 3.5, 3.5, 5.0, 6.0]);
        assert_eq!(
            allclose(&updated, &rows, Some(&initial), 0.0, 0.0),
            Ok(true)
        );
        // The initial value unchanged: off by 0.5 on row 1.
        assert_eq!(
            allclose(&initial, &rows, Some(&initial), 1e-2, 1e-2),
            Ok(false)
        );
        // A 1% step missed entirely passes at rtol 1e-2: the tolerance sees the value, not the
        // update.
        let big = f32s(&[100.0, 100.0, 100.0, 100.0]);
        let step = OracleOutput::Rows(RowUpdate {
            total_rows: 2,
            width: 2,
            rows: vec![0],
            delta: vec![0.5, 0.5],
            update_rel_l2: 1e-5,
            update_max_scaled: 1e-4,
        });
        assert_eq!(allclose(&big, &step, Some(&big), 1e-2, 1e-2), Ok(true));
        assert_eq!(allclose(&big, &step, Some(&big), 1e-4, 1e-4), Ok(false));
        assert!(allclose(&updated, &rows, None, 1e-2, 1e-2).is_err());
    }
}
