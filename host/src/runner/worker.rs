//! The worker: one process that evaluates candidates of one problem and reports each record as
//! a JSON line on stdout, so that a crash, an illegal address (which poisons the CUDA context)
//! or a hang takes down only the worker. The orchestrator ([`crate::runner`]) starts workers,
//! enforces the time limit, and starts a fresh worker for the candidates left.
//!
//! Protocol: the spec arrives as one JSON line on stdin (then, with `wait_after_prepare`, a go
//! line once the orchestrator is ready); stdout carries [`Event`] lines, and only them: the worker
//! moves its own descriptor 1 to stderr first, so a kernel's device `printf` cannot forge one.
//!
//! Fault injection for the tests: with [`FAULT_ENV`]`=prepare` in its environment (inherited
//! from `dlrm-bench run`), a worker fails while preparing the inputs, as one whose generator or
//! oracle failed would; the reference is then recorded as `runtime_error`. With `=forge` it
//! first prints, on descriptor 1, the event line a kernel's device `printf` could print (the
//! reference `correct`): the record must still be `runtime_error`. With `=garble` the reference's
//! event line goes out cut in half, as a serialisation bug would send it: the runner must record
//! that the reference's record was lost, not drop it.
use crate::backend;
use crate::candidate::Candidate;
use crate::evaluate::{EvalConfig, InputCache, ProblemRun};
use crate::results::record::{Ceilings, Record, Status};
use crate::runner::activity::{Activity, Phase, PhaseTimes};
use serde::{Deserialize, Serialize};
use std::io::BufRead;
use std::io::Write;
use std::path::PathBuf;

/// What one worker must do.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct WorkerSpec {
    /// Only measure the device ceilings and report them.
    #[serde(default)]
    pub ceilings_only: bool,
    /// Only make the input sets and oracles into the input cache (no device), report
    /// [`Event::Prepared`] and end: a unit prepared ahead ([`crate::evaluate::prepare_ahead`]).
    #[serde(default)]
    pub prepare_only: bool,
    /// With `prepare_only`: at normal priority on every core (nothing is measured meanwhile:
    /// a resumed unit whose answers need sets no worker of it makes).
    #[serde(default)]
    pub prepare_in_foreground: bool,
    pub problem: String,
    /// The problem's shape to evaluate at (`None`: its sizes at the preset, the default shape).
    #[serde(default)]
    pub shape: Option<String>,
    pub eval: EvalConfig,
    /// `EvalConfig::secret_seed` is never serialised with the config; it travels here.
    pub secret_seed: u64,
    /// The candidates to evaluate, as the orchestrator loaded and validated them.
    pub candidates: Vec<Candidate>,
    /// Report the reference's record (the first worker of a problem does).
    pub report_reference: bool,
    /// The backend the run's probe chose: the CPU emulator, or else CUDA device [`Self::device`]
    /// (opened with no fallback to the emulator).
    pub force_cpu: bool,
    /// The CUDA device's ordinal (`run --devices`; the emulator ignores it).
    #[serde(default)]
    pub device: usize,
    pub ceilings: Option<Ceilings>,
    /// The run's input cache (a directory with one subdirectory per problem): sets are read
    /// from it when there, else generated and stored in it.
    #[serde(default)]
    pub input_cache: Option<PathBuf>,
    /// The run's PTX cache ([`crate::toolchain::ptx_cache`]): the worker's environment names
    /// it, so the worker loads a CUDA C++ candidate compiled ahead instead of compiling it.
    #[serde(default)]
    pub ptx_cache: Option<PathBuf>,
    /// What a Triton candidate's compile must not see (the run's input cache and results
    /// directory, a secret-seed file): the worker's environment names them
    /// ([`crate::backend::triton_tool`]).
    #[serde(default)]
    pub sandbox_hide: Vec<PathBuf>,
    /// The run was given `--unsandboxed`: a Triton compile may run under weak isolation.
    #[serde(default)]
    pub unsandboxed: bool,
    /// After [`Event::Prepared`], wait for a line on stdin before going on: meanwhile the
    /// orchestrator times PyTorch on the input files the worker just stored (`run --torch`).
    #[serde(default)]
    pub wait_after_prepare: bool,
}

/// One line of worker output.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub(crate) enum Event {
    /// The worker's input sets are ready (read from the cache, or generated): the seconds of
    /// each phase it took. The orchestrator adds them to the next record it logs.
    Prepared {
        phases: PhaseTimes,
    },
    /// Inputs generated and the reference checked; candidates follow.
    Ready,
    /// Evaluation of a candidate (its directory) begins.
    Start {
        candidate: String,
    },
    Record {
        record: Box<Record>,
    },
    Ceilings {
        ceilings: Ceilings,
    },
    /// A phase of the harness begins (for the progress bar).
    Phase {
        phase: Phase,
    },
    /// One execution of the candidate's launch plan is running on the device: the time limit
    /// counts from here until [`Event::Done`].
    Running,
    /// That execution finished.
    Done,
    /// The device is no longer usable (a sticky CUDA error): the worker stops here.
    DeviceLost {
        message: String,
    },
    /// A line of the worker's event channel that did not parse (never sent by a worker: the
    /// orchestrator's reader makes it): its start and the parser's error, so that a record it
    /// carried is not lost without a word.
    #[serde(skip)]
    Unreadable {
        excerpt: String,
        error: String,
    },
}

