//! `dlrm-bench run`: the orchestrator. It picks the device, measures the ceilings, loads the
//! candidates, and for each problem starts a worker process ([`crate::runner::worker`]) that checks and
//! times the candidates. A candidate that crashes the worker is recorded as `runtime_error`, one
//! that exceeds the time limit as `timeout` (the worker is killed); a fresh worker then takes
//! the candidates left. Records are appended to `results.jsonl` as they arrive, so
//! `--resume DIR` finishes an interrupted run without redoing what is there. With `--torch`,
//! PyTorch eager is timed beside each reference by the run's one peer server ([`crate::runner::peer`]).
//! With `--shard i/n` it runs only its block of the items ([`crate::runner::shard`]); with `--devices`
//! each problem's candidates are split over the devices, a worker per device at a time
//! (`runner/units.rs`).
use crate::backend::DeviceInfo;
use crate::candidate::{discover_all, Candidate};
use crate::results::record::{Ceilings, Record, GIT_COMMIT};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Instant;

pub mod activity;
mod interrupt;
mod options;
pub mod peer;
pub mod shard;
mod unit;
mod units;
pub mod worker;
pub mod worker_exit;
pub use options::*;
mod prepare;
use prepare::{initial_meta, measure_run_ceilings, prepare};
mod execute;
use execute::execute;
mod finish;
pub use finish::*;
mod ahead;
mod answers;
mod prebuild;
mod session;
mod shapes;
mod spawn;

const EMULATOR_BANNER: &str = "\
################################################################################
#  NO GPU: running on the CPU emulator at `ci` size.                           #
#  Correctness checks are real; TIMINGS ARE NOT GPU TIMINGS and the speedups   #
#  below say nothing about GPU performance. CUDA C++/PTX candidates are        #
#  skipped (they need a GPU); Rust candidates from gpu-kernels run.            #
################################################################################";

/// Seconds a worker may spend generating inputs and checking the reference.
const PREPARE_TIMEOUT_S: f64 = 900.0;
/// Seconds the harness may go without any report while it evaluates a candidate (a stall of
/// the harness, never charged to the candidate as a `timeout`).
const HARNESS_STALL_S: f64 = 900.0;
/// An execution of a candidate's plan may take at most this many times the reference's median…
const REFERENCE_MULTIPLE: f64 = 1000.0;
/// …but is never cut before this many seconds.
const MIN_EXECUTION_LIMIT_S: f64 = 10.0;

/// Seconds one execution of a candidate's plan may run: `timeout_s`, and at most
/// [`REFERENCE_MULTIPLE`] times the reference's median (`reference_ms`, when known), never under
/// [`MIN_EXECUTION_LIMIT_S`] (unless `timeout_s` itself is lower).
pub(crate) fn execution_limit_s(timeout_s: f64, reference_ms: Option<f64>) -> f64 {
    match reference_ms {
        Some(ms) if ms > 0.0 => {
            timeout_s.min((REFERENCE_MULTIPLE * ms / 1e3).max(MIN_EXECUTION_LIMIT_S))
        }
        _ => timeout_s,
    }
}

/// Where a run's input cache goes by default: memory-backed `/dev/shm/dlrm-bench/<run-id>-<pid>`
/// when `/dev/shm` is a writable directory (sets are gigabytes at `full`), else the run
/// directory's `inputs/`. The process id keeps two runs started in the same second (tests)
/// apart; a resumed run makes its inputs again.
pub(crate) fn default_input_cache(run_dir: &Path, run_id: &str) -> PathBuf {
    let shm = Path::new("/dev/shm");
    let writable = shm.is_dir()
        && std::fs::metadata(shm).is_ok_and(|m| !m.permissions().readonly())
        && std::fs::create_dir_all(shm.join("dlrm-bench")).is_ok();
    if writable {
        shm.join("dlrm-bench")
            .join(format!("{run_id}-{}", std::process::id()))
    } else {
        run_dir.join("inputs")
    }
}

/// Runs the suite (or finishes the run in `resume`): [`prepare`]s it, measures the device's
/// ceilings and writes `run.json`, [`execute`]s every problem's unit, and [`finish`]es with the
/// metrics, `run.json` complete, the reports and the phase table.
pub fn run(opts: RunOptions, resume: Option<&Path>) -> anyhow::Result<RunOutcome> {
    let (p, log) = prepare(opts, resume)?;
    // Cut short, the run keeps its records, removes its input cache and says how to resume.
    interrupt::watch(
        p.dir.clone(),
        (!p.opts.keep_inputs).then(|| p.cache_root.clone()),
    );
    let exe = std::env::current_exe()?;
    // Wall seconds outside the problems' workers (ceilings, the torch probe) and of each
    // problem's session, so run.json accounts for the whole wall time.
    let mut setup = serde_json::Map::new();
    let clock = Instant::now();
    let ceilings = measure_run_ceilings(&p, &exe)?;
    setup.insert("ceilings".into(), json!(clock.elapsed().as_secs_f64()));
    let mut meta = initial_meta(&p, ceilings)?;
    meta.write(&p.dir)?;
    let executed = execute(&p, log, &exe, ceilings, &mut meta, &mut setup)?;
    finish(p, meta, setup, ceilings, executed)
}

