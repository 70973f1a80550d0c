//! One problem's session: its reference and candidates evaluated by workers one attempt at a time, watched for stalls and time limits, each attempt ending in exactly one record.
use super::options::RunOptions;
use super::spawn::base_spec;
use super::spawn::spawn_worker;
use super::spawn::Worker;

use super::{execution_limit_s, HARNESS_STALL_S, PREPARE_TIMEOUT_S};
use crate::candidate::Candidate;
use crate::evaluate::InputCache;
use crate::results::record::Ceilings;
use crate::results::record::Record;
use crate::results::record::RecordLog;
use crate::results::record::Status;
use crate::runner::activity::{Phase, PhaseTimes};
use crate::runner::peer::attach_peer;
use crate::runner::peer::load_peers;
use crate::runner::peer::peer_files;
use crate::runner::peer::run_peer;
use crate::runner::peer::PeerMedian;
use crate::runner::peer::PeerServer;
use crate::runner::worker::Event;
use crate::runner::worker::WorkerSpec;
use crate::runner::worker_exit::death_message;
use bench_problems::Problem;
use indicatif::ProgressBar;
use std::path::Path;
use std::path::PathBuf;
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Mutex;
use std::time::Duration;
use std::time::Instant;

/// What a worker was doing when its time ran out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stall {
    /// One execution of the candidate's plan on the device.
    Execution,
    /// The harness, between executions.
    Harness,
    /// Preparing the inputs and the reference.
    Prepare,
}

/// The evaluation of one problem's candidates across as many workers as faults require.
pub(crate) struct ProblemSession<'a> {
    pub(super) problem: &'static dyn Problem,
    pub(super) opts: &'a RunOptions,
    pub(super) exe: &'a Path,
    pub(super) secret_seed: u64,
    pub(super) ceilings: Option<Ceilings>,
    pub(super) peers: &'a mut Vec<PeerMedian>,
    pub(super) log: &'a Mutex<RecordLog>,
    pub(super) bar: &'a ProgressBar,
    pub(super) reference_done: bool,
    /// Log the reference's record (the problem's first chunk); other chunks measure it on
    /// their device only to pair their candidates with.
    pub(super) keeps_reference: bool,
    /// The device the session's workers run on (and its records say).
    pub(super) device: usize,
    /// The reference's median time, once known (it bounds a candidate's execution time).
    pub(super) reference_ms: Option<f64>,
    /// The run's input cache (its root directory).
    pub(super) input_cache: PathBuf,
    /// The run's PTX cache ([`crate::runner::prebuild`]).
    pub(super) ptx_cache: PathBuf,
    /// What a Triton compile must not see ([`WorkerSpec::sandbox_hide`]).
    pub(super) sandbox_hide: &'a [PathBuf],
    /// Phases of work done for the problem but not yet in a record (a worker's preparation):
    /// added to the next record logged.
    pub(super) carried: PhaseTimes,
    /// Seconds of the phases the session's workers and peer reported so far: what a worker's
    /// lifetime leaves beyond them is [`Phase::Worker`].
    pub(super) accounted_s: f64,
    /// PyTorch's peer, to run once the first worker has stored the inputs (`run --torch`).
    pub(super) peer: Option<PeerJob<'a>>,
}

/// The run's PyTorch peer server, where it reads the problem's inputs and writes its record.
pub(crate) struct PeerJob<'a> {
    pub(super) server: &'a mut PeerServer,
    pub(super) cache: InputCache,
    pub(super) file: PathBuf,
}

