//! The DLRM-Bench runner as a library: backends, candidates, launch plans, verification and
//! timing, metrics and reports, and the work of every subcommand. `main.rs` is a thin CLI over
//! it: it parses the arguments and calls one function here.
pub mod activity;
pub mod arg_bounds;
pub mod backend;
pub mod candidate;
pub mod candidate_set;
pub mod ceilings;
pub mod cmd;
pub mod cuda_include;
pub mod evaluate;
pub mod kernelbench;
pub mod launch_bounds;
pub mod launch_limits;
pub mod limited;
pub mod manifest;
#[cfg(test)]
mod manifest_properties;
pub mod merge;
pub mod metrics;
pub mod nvrtc_flags;
pub mod peer;
pub mod plan;
pub mod projection;
pub mod ptx;
pub mod ptxas;
pub mod record;
pub mod report;
pub mod report_html;
pub mod report_plots;
pub mod results;
pub mod run_dir;
pub mod runner;
pub mod shard;
pub mod timing_stats;
pub mod worker;
pub mod worker_exit;

use bench_problems::Preset;

/// The value parser of `--preset` options.
pub fn parse_preset(s: &str) -> Result<Preset, String> {
    Preset::parse(s).ok_or_else(|| format!("unknown preset `{s}` (ci, small, full)"))
}