/// Where events go: the worker's original stdout, moved off descriptor 1 by
/// [`take_event_channel`] so that nothing else the process prints lands among them.
static EVENTS: std::sync::OnceLock<std::sync::Mutex<std::fs::File>> = std::sync::OnceLock::new();

/// Moves the event channel off descriptor 1 before any device code runs: a kernel's device
/// `printf` (which the driver writes to descriptor 1) could otherwise print a forged event line,
/// a record saying `correct`. The original stdout is duplicated for the events and descriptor 1
/// then points at stderr, where stray output is only a message.
fn take_event_channel() -> anyhow::Result<()> {
    use std::os::fd::FromRawFd;
    // SAFETY: plain descriptor calls; the duplicate is owned by the File from here on. It is
    // close-on-exec, so no helper process the worker starts (Triton's compiler runs a
    // candidate's Python) inherits it.
    let events = unsafe {
        let fd = libc::fcntl(1, libc::F_DUPFD_CLOEXEC, 3);
        anyhow::ensure!(fd >= 0, "dup(stdout): {}", std::io::Error::last_os_error());
        anyhow::ensure!(
            libc::dup2(2, 1) >= 0,
            "dup2(stderr, stdout): {}",
            std::io::Error::last_os_error()
        );
        std::fs::File::from_raw_fd(fd)
    };
    let _ = EVENTS.set(std::sync::Mutex::new(events));
    Ok(())
}

fn emit(event: &Event) {
    let line = serde_json::to_string(event).expect("events serialise");
    match EVENTS.get() {
        Some(events) => {
            let mut out = events.lock().unwrap_or_else(|e| e.into_inner());
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        }
        None => {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        }
    }
}

/// [`emit`] with the line cut in half (the tests' `garble` fault).
fn emit_garbled(event: &Event) {
    let line = serde_json::to_string(event).expect("events serialise");
    let half: String = line.chars().take(line.chars().count() / 2).collect();
    if let Some(events) = EVENTS.get() {
        let mut out = events.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(out, "{half}");
        let _ = out.flush();
    }
}

/// Reports of [`crate::runner::activity`] as events.
fn emit_activity(activity: Activity) {
    emit(&match activity {
        Activity::Phase(phase) => Event::Phase { phase },
        Activity::CandidateRunning => Event::Running,
        Activity::CandidateDone => Event::Done,
    });
}

/// The environment variable of the tests' fault injection (see the module doc).
pub const FAULT_ENV: &str = "DLRM_BENCH_INJECT_FAULT";

/// Exit status of a worker that stopped because its orchestrator is gone.
pub(crate) const EXIT_ORPHANED: i32 = 4;

/// Watches stdin after the spec: each line is a go (sent on the returned channel); its end
/// means the orchestrator is gone (killed, even by `kill -9`), and the worker exits at once
/// rather than compete with a resumed run for the device.
fn watch_parent() -> std::sync::mpsc::Receiver<()> {
    let (go, gone) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        while std::io::stdin()
            .lock()
            .read_line(&mut line)
            .is_ok_and(|n| n > 0)
        {
            let _ = go.send(());
            line.clear();
        }
        // Not eprintln!: with the orchestrator gone stderr is a broken pipe, and eprintln!
        // would panic this thread instead of ending the process.
        let _ = writeln!(
            std::io::stderr(),
            "the orchestrator is gone (stdin closed): the worker stops"
        );
        std::process::exit(EXIT_ORPHANED);
    });
    gone
}

/// Entry point of `dlrm-bench worker`: reads the spec from stdin and runs it.
/// The problem of `spec` at its shape (boxed once per worker process).
fn spec_problem(spec: &WorkerSpec) -> anyhow::Result<&'static dyn bench_problems::Problem> {
    let problem = bench_problems::find_problem(&spec.problem)
        .ok_or_else(|| anyhow::anyhow!("unknown problem {}", spec.problem))?;
    Ok(match &spec.shape {
        Some(shape) => Box::leak(Box::new(bench_problems::at_shape(
            problem,
            spec.eval.preset,
            shape,
        )?)),
        None => problem,
    })
}

/// [`WorkerSpec::prepare_only`]: the sets and oracles into the cache, then `Prepared`.
fn prepare_only(spec: &WorkerSpec) -> anyhow::Result<()> {
    if !spec.prepare_in_foreground {
        // The lowest CPU priority and half the cores, before any thread of the work starts
        // (nice is per thread on Linux, inherited by threads made later): a unit is measured
        // meanwhile.
        // SAFETY: setpriority on this thread, a plain syscall.
        unsafe {
            libc::setpriority(libc::PRIO_PROCESS, 0, 19);
        }
        let half = std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1));
        let _ = rayon::ThreadPoolBuilder::new()
            .num_threads(half)
            .build_global();
    }
    let problem = spec_problem(spec)?;
    let root = spec
        .input_cache
        .as_deref()
        .ok_or_else(|| anyhow::anyhow!("preparing ahead needs an input cache"))?;
    let mut eval = spec.eval.clone();
    eval.secret_seed = spec.secret_seed;
    let phases = crate::evaluate::prepare_ahead(problem, eval, &InputCache::new(root, problem))?;
    emit(&Event::Prepared { phases });
    Ok(())
}

