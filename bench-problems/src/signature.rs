//! A problem's signature: named tensors with their dtype, shape (one size expression per
//! dimension) and role, and what the runner derives from them (shapes, poisoned outputs).
use crate::error::ProblemError;
use crate::poison::poison_pattern;
use crate::sizes::Sizes;
use data_gen::{DType, HostTensor};
use serde::{Deserialize, Serialize};

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

impl TensorSpec {
    /// A read-only input.
    pub const fn input(name: &'static str, dtype: DType, shape: &'static [&'static str]) -> Self {
        TensorSpec {
            name,
            dtype,
            shape,
            role: Role::Input,
        }
    }

    /// An output (poisoned before every run).
    pub const fn output(name: &'static str, dtype: DType, shape: &'static [&'static str]) -> Self {
        TensorSpec {
            name,
            dtype,
            shape,
            role: Role::Output,
        }
    }

    /// A tensor updated in place (its initial value comes with the input set).
    pub const fn in_out(name: &'static str, dtype: DType, shape: &'static [&'static str]) -> Self {
        TensorSpec {
            name,
            dtype,
            shape,
            role: Role::InOut,
        }
    }
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
    let pattern = poison_pattern(spec.dtype);
    let bytes: Vec<u8> = pattern
        .iter()
        .copied()
        .cycle()
        .take(numel * spec.dtype.size_bytes())
        .collect();
    Ok(HostTensor::new(spec.dtype, shape, bytes)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sizes::sizes_of;

    #[test]
    fn constructors_set_the_role_and_shapes_evaluate() {
        let t = TensorSpec::input("offsets", DType::I64, &["B + 1"]);
        assert_eq!(t.role, Role::Input);
        assert_eq!(
            TensorSpec::output("o", DType::F32, &["B"]).role,
            Role::Output
        );
        assert_eq!(
            TensorSpec::in_out("m", DType::F32, &["E"]).role,
            Role::InOut
        );
        assert_eq!(shape_of(&t, &sizes_of(&[("B", 4)])).unwrap(), vec![5]);
        let p = poisoned(
            &TensorSpec::output("o", DType::I32, &["B"]),
            &sizes_of(&[("B", 2)]),
        )
        .unwrap();
        assert_eq!(
            p.bytes,
            [poison_pattern(DType::I32), poison_pattern(DType::I32)].concat()
        );
    }
}
