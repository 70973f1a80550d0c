//! What a worker is doing, for the orchestrator and the records: the phase it is in
//! (generating inputs, checking, timing, ...) with the seconds each phase took, and when a
//! candidate's own device work runs. The time limit counts only that device work
//! ([`crate::runner`]), so the harness's own work (inputs, oracles, copies and checks of a
//! 4 GiB table) never makes a correct candidate a `timeout`.
//!
//! A worker installs an [`Observer`] once ([`set_observer`]); without one (tests, the emulator
//! in-process) reports go nowhere.
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::Instant;

/// One report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activity {
    /// A phase of the harness begins (shown in the progress bar).
    Phase(Phase),
    /// One execution of the candidate's launch plan is queued; it ends at the next
    /// [`Activity::CandidateDone`].
    CandidateRunning,
    /// That execution finished (the device synchronised).
    CandidateDone,
}

/// The phases of a problem's evaluation, in the order they come.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Reading input sets (and their oracles) from the run's input cache.
    Read,
    /// Drawing the input sets on the host.
    Generate,
    /// The f64 / exact oracle of every set.
    Oracle,
    /// Waiting for the writes of new input sets to the run's input cache (on a thread of
    /// their own, overlapping the other preparation phases: only the wait is counted), or for
    /// a unit's sets made ahead (`runner::ahead`).
    Store,
    /// Copies to the device, input fingerprints, output buffers.
    Upload,
    /// Loading or compiling a module and binding its plan.
    Load,
    /// Poisoned runs on every set and their checks.
    Check,
    /// Timed runs.
    Time,
    /// The check after every timed run of a candidate (outside the timed regions, counted
    /// apart from [`Phase::Time`]).
    TimedCheck,
    /// Checks of what the timed runs left.
    Recheck,
    /// PyTorch eager timed on the run's input files (`run --torch`).
    Peer,
    /// Waiting for a KernelBench answer's `load_inline` build (made ahead, beside the
    /// measurements: only the wait is counted).
    AnswerBuild,
    /// Starting the KernelBench answers' evaluator (torch imported once per server).
    EvaluatorStart,
    /// A KernelBench answer under the suite's protocol: its process, CUDA, the sets, the
    /// oracles and the answer's import (its checks and timing are the next two).
    AnswerOurs,
    /// The suite's checks of a KernelBench answer: every check set, and the recheck.
    AnswerOursCheck,
    /// The suite's paired timing of a KernelBench answer and eager (each timed call checked).
    AnswerOursTime,
    /// A KernelBench answer under KernelBench's own protocol: its process, CUDA, the set and
    /// the answer's import.
    AnswerKernelBench,
    /// KernelBench's correctness trials.
    AnswerKernelBenchCheck,
    /// KernelBench's timing (means of the answer's and the Model's runs).
    AnswerKernelBenchTime,
    /// Worker processes outside what they report: starting (exec, the CUDA context) and
    /// ending (freeing the device and the host's sets), and the wait on one that hangs until
    /// its limit; measured by the orchestrator around each worker.
    Worker,
}

impl Phase {
    /// A few words for the progress bar.
    pub fn describe(self) -> &'static str {
        match self {
            Phase::Read => "reading cached inputs",
            Phase::Generate => "generating inputs",
            Phase::Oracle => "computing the oracle",
            Phase::Store => "caching inputs",
            Phase::Upload => "uploading inputs",
            Phase::Load => "loading",
            Phase::Check => "checking",
            Phase::Time => "timing",
            Phase::TimedCheck => "checking timed runs",
            Phase::Recheck => "rechecking timed outputs",
            Phase::Peer => "timing PyTorch eager",
            Phase::AnswerBuild => "answers: waiting for their builds",
            Phase::EvaluatorStart => "starting the answers' evaluator",
            Phase::AnswerOurs => "answers: our protocol's start",
            Phase::AnswerOursCheck => "answers: our protocol's checks",
            Phase::AnswerOursTime => "answers: our protocol's timing",
            Phase::AnswerKernelBench => "answers: KernelBench's protocol's start",
            Phase::AnswerKernelBenchCheck => "answers: KernelBench's trials",
            Phase::AnswerKernelBenchTime => "answers: KernelBench's timing",
            Phase::Worker => "starting and ending workers",
        }
    }
}

/// Where reports go.
pub(crate) type Observer = fn(Activity);

static OBSERVER: OnceLock<Observer> = OnceLock::new();

/// Sends reports of this process to `observer` (once; later calls are ignored).
pub(crate) fn set_observer(observer: Observer) {
    let _ = OBSERVER.set(observer);
}

/// Reports `activity` to the observer, if there is one.
pub fn report(activity: Activity) {
    if let Some(observe) = OBSERVER.get() {
        observe(activity);
    }
}

/// Reports the candidate's device work running until the guard drops; `watched` false (the
/// reference's runs) reports nothing.
pub(crate) struct CandidateRun(bool);

impl CandidateRun {
    pub fn start(watched: bool) -> Self {
        if watched {
            report(Activity::CandidateRunning);
        }
        CandidateRun(watched)
    }
}

impl Drop for CandidateRun {
    fn drop(&mut self) {
        if self.0 {
            report(Activity::CandidateDone);
        }
    }
}

/// Seconds spent in each phase.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseTimes(pub BTreeMap<Phase, f64>);

impl PhaseTimes {
    /// Runs `f` as phase `phase`: reported when it begins, its seconds added.
    pub fn time<T>(&mut self, phase: Phase, f: impl FnOnce() -> T) -> T {
        report(Activity::Phase(phase));
        let started = Instant::now();
        let out = f();
        *self.0.entry(phase).or_default() += started.elapsed().as_secs_f64();
        out
    }

    /// Moves `seconds` of phase `from` to phase `to` (a part of `from` that is counted apart).
    pub(crate) fn move_seconds(&mut self, from: Phase, to: Phase, seconds: f64) {
        if seconds > 0.0 {
            *self.0.entry(from).or_default() -= seconds;
            *self.0.entry(to).or_default() += seconds;
        }
    }

    /// Whether no phase took any time yet.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds `other`'s seconds, phase by phase.
    pub fn add(&mut self, other: &PhaseTimes) {
        for (&p, &s) in &other.0 {
            *self.0.entry(p).or_default() += s;
        }
    }

    /// All phases together.
    pub(crate) fn total(&self) -> f64 {
        self.0.values().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_add_up_and_serialise_by_name() {
        let mut a = PhaseTimes::default();
        let v = a.time(Phase::Check, || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            7
        });
        assert_eq!(v, 7);
        a.time(Phase::Check, || ());
        let mut b = PhaseTimes::default();
        b.0.insert(Phase::Time, 1.5);
        b.add(&a);
        assert!(b.0[&Phase::Check] >= 0.02 && (b.total() - 1.5 - b.0[&Phase::Check]).abs() < 1e-12);
        let json = serde_json::to_string(&b).unwrap();
        assert!(
            json.contains("\"check\":") && json.contains("\"time\":1.5"),
            "{json}"
        );
        // serde_json reads floats back to within an ulp, not always bit for bit.
        let back: PhaseTimes = serde_json::from_str(&json).unwrap();
        assert_eq!(
            back.0.keys().collect::<Vec<_>>(),
            b.0.keys().collect::<Vec<_>>()
        );
        for (p, s) in &b.0 {
            assert!((back.0[p] - s).abs() <= 1e-12 * s.abs(), "{p:?}");
        }
    }
}