pub fn main() -> anyhow::Result<()> {
    take_event_channel()?;
    crate::runner::activity::set_observer(emit_activity);
    let mut text = String::new();
    std::io::stdin().lock().read_line(&mut text)?;
    let spec: WorkerSpec = serde_json::from_str(&text)?;
    if std::env::var_os(FAULT_ENV).is_some_and(|v| v == "forge") {
        // What a kernel's device printf could print: a record line on descriptor 1.
        let mut forged = Record::new(&spec.problem, "reference", "reference", "reference");
        forged.status = Status::Correct;
        forged.message = "forged".into();
        let line = serde_json::to_string(&Event::Record {
            record: Box::new(forged),
        })?;
        println!("\n{line}");
    }
    let go = watch_parent();
    if spec.prepare_only {
        return prepare_only(&spec);
    }
    let mut backend = backend::open(spec.force_cpu, spec.device)?;
    if spec.ceilings_only {
        let ceilings = crate::backend::ceilings::measure(&mut *backend)
            .map_err(|e| anyhow::anyhow!("measuring the ceilings: {e}"))?;
        emit(&Event::Ceilings { ceilings });
        return Ok(());
    }
    let problem = spec_problem(&spec)?;
    let mut eval = spec.eval.clone();
    eval.secret_seed = spec.secret_seed;
    let cache = spec
        .input_cache
        .as_deref()
        .map(|root| InputCache::new(root, problem));
    if std::env::var_os(FAULT_ENV).is_some_and(|v| v == "prepare" || v == "forge") {
        anyhow::bail!("{FAULT_ENV}: a fault injected while preparing the inputs");
    }
    let mut run = ProblemRun::prepare(&mut *backend, problem, eval, spec.ceilings, cache.as_ref())?;
    emit(&Event::Prepared {
        phases: run.prepare_phases().clone(),
    });
    if spec.wait_after_prepare {
        // Any line is the go (the end of stdin ends the worker instead).
        let _ = go.recv();
    }
    let reference = run.reference_record();
    let reference_ok = reference.status == Status::Correct;
    if spec.report_reference {
        let event = Event::Record {
            record: Box::new(reference),
        };
        if std::env::var_os(FAULT_ENV).is_some_and(|v| v == "garble") {
            emit_garbled(&event);
        } else {
            emit(&event);
        }
    }
    emit(&Event::Ready);
    if !reference_ok {
        return Ok(());
    }
    for cand in &spec.candidates {
        emit(&Event::Start {
            candidate: cand.origin.clone(),
        });
        let record = run.evaluate(cand);
        let failed_at_runtime = record.status == Status::RuntimeError;
        emit(&Event::Record {
            record: Box::new(record),
        });
        if failed_at_runtime {
            if let Err(e) = run.device_health() {
                emit(&Event::DeviceLost {
                    message: e.to_string(),
                });
                std::process::exit(3);
            }
        }
    }
    run.release();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::WorkerSpec;
    use crate::runner::load_all;
    use std::path::Path;

    /// A worker gets every shipped candidate exactly as the orchestrator loaded it: sources,
    /// cubin bytes, Triton specs, plans and expectations survive the spec's JSON unchanged, so
    /// the worker has nothing to read from the candidate's directory.
    #[test]
    fn every_shipped_candidate_reaches_a_worker_unchanged() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../candidates");
        let (candidates, _invalid) = load_all(&[root]);
        assert!(
            candidates.len() > 50,
            "only {} candidates",
            candidates.len()
        );
        let json = serde_json::json!({
            "problem": "embedding_bag_sum",
            "eval": crate::evaluate::EvalConfig::quick_ci(1, 7),
            "secret_seed": 7,
            "candidates": candidates,
            "report_reference": true,
            "force_cpu": true,
            "ceilings": null,
        });
        let spec: WorkerSpec = serde_json::from_value(json).unwrap();
        assert_eq!(spec.candidates, candidates);
        let kinds: std::collections::BTreeSet<&str> = candidates
            .iter()
            .map(|c| match c.source {
                crate::backend::ModuleSource::Builtin => "builtin",
                crate::backend::ModuleSource::Cuda { .. } => "cuda",
                crate::backend::ModuleSource::Ptx { .. } => "ptx",
                crate::backend::ModuleSource::Binary { .. } => "binary",
                crate::backend::ModuleSource::Triton { .. } => "triton",
                crate::backend::ModuleSource::Unavailable { .. } => "unavailable",
            })
            .collect();
        assert!(kinds.len() >= 4, "{kinds:?}");
    }
}
