//! The error type of the problem layer (a leaf: it imports nothing of this crate).

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

impl ProblemError {
    /// An [`ProblemError::Invalid`] naming `problem`.
    pub fn invalid(problem: &str, message: impl Into<String>) -> Self {
        ProblemError::Invalid {
            problem: problem.into(),
            message: message.into(),
        }
    }
}