/// What [`execute`] leaves for [`finish`].
struct Executed {
    /// Every record of `results.jsonl` (a resumed run's earlier ones first), in file order.
    pub(super) records: Vec<Record>,
    pub(super) fresh: usize,
    pub(super) touched: usize,
    pub(super) sessions: serde_json::Map<String, serde_json::Value>,
    pub(super) in_sessions: f64,
}

fn heading(run_id: &str, info: &DeviceInfo, on_gpu: bool, c: Option<Ceilings>) -> String {
    let mut s = format!(
        "# DLRM-Bench run {run_id}\n\ndevice: {} ({}), driver: {}, commit: {GIT_COMMIT}",
        info.name,
        info.kind,
        info.driver.clone().unwrap_or_else(|| "-".into())
    );
    if let Some(c) = c {
        s += &format!(
            "\nceilings: HBM copy {:.0} GB/s, L2 read {:.0} GB/s, fp32 {:.1} TFLOP/s",
            c.hbm_bytes_per_s / 1e9,
            c.l2_bytes_per_s / 1e9,
            c.fp32_flops_per_s / 1e12
        );
    }
    if !on_gpu {
        s += "\n\n**CPU emulator: correctness is real, timings are NOT GPU timings.**";
    }
    s
}

/// Loads every candidate under the roots; invalid manifests are returned separately.
pub fn load_all(roots: &[PathBuf]) -> (Vec<Candidate>, Vec<crate::candidate::CandidateError>) {
    let mut ok = Vec::new();
    let mut bad = Vec::new();
    for (_, loaded) in crate::candidate::set::load_unique(&discover_all(roots)) {
        match loaded {
            Ok(c) => ok.push(c),
            Err(e) => bad.push(e),
        }
    }
    (ok, bad)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::record::{Record, Status};
    use std::process::ExitCode;

    fn rec(problem: &str, group: &str, status: Status, message: &str) -> Record {
        let mut r = Record::new(problem, "x", group, "origin");
        r.status = status;
        r.message = message.into();
        r
    }

    #[test]
    fn only_a_failed_reference_fails_the_run() {
        let passed = [
            rec("embedding_bag_sum", "reference", Status::Correct, ""),
            rec("embedding_bag_sum", "examples", Status::Incorrect, "wrong"),
            rec("kjt_permute", "examples", Status::Timeout, "hung"),
            rec("-", "invalid", Status::InvalidManifest, "bad toml"),
        ];
        assert!(reference_failures(&passed).is_empty());
        assert_eq!(exit_code(&passed), ExitCode::SUCCESS);
        let mut failed = passed.to_vec();
        failed.push(rec(
            "kjt_permute",
            "reference",
            Status::RuntimeError,
            "the worker failed while preparing the inputs and the reference:\nError: ...",
        ));
        failed.push(rec("fm_interaction", "reference", Status::Skipped, ""));
        assert_eq!(
            reference_failures(&failed),
            [
                "error: the reference of `kjt_permute` failed its own check (runtime_error): \
                 the worker failed while preparing the inputs and the reference:",
                "error: the reference of `fm_interaction` failed its own check (skipped): ",
            ]
        );
        assert_eq!(exit_code(&failed), ExitCode::FAILURE);
    }
}

#[cfg(test)]
mod limit_tests {
    use super::*;
    use crate::results::derived::phase_table;
    use crate::results::record::Record;

    #[test]
    fn the_phase_table_sums_phases_per_problem_and_in_all() {
        use crate::runner::activity::{Phase, PhaseTimes};
        let mut a = Record::new("p", "reference", "reference", "reference");
        a.phases = Some(PhaseTimes(
            [(Phase::Generate, 2.0), (Phase::Check, 1.0)].into(),
        ));
        let mut b = Record::new("p", "c", "examples", "c");
        b.phases = Some(PhaseTimes([(Phase::Check, 0.5)].into()));
        let t = phase_table(&[a, b, Record::new("q", "c", "g", "o")]);
        assert_eq!(t["problems"]["p"]["check"], 1.5);
        assert_eq!(t["all"]["generate"], 2.0);
        assert_eq!(t["all_s"], 3.5);
        assert!(t["problems"].get("q").is_none());
    }

    #[test]
    fn the_execution_limit_is_the_timeout_capped_by_a_multiple_of_the_reference() {
        assert_eq!(execution_limit_s(180.0, None), 180.0);
        // 1.8 ms reference: 1000× is 1.8 s, raised to the 10 s floor.
        assert_eq!(execution_limit_s(180.0, Some(1.8)), 10.0);
        // 50 ms: 50 s, under the timeout.
        assert_eq!(execution_limit_s(180.0, Some(50.0)), 50.0);
        // A timeout below the floor stands.
        assert_eq!(execution_limit_s(3.0, Some(1.8)), 3.0);
        assert_eq!(execution_limit_s(180.0, Some(0.0)), 180.0);
    }
}