impl ProblemSession<'_> {
    fn record(&mut self, mut r: Record, out: &mut Vec<Record>) -> anyhow::Result<()> {
        if !self.carried.is_empty() {
            r.phases
                .get_or_insert_with(PhaseTimes::default)
                .add(&std::mem::take(&mut self.carried));
        }
        r.device = Some(self.device);
        r.shape = self.problem.shape_name().map(str::to_string);
        if r.is_reference() {
            attach_peer(&mut r, self.peers);
            self.reference_done = true;
            self.reference_ms = r.timing.as_ref().map(|t| t.median_ms);
            if !self.keeps_reference {
                // Its worker's preparation goes with the next record logged.
                if let Some(p) = r.phases.take() {
                    self.carried.add(&p);
                }
                return Ok(());
            }
        }
        append(self.log, &r)?;
        self.bar.inc(1);
        out.push(r);
        Ok(())
    }

    /// Records `origin` (the reference, or a candidate — `cand` when it was pending) as ended
    /// with `status` without a record from the worker.
    fn fail(
        &mut self,
        origin: &str,
        cand: Option<&Candidate>,
        status: Status,
        message: String,
        out: &mut Vec<Record>,
    ) -> anyhow::Result<()> {
        let group = if origin == "reference" {
            "reference".to_string()
        } else {
            crate::candidate::candidate_group(Path::new(origin), self.problem.name())
        };
        let name = Path::new(origin)
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let name = if origin == "reference" {
            "reference".to_string()
        } else {
            name
        };
        let mut r = Record::new(self.problem.name(), &name, &group, origin);
        r.status = status;
        r.message = message;
        if let Some(c) = cand {
            // The candidate's name and expected status, from its manifest.
            r.candidate = c.name.clone();
            r.expected_status = c.expect.clone();
        }
        self.record(r, out)
    }

    /// Evaluates `pending` (candidate directories), restarting workers after faults.
    pub(crate) fn evaluate(&mut self, pending: &mut Vec<Candidate>) -> anyhow::Result<Vec<Record>> {
        let mut out = Vec::new();
        if self.reference_done && pending.is_empty() {
            return Ok(out);
        }
        loop {
            let progress_before = pending.len();
            let attempt = self.attempt(pending, &mut out)?;
            if self.conclude(attempt, pending, progress_before, &mut out)? {
                return Ok(out);
            }
        }
    }

    /// One worker on `pending`: spawned, its events followed until it ends, stops reporting
    /// within its limit (then killed), or its channel closes.
    fn attempt(
        &mut self,
        pending: &mut Vec<Candidate>,
        out: &mut Vec<Record>,
    ) -> anyhow::Result<Attempt> {
        self.bar.set_message(format!(
            "{}: generating inputs and checking the reference",
            self.problem.name()
        ));
        let spec = WorkerSpec {
            problem: self.problem.name().to_string(),
            shape: self.problem.shape_name().map(str::to_string),
            candidates: pending.clone(),
            report_reference: !self.reference_done,
            ceilings: self.ceilings,
            input_cache: Some(self.input_cache.clone()),
            ptx_cache: Some(self.ptx_cache.clone()),
            sandbox_hide: self.sandbox_hide.to_vec(),
            wait_after_prepare: self.peer.is_some(),
            device: self.device,
            ..base_spec(self.opts, self.secret_seed)
        };
        let spawned = Instant::now();
        let accounted_before = self.accounted_s;
        let mut worker = spawn_worker(self.exe, &spec)?;
        let mut w = Watch {
            current: None,
            phase: None,
            ready: false,
            reference_failed: false,
            device_lost: None,
            started: Instant::now(),
            running: None,
            unreadable: Vec::new(),
        };
        let outcome = loop {
            // While a candidate is current, the limit counts only its own device work (from
            // `Running` to `Done`); between executions the harness may take its time, and only a
            // silence of HARNESS_STALL_S is cut (and not charged to the candidate).
            let (limit, since, stall) = match (&w.current, w.running) {
                (Some(_), Some(t)) => (
                    execution_limit_s(self.opts.timeout_s, self.reference_ms),
                    t,
                    Stall::Execution,
                ),
                (Some((_, t)), None) => (HARNESS_STALL_S, *t, Stall::Harness),
                (None, _) => (
                    PREPARE_TIMEOUT_S.max(self.opts.timeout_s),
                    w.started,
                    Stall::Prepare,
                ),
            };
            let left = Duration::from_secs_f64(limit).saturating_sub(since.elapsed());
            let event = worker
                .events
                .recv_timeout(left.max(Duration::from_millis(1)));
            // Progress is a readable event: a worker printing garbage is still stalled.
            let readable = matches!(&event, Ok(Some(e)) if !matches!(e, Event::Unreadable { .. }));
            if let (true, Some((_, last))) = (readable, w.current.as_mut()) {
                *last = Instant::now();
            }
            match event {
                Ok(Some(event)) => self.on_event(event, &mut w, &mut worker, pending, out)?,
                Ok(None) => break None,
                Err(RecvTimeoutError::Timeout) => {
                    worker.kill();
                    break Some((limit, stall));
                }
                Err(RecvTimeoutError::Disconnected) => break None,
            }
        };
        let status = worker.child.wait().ok();
        // The worker's life beyond what it (and the peer) reported: its start and end, a hang.
        let unreported = spawned.elapsed().as_secs_f64() - (self.accounted_s - accounted_before);
        if unreported > 0.0 {
            self.carried
                .add(&PhaseTimes([(Phase::Worker, unreported)].into()));
            self.accounted_s += unreported;
        }
        Ok(Attempt {
            outcome,
            status,
            tail: worker.stderr_tail(),
            watch: w,
        })
    }

    /// What one event of the worker changes.
    fn on_event(
        &mut self,
        event: Event,
        w: &mut Watch,
        worker: &mut Worker,
        pending: &mut Vec<Candidate>,
        out: &mut Vec<Record>,
    ) -> anyhow::Result<()> {
        match event {
            Event::Record { record } => {
                let record = *record;
                // Only what this worker was given, each once: the reference (when asked for)
                // and the candidates still pending.
                let expected = if record.is_reference() {
                    !self.reference_done && record.origin == "reference"
                } else {
                    pending.iter().any(|c| c.origin == record.origin)
                };
                if !expected {
                    eprintln!(
                        "warning: {}: the worker reported a record of `{}`, which it was not given (or gave already): ignored",
                        self.problem.name(),
                        record.origin
                    );
                    return Ok(());
                }
                if record.is_reference() && record.status != Status::Correct {
                    w.reference_failed = true;
                }
                pending.retain(|c| c.origin != record.origin);
                w.current = None;
                w.running = None;
                w.phase = None;
                self.accounted_s += record.phases.as_ref().map_or(0.0, PhaseTimes::total);
                self.record(record, out)?;
            }
            Event::Start { candidate } => {
                self.bar
                    .set_message(format!("{}: {candidate}", self.problem.name()));
                w.current = Some((candidate, Instant::now()));
                w.phase = None;
            }
            Event::Phase { phase: p } => {
                let what = w.current.as_ref().map_or("reference", |(c, _)| c.as_str());
                self.bar
                    .set_message(format!("{}: {what}: {}", self.problem.name(), p.describe()));
                w.phase = Some(p.describe().to_string());
            }
            Event::Running => w.running = Some(Instant::now()),
            Event::Done => w.running = None,
            Event::Ready => w.ready = true,
            Event::Prepared { phases } => {
                self.accounted_s += phases.total();
                self.carried.add(&phases);
                if let Some(job) = self.peer.take() {
                    self.bar
                        .set_message(format!("{}: PyTorch eager", self.problem.name()));
                    let opts = self.opts;
                    let peer = run_peer(
                        job.server,
                        &opts.eval,
                        self.problem,
                        &job.cache,
                        &job.file,
                        opts.torch_compile,
                    );
                    self.accounted_s += peer.total();
                    self.carried.add(&peer);
                    *self.peers = load_peers(&peer_files(&opts.peer, &job.file));
                    w.started = Instant::now();
                }
                worker.go();
            }
            Event::DeviceLost { message } => w.device_lost = Some(message),
            Event::Ceilings { .. } => {}
            Event::Unreadable { excerpt, error } => {
                if w.unreadable.len() < 3 {
                    w.unreadable.push(format!("{error}: {excerpt}"));
                }
            }
        }
        Ok(())
    }

    /// Records what `attempt` left undone (a candidate that hung or killed its worker, a failed
    /// preparation, candidates a failed reference or a stopped worker leaves); true when
    /// nothing more is to be tried.
    fn conclude(
        &mut self,
        attempt: Attempt,
        pending: &mut Vec<Candidate>,
        progress_before: usize,
        out: &mut Vec<Record>,
    ) -> anyhow::Result<bool> {
        let Attempt {
            outcome,
            status,
            tail,
            watch: w,
        } = attempt;
        let (current, phase, ready) = (w.current, w.phase, w.ready);
        let (reference_failed, device_lost) = (w.reference_failed, w.device_lost);
        let unreadable = unreadable_note(&w.unreadable);
        match (outcome, current) {
            (Some((limit, Stall::Execution)), Some((cand, _))) => {
                let c = take_pending(pending, &cand);
                let msg = format!(
                    "one execution of its launch plan ran past {limit:.0} s on the device: the \
                 worker was killed (a hang or an endless kernel; the limit counts only the \
                 candidate's own device work)"
                );
                self.fail(&cand, c.as_ref(), Status::Timeout, msg, out)?;
            }
            (Some((limit, _)), Some((cand, _))) => {
                let c = take_pending(pending, &cand);
                let msg = format!(
                    "the harness made no progress for {limit:.0} s while evaluating this \
                 candidate (outside its device work): the worker was killed{unreadable}"
                );
                self.fail(&cand, c.as_ref(), Status::RuntimeError, msg, out)?;
            }
            (None, Some((cand, _))) => {
                let c = take_pending(pending, &cand);
                let what = format!("candidate {cand} of {}", self.problem.name());
                let msg = death_message(&what, phase.as_deref(), status, &tail) + &unreadable;
                self.fail(&cand, c.as_ref(), Status::RuntimeError, msg, out)?;
            }
            (outcome, None) if !ready => {
                // Preparation (inputs, oracle, reference) failed or hung: nothing can be compared.
                let why = match outcome {
                    Some((limit, _)) => {
                        format!("preparing the inputs and the reference took over {limit:.0} s")
                    }
                    None => format!(
                        "the worker failed while preparing the inputs and the reference: {}",
                        death_message(
                            &format!("the reference of {}", self.problem.name()),
                            phase.as_deref(),
                            status,
                            &tail
                        )
                    ),
                };
                if !self.reference_done {
                    self.fail("reference", None, Status::RuntimeError, why.clone(), out)?;
                }
                for c in std::mem::take(pending) {
                    self.fail(
                        &c.origin,
                        Some(&c),
                        Status::Skipped,
                        format!("not run: {why}"),
                        out,
                    )?;
                }
                return Ok(true);
            }
            _ => {}
        }
        if ready && !self.reference_done {
            // The worker reports the reference before `Ready`: its record came and was lost.
            let msg = format!(
                "the worker checked the reference but its record did not reach the runner{unreadable}"
            );
            self.fail("reference", None, Status::RuntimeError, msg, out)?;
        }
        if reference_failed {
            for c in std::mem::take(pending) {
                let msg = "not run: the reference failed its own check on this device".to_string();
                self.fail(&c.origin, Some(&c), Status::Skipped, msg, out)?;
            }
        }
        if pending.is_empty() {
            return Ok(true);
        }
        if let Some(m) = device_lost {
            eprintln!(
                "device lost ({m}); starting a fresh worker for the {} candidates left",
                pending.len()
            );
        }
        if pending.len() == progress_before {
            // No progress and no candidate to blame: do not loop forever.
            for c in std::mem::take(pending) {
                let msg =
                    format!("not run: the worker stopped without a result{unreadable}:\n{tail}");
                self.fail(&c.origin, Some(&c), Status::RuntimeError, msg, out)?;
            }
            return Ok(true);
        }
        Ok(false)
    }
}

