//! The crate's error type: every variant says what was wrong and where (parameter name and
//! value, file path, tensor name).

use std::path::PathBuf;

use crate::dtype::DType;

/// Everything that can go wrong while generating inputs or reading/writing tensors.
#[derive(Debug, thiserror::Error)]
pub enum DataGenError {
    /// A generator parameter is out of its domain.
    #[error("invalid parameter `{name}` = {value}: {reason}")]
    InvalidParameter {
        /// The parameter's name, e.g. `alpha`.
        name: &'static str,
        /// The offending value, formatted.
        value: String,
        /// What the parameter must satisfy.
        reason: &'static str,
    },

    /// Reading or writing a file failed.
    #[error("I/O error on `{}`: {source}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// A safetensors file could not be parsed or serialized.
    #[error("safetensors error on `{}`: {source}", .path.display())]
    Safetensors {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: safetensors::SafeTensorError,
    },

    /// A named tensor is absent.
    #[error(
        "tensor `{name}` not found{} (available: [{}])",
        .file.as_ref().map(|p| format!(" in `{}`", p.display())).unwrap_or_default(),
        .available.join(", ")
    )]
    MissingTensor {
        /// The tensor asked for.
        name: String,
        /// The file it was looked for in, when known.
        file: Option<PathBuf>,
        /// The tensors that are present.
        available: Vec<String>,
    },

    /// A tensor in a file has a dtype this crate does not handle.
    #[error("tensor `{tensor}` in `{}` has unsupported dtype {dtype}", .path.display())]
    UnsupportedDType {
        /// The tensor's name.
        tensor: String,
        /// The dtype as safetensors spells it.
        dtype: String,
        /// The file.
        path: PathBuf,
    },

    /// A byte buffer does not match the size implied by a shape and dtype.
    #[error("shape {shape:?} of dtype {dtype} needs {expected} bytes, got {actual}")]
    ShapeMismatch {
        /// The shape.
        shape: Vec<usize>,
        /// The dtype.
        dtype: DType,
        /// Bytes implied by shape and dtype.
        expected: usize,
        /// Bytes supplied.
        actual: usize,
    },

    /// A trace file is malformed (bad offsets, lengths, dtype, metadata).
    #[error("trace `{}`: {message}", .path.display())]
    InvalidTrace {
        /// The file (or directory).
        path: PathBuf,
        /// What is wrong.
        message: String,
    },

    /// A conversion asked of a tensor that its dtype does not allow.
    #[error("cannot {op} a tensor of dtype {dtype}")]
    DTypeMismatch {
        /// What was attempted, e.g. `read as integers`.
        op: &'static str,
        /// The tensor's dtype.
        dtype: DType,
    },
}

impl DataGenError {
    /// Shorthand for [`DataGenError::InvalidParameter`].
    pub fn invalid(
        name: &'static str,
        value: impl std::fmt::Display,
        reason: &'static str,
    ) -> Self {
        DataGenError::InvalidParameter {
            name,
            value: value.to_string(),
            reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_culprit() {
        let e = DataGenError::invalid("alpha", -1.0, "must be finite and >= 0");
        assert_eq!(
            e.to_string(),
            "invalid parameter `alpha` = -1: must be finite and >= 0"
        );
        let e = DataGenError::MissingTensor {
            name: "weight".into(),
            file: Some(PathBuf::from("/tmp/x.safetensors")),
            available: vec!["indices".into(), "offsets".into()],
        };
        let msg = e.to_string();
        assert!(
            msg.contains("weight") && msg.contains("/tmp/x.safetensors"),
            "{msg}"
        );
        assert!(msg.contains("indices, offsets"), "{msg}");
        let e = DataGenError::MissingTensor {
            name: "w".into(),
            file: None,
            available: vec![],
        };
        assert_eq!(e.to_string(), "tensor `w` not found (available: [])");
    }
}
