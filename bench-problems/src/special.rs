//! Special-value input sets (docs/design.md §6, `Problem::special_sets`): a generated set with ±inf,
//! NaN and −0 planted in a float tensor, or with every index equal. The oracle then says what
//! each output is on them, and the check wants the same NaN or infinity where the oracle has
//! one.
use crate::error::ProblemError;
use crate::input_set::InputSet;
use data_gen::{DType, HostTensor};

/// The values planted by [`with_special_values`], in order.
pub const SPECIAL_VALUES: [f32; 4] = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0];

/// `set` with the first element of each of `rows` rows of float tensor `name` (`row_len`
/// elements a row) set to NaN, +inf, −inf and −0 in turn.
pub fn with_special_values(
    mut set: InputSet,
    name: &str,
    row_len: usize,
    rows: &[usize],
) -> Result<InputSet, ProblemError> {
    let t = set.tensors.get(name)?;
    let mut values = t.to_f32_vec();
    for (k, &row) in rows.iter().enumerate() {
        if let Some(v) = values.get_mut(row * row_len) {
            *v = SPECIAL_VALUES[k % SPECIAL_VALUES.len()];
        }
    }
    let shape = t.shape.clone();
    let tensor = match t.dtype {
        DType::F32 => HostTensor::from_f32(shape, values)?,
        DType::BF16 => HostTensor::from_bf16(
            shape,
            values.into_iter().map(half::bf16::from_f32).collect(),
        )?,
        DType::F16 => {
            HostTensor::from_f16(shape, values.into_iter().map(half::f16::from_f32).collect())?
        }
        other => {
            return Err(ProblemError::invalid(
                "special values",
                format!("tensor `{name}` is {other}, not a float tensor"),
            ))
        }
    };
    set.tensors.insert(name, tensor);
    Ok(set)
}

/// `set` with every element of i64 tensor `name` set to its first element (all ties).
pub fn with_all_equal(mut set: InputSet, name: &str) -> Result<InputSet, ProblemError> {
    let t = set.tensors.get(name)?;
    let v = t.to_i64_vec()?;
    let first = v.first().copied().unwrap_or(0);
    let tensor = HostTensor::from_i64(t.shape.clone(), vec![first; v.len()])?;
    set.tensors.insert(name, tensor);
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sizes::sizes_of;

    fn set() -> InputSet {
        InputSet::builder(1, &sizes_of(&[]))
            .f32("w", &[3, 2], vec![1.0; 6])
            .unwrap()
            .i64("idx", &[3], vec![5, 1, 2])
            .unwrap()
            .build()
    }

    #[test]
    fn every_declared_special_set_has_non_finite_oracle_values_that_the_check_holds_to() {
        use crate::check::{check_output, encode};
        use crate::oracle::OracleOutput;
        use crate::signature::{shape_of, Role};
        let mut declared = 0;
        for p in crate::all_problems() {
            for label in p.special_sets() {
                let set = p
                    .generate_special(label, crate::Preset::Ci, 3.into())
                    .unwrap();
                declared += 1;
                let oracle = p.oracle(&set).unwrap();
                let mut non_finite = 0;
                for spec in p.tensors().into_iter().filter(|t| t.role != Role::Input) {
                    let OracleOutput::Float(values) = &oracle[spec.name] else {
                        continue;
                    };
                    let shape = shape_of(&spec, &set.sizes).unwrap();
                    let good = encode(&oracle[spec.name], spec.dtype, shape.clone()).unwrap();
                    let tol = p.tolerance(&spec);
                    let rep = check_output(&good, &oracle[spec.name], &tol);
                    assert!(rep.passed, "{} {label}: {}", p.name(), rep.reason);
                    let Some(at) = values.iter().position(|v| v.is_nan()) else {
                        continue;
                    };
                    non_finite += 1;
                    // A kernel that loses the NaN (writes 0 there) fails.
                    let mut lost = values.clone();
                    lost[at] = 0.0;
                    let bad = encode(&OracleOutput::Float(lost), spec.dtype, shape).unwrap();
                    let rep = check_output(&bad, &oracle[spec.name], &tol);
                    assert!(!rep.passed, "{} {label}: a lost NaN passed", p.name());
                }
                assert!(non_finite > 0, "{} {label}: no NaN in the oracle", p.name());
            }
        }
        assert!(declared >= 3, "problems 1, 2 and 12 declare special sets");
        let p = crate::find_problem("fm_interaction").unwrap();
        assert!(p
            .generate_special("nope", crate::Preset::Ci, 3.into())
            .is_err());
    }

    #[test]
    fn plants_each_special_value_once_per_row() {
        let s = with_special_values(set(), "w", 2, &[0, 2, 9]).unwrap();
        let w = s.f32s("w").unwrap();
        assert!(w[0].is_nan() && w[4] == f32::INFINITY);
        assert_eq!(&w[1..4], &[1.0, 1.0, 1.0]);
        assert!(with_special_values(set(), "idx", 1, &[0]).is_err());
        assert_eq!(
            with_all_equal(set(), "idx").unwrap().i64s("idx").unwrap(),
            [5, 5, 5]
        );
    }
}
