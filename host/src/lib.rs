//! The DLRM-Bench runner as a library: backends, candidates, launch plans, verification and
//! timing, metrics and reports. `main.rs` is a thin CLI over it.
pub mod backend;
pub mod candidate;
pub mod ceilings;
pub mod evaluate;
pub mod launch_bounds;
pub mod metrics;
pub mod plan;
pub mod projection;
pub mod ptx;
pub mod record;
pub mod report;
pub mod runner;
pub mod scaffold;
pub mod static_check;
pub mod stats;
pub mod worker;
