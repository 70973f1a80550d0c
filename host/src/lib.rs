//! The DLRM-Bench runner as a library: backends, candidates, launch plans, verification and
//! timing, metrics and reports, and the work of every subcommand. `main.rs` is a thin CLI over
//! it: it parses the arguments and calls one function here.
pub mod backend;
pub mod candidate;
pub mod cmd;
pub mod evaluate;
pub mod kernelbench;
pub mod report;
pub mod results;
pub mod runner;
pub mod sweep;
pub mod toolchain;

use bench_problems::Preset;

/// The value parser of `--preset` options.
pub fn parse_preset(s: &str) -> Result<Preset, String> {
    Preset::parse(s).ok_or_else(|| format!("unknown preset `{s}` (ci, small, full)"))
}
