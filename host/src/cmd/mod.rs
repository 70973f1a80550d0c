//! The subcommands that are not a layer of their own, one module each, named after the command:
//! `check` ([`check`]), `gen` ([`gen`]), `list` ([`list`]), `new-problem` ([`new_problem`]),
//! `prompt` ([`prompt`]) and `stats` ([`stats`]). `run`, `kernelbench`, `report` and
//! `project` are the runner, the results and the reports (`runner`, `results`, `report*`,
//! `projection`).
pub mod arg_bounds;
pub mod check;
pub mod gen;
pub mod list;
pub mod merge;
pub mod new_problem;
pub mod prompt;
pub mod stats;
