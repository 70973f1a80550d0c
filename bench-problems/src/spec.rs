//! The vocabulary of a problem in one place, for code that wants all of it: re-exports of the
//! leaf modules ([`crate::sizes`], [`crate::signature`], [`crate::input_set`], [`crate::oracle`],
//! [`crate::error`]) and of the [`Problem`] trait. It imports only those modules, and none of
//! them imports it, so problem modules may take their vocabulary from here without a loop.
pub use crate::error::ProblemError;
pub use crate::input_set::{shared_table, InputSet, InputSetBuilder, Seeds};
pub use crate::oracle::{oracle_of, Gathered, Oracle, OracleOutput, RowUpdate, Work};
pub use crate::problem::Problem;
pub use crate::signature::{poisoned, shape_of, Role, TensorSpec};
pub use crate::sizes::{size, size_or_zero, sizes_of, Preset, Sizes};