/// The worker's event lines that did not parse, for a message: empty when there were none.
fn unreadable_note(lines: &[String]) -> String {
    if lines.is_empty() {
        return String::new();
    }
    format!(
        " (its event line{} could not be read: {})",
        if lines.len() > 1 { "s" } else { "" },
        lines.join("; ")
    )
}

/// What the runner follows of a worker while it runs.
struct Watch {
    /// The candidate being evaluated and when the worker last reported on it.
    pub(super) current: Option<(String, Instant)>,
    /// The harness's last phase (for the message of a worker that dies).
    pub(super) phase: Option<String>,
    pub(super) ready: bool,
    pub(super) reference_failed: bool,
    pub(super) device_lost: Option<String>,
    pub(super) started: Instant,
    /// Since when the current candidate's own device work runs.
    pub(super) running: Option<Instant>,
    /// The first event lines that did not parse (the parser's error and the line's start).
    pub(super) unreadable: Vec<String>,
}

/// How one worker ended: killed at a limit (`outcome`), or not; its exit status and stderr.
struct Attempt {
    pub(super) outcome: Option<(f64, Stall)>,
    pub(super) status: Option<std::process::ExitStatus>,
    pub(super) tail: String,
    pub(super) watch: Watch,
}

/// Appends `r` to the run's record log, which the devices' threads share.
pub(super) fn append(log: &Mutex<RecordLog>, r: &Record) -> std::io::Result<()> {
    log.lock().unwrap_or_else(|e| e.into_inner()).append(r)
}

/// Removes candidate `origin` from `pending`, returning it (`None` when it was not pending).
fn take_pending(pending: &mut Vec<Candidate>, origin: &str) -> Option<Candidate> {
    let at = pending.iter().position(|c| c.origin == origin)?;
    Some(pending.remove(at))
}
