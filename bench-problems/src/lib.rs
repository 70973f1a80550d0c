//! The DLRM-Bench problem catalog.
//!
//! A problem ([`Problem`]) declares its named tensors (dtype, shape in size symbols, role), its
//! sizes per preset, how its inputs are generated (from `data-gen`), an oracle in f64 (exact for
//! integers), the tolerance of each output, its compulsory and logical bytes and flops, and its
//! reference launch plan. The runner knows problems only through this trait: adding a problem is
//! one module in [`problems`] and one line in [`registry`].

pub mod check;
pub mod expr;
pub mod launch;
pub mod problems;
pub mod registry;
pub mod selftest;
pub mod spec;

pub use check::{check_output, CheckReport, Tolerance};
pub use launch::{Dim, LaunchSpec, ScratchSpec};
pub use registry::{all_problems, find_problem};
pub use spec::{
    InputSet, OracleOutput, Preset, Problem, ProblemError, Role, Sizes, TensorSpec, Work,
};
