//! The DLRM-Bench problem catalog.
//!
//! A problem ([`Problem`]) declares its named tensors (dtype, shape in size symbols, role), its
//! sizes per preset, how its inputs are generated (from `data-gen`), an oracle in f64 (exact for
//! integers), the tolerance of each output, its compulsory and logical bytes and flops, and its
//! reference launch plan. The runner knows problems only through this trait.
//!
//! Layers, each importing only those above it: [`error`], [`sizes`], [`poison`] (leaves);
//! [`expr`]; [`signature`], [`input_set`], [`oracle`], [`launch`]; [`check`], [`special`],
//! [`allclose`]; [`problem`] (the trait); [`families`] (what problems of one kind share: CSR
//! bags, sparse sub-plans, interactions); [`problems`] (one module each); [`registry`]; [`shapes`]
//! (a problem at one of its timed shapes). [`spec`]
//! re-exports the vocabulary; `testing` (tests only) holds what the problems' tests share.
//! Adding a problem: `docs/adding-a-problem.md`.

pub mod allclose;
pub mod check;
pub mod error;
pub mod expr;
pub mod families;
pub mod input_set;
pub mod launch;
pub mod oracle;
pub mod poison;
pub mod problem;
pub mod problems;
pub mod registry;
pub mod selftest;
pub mod shapes;
pub mod signature;
pub mod sizes;
pub mod spec;
pub mod special;
#[cfg(test)]
pub(crate) mod testing;

pub use check::{check_output, check_output_with, CheckContext, CheckReport, Tolerance};
pub use launch::{Dim, LaunchSpec, ScratchSpec};
pub use registry::{all_problems, find_problem};
pub use shapes::{at_shape, AtShape, Shape, DEFAULT_SHAPE};
pub use spec::{
    Gathered, InputSet, Oracle, OracleOutput, Preset, Problem, ProblemError, Role, RowUpdate,
    Seeds, Sizes, TensorSpec, Work,
};
