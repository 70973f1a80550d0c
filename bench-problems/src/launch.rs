//! Launch plans: one or more kernel launches with grid, block, shared memory and arguments as
//! expressions over size symbols. References and candidates use the same form.
use crate::error::ProblemError;
use crate::sizes::Sizes;
use serde::{Deserialize, Serialize};

/// A dimension: a number or an expression over size symbols.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Dim {
    Number(i64),
    Expr(String),
}

impl Dim {
    pub fn eval(&self, sizes: &Sizes) -> Result<i64, ProblemError> {
        match self {
            Dim::Number(n) => Ok(*n),
            Dim::Expr(e) => crate::expr::eval(e, sizes),
        }
    }
}

impl From<i64> for Dim {
    fn from(n: i64) -> Self {
        Dim::Number(n)
    }
}

impl From<&str> for Dim {
    fn from(s: &str) -> Self {
        Dim::Expr(s.to_string())
    }
}

fn zero() -> Dim {
    Dim::Number(0)
}

/// One kernel launch of a plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaunchSpec {
    /// Entry name in the module.
    pub kernel: String,
    pub grid: [Dim; 3],
    pub block: [Dim; 3],
    #[serde(default = "zero")]
    pub shared_bytes: Dim,
    /// Tensor names (passed as device pointers), scratch names, size symbols or expressions
    /// (passed as integers of the parameter's width).
    pub args: Vec<String>,
}

impl LaunchSpec {
    /// A launch of `kernel` with no dynamic shared memory: `LaunchSpec::new("k",
    /// ["ceil_div(N, 256)".into(), 1.into(), 1.into()], [256.into(), 1.into(), 1.into()],
    /// &["x", "out", "N"])`.
    pub fn new(kernel: &str, grid: [Dim; 3], block: [Dim; 3], args: &[&str]) -> Self {
        LaunchSpec {
            kernel: kernel.into(),
            grid,
            block,
            shared_bytes: zero(),
            args: args.iter().map(|a| a.to_string()).collect(),
        }
    }

    /// A one-dimensional launch: `grid` blocks of `block` threads.
    pub fn linear(kernel: &str, grid: impl Into<Dim>, block: i64, args: &[&str]) -> Self {
        Self::new(
            kernel,
            [grid.into(), 1.into(), 1.into()],
            [block.into(), 1.into(), 1.into()],
            args,
        )
    }

    /// The same launch with `bytes` of dynamic shared memory.
    pub fn with_shared(mut self, bytes: impl Into<Dim>) -> Self {
        self.shared_bytes = bytes.into();
        self
    }
}

/// A scratch device buffer of a plan (poisoned, not zeroed, before every checked run).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScratchSpec {
    pub name: String,
    /// Bytes, an expression over size symbols.
    pub bytes: Dim,
}

impl ScratchSpec {
    /// Scratch buffer `name` of `bytes` (an expression over size symbols).
    pub fn new(name: &str, bytes: impl Into<Dim>) -> Self {
        ScratchSpec {
            name: name.into(),
            bytes: bytes.into(),
        }
    }
}
