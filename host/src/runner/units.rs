//! The work of a run as units, one problem's chunk of candidates on one device each
//! ([`plan`]), and their running ([`UnitContext::run_all`]): one after the other on one device,
//! or one thread per device (`run --devices`), each running its units' workers in turn.

use super::ahead::{Ahead, AheadTotals};
use super::options::RunOptions;
use super::session::PeerJob;
use super::session::ProblemSession;
use super::shard;
use super::spawn::base_spec;
use super::worker::WorkerSpec;
use super::PREPARE_TIMEOUT_S;
use crate::candidate::Candidate;
use crate::evaluate::InputCache;
use crate::kernelbench;
use crate::kernelbench::builds::AheadBuilds;
use crate::kernelbench::evaluator::Evaluator;
use crate::results::record::unit_key;
use crate::results::record::Ceilings;
use crate::results::record::Record;
use crate::results::record::RecordLog;
use crate::results::record::Status;
use crate::runner::activity::{Phase, PhaseTimes};
use crate::runner::peer::PeerMedian;
use crate::runner::peer::PeerServer;
use crate::runner::session::append;
use crate::toolchain::sandbox::{Isolation, Sandbox};
use bench_problems::Problem;
use indicatif::ProgressBar;
use serde_json::json;
use std::collections::{BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

/// How many units a unit's answers wait for, while those run their references and native
/// candidates: the answers' builds, made beside everything, get that much more time (the first
/// answer of a KernelBench set waited 55 s for its build when it came right after its
/// reference, on an H100), at the price of keeping those units' inputs meanwhile (only where
/// there is room: [`UnitContext::room_to_lag`]).
const ANSWER_LAG: usize = 2;

/// Adds `took` to `problem`'s seconds in `sessions`.
fn add_secs(
    sessions: &mut serde_json::Map<String, serde_json::Value>,
    problem: &str,
    took: std::time::Duration,
) {
    let before = sessions.get(problem).and_then(|v| v.as_f64());
    sessions.insert(
        problem.into(),
        json!(before.unwrap_or(0.0) + took.as_secs_f64()),
    );
}

/// What a device's run of its units builds up as it goes.
#[derive(Default)]
struct Progress {
    /// The records made so far.
    fresh: Vec<Record>,
    /// Each problem's seconds.
    sessions: serde_json::Map<String, serde_json::Value>,
    /// This device's answers' evaluator, started at its first answer.
    evaluator: Option<Evaluator>,
    /// A unit's last worker ends after its last record: those seconds go with the next
    /// record (the last unit's are not logged).
    leftover: PhaseTimes,
}

/// The candidates of `problem` that ended other than `correct` at another of its shapes (in
/// this run or the attempt it resumes): the problem's verdict on them is made, so they are not
/// run at this shape (a hang would cost its time limit at every shape).
fn failed_at_other_shapes(
    log: &Mutex<RecordLog>,
    problem: &dyn Problem,
    key: &str,
) -> BTreeSet<String> {
    let log = log.lock().unwrap_or_else(|e| e.into_inner());
    log.records()
        .iter()
        .filter(|r| r.problem == problem.name() && r.unit_key() != key && !r.is_reference())
        .filter(|r| r.status != Status::Correct)
        .map(|r| r.origin.clone())
        .collect()
}

/// The units of a run: for each problem the shard touches (`owns` says which items are the
/// shard's), its owned candidates in one chunk per device (each chunk's worker measures the
/// reference on its device; the first chunk's record of it is the one logged, with the problem's
/// KernelBench answers).
pub(super) fn plan<'c>(
    problems: &[&'static dyn Problem],
    candidates: &'c [Candidate],
    answers: &'c [kernelbench::Answer],
    owns: &dyn Fn(&str, &str) -> bool,
    devices: &[usize],
) -> Vec<Unit<'c>> {
    let mut units: Vec<Unit> = Vec::new();
    // The shapes of a problem share its index: each chunk of its candidates goes to one device
    // at every shape, where the shapes run in order (a candidate failed at one is not run at
    // the next, whatever the device count).
    let mut names: Vec<&str> = Vec::new();
    for &problem in problems {
        if !names.contains(&problem.name()) {
            names.push(problem.name());
        }
        let k = names.len() - 1;
        let mine: Vec<&Candidate> = candidates
            .iter()
            .filter(|c| c.problem == problem.name() && owns(&c.problem, &c.origin))
            .collect();
        let my_answers: Vec<&kernelbench::Answer> = answers
            .iter()
            // KernelBench answers run at the default shape only (their own get_inputs'
            // sizes are one shape).
            .filter(|a| a.problem == problem.name() && owns(a.problem, &a.origin()))
            .filter(|_| {
                problem
                    .shape_name()
                    .is_none_or(|s| s == bench_problems::DEFAULT_SHAPE)
            })
            .collect();
        if mine.is_empty() && my_answers.is_empty() && !owns(problem.name(), "reference") {
            continue;
        }
        for (chunk, cands) in shard::chunks(&mine, devices.len()).into_iter().enumerate() {
            units.push(Unit {
                problem,
                device: shard::device_of_chunk(devices, k, chunk),
                keeps_reference: chunk == 0,
                candidates: cands,
                answers: if chunk == 0 {
                    my_answers.clone()
                } else {
                    Vec::new()
                },
            });
        }
    }
    units
}

/// The subdirectory of the input cache for `device` when several devices run at once (each
/// worker writes its own sets).
pub(super) fn device_cache(device: usize) -> String {
    format!("device{device}")
}

/// One problem's share of the work on one device: a chunk of its candidates (and, for the
/// problem's first chunk, the reference's record and the KernelBench answers).
#[derive(Clone)]
pub(super) struct Unit<'c> {
    pub(super) problem: &'static dyn Problem,
    pub(super) device: usize,
    /// Log the reference's record (else it is measured for the pairing only, and dropped).
    pub(super) keeps_reference: bool,
    pub(super) candidates: Vec<&'c Candidate>,
    pub(super) answers: Vec<&'c kernelbench::Answer>,
}

/// What every [`Unit`] of a run shares.
pub(super) struct UnitContext<'a> {
    pub(super) opts: &'a RunOptions,
    pub(super) exe: &'a Path,
    pub(super) secret_seed: u64,
    pub(super) ceilings: Option<Ceilings>,
    pub(super) log: &'a Mutex<RecordLog>,
    pub(super) bar: &'a ProgressBar,
    /// The (problem, origin) of the records a resumed run has already.
    pub(super) done: &'a BTreeSet<(String, String)>,
    pub(super) previous: &'a [Record],
    pub(super) cache_root: &'a Path,
    pub(super) per_device_cache: bool,
    pub(super) dir: &'a Path,
    pub(super) peer_file: &'a Path,
    pub(super) torch: bool,
    /// The KernelBench answers' builds, made ahead.
    pub(super) builds: &'a AheadBuilds,
    /// What a Triton candidate's compile must not see ([`crate::runner::worker::WorkerSpec`]).
    pub(super) sandbox_hide: &'a [PathBuf],
    /// Make each next unit's inputs while a unit is measured ([`super::ahead`]).
    pub(super) prepare_ahead: bool,
    pub(super) ahead_totals: &'a Mutex<AheadTotals>,
}

impl UnitContext<'_> {
    /// Runs `units` on their devices (a thread per device when there are several) and returns
    /// their new records and the seconds spent in sessions (the longest device's sum), adding
    /// each session's seconds to `sessions` (per problem; per problem and device with several).
    pub(super) fn run_all(
        &self,
        units: &[Unit],
        peers: &mut Vec<PeerMedian>,
        peer_server: &mut PeerServer,
        sessions: &mut serde_json::Map<String, serde_json::Value>,
    ) -> anyhow::Result<(Vec<Record>, f64)> {
        let devices = &self.opts.devices;
        let sum = |t: &serde_json::Map<String, serde_json::Value>| -> f64 {
            t.values().filter_map(|v| v.as_f64()).sum()
        };
        if devices.len() == 1 {
            let (records, times) = self.run_units(units, peers, peer_server)?;
            let secs = sum(&times);
            sessions.extend(times);
            return Ok((records, secs));
        }
        let names: Vec<String> = devices.iter().map(|d| d.to_string()).collect();
        eprintln!("devices: {} (one worker each at a time)", names.join(", "));
        let results: Vec<anyhow::Result<_>> = std::thread::scope(|scope| {
            let handles: Vec<_> = devices
                .iter()
                .map(|&d| {
                    let mine: Vec<Unit> = units.iter().filter(|u| u.device == d).cloned().collect();
                    let mut peers = peers.clone();
                    scope.spawn(move || {
                        // No PyTorch peer with several devices (`run` refuses --torch).
                        let mut none = crate::runner::peer::torch_server();
                        self.run_units(&mine, &mut peers, &mut none)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(anyhow::anyhow!("a device's thread panicked")))
                })
                .collect()
        });
        let (mut fresh, mut longest) = (Vec::new(), 0.0f64);
        for (&d, result) in devices.iter().zip(results) {
            let (records, times) = result?;
            fresh.extend(records);
            longest = longest.max(sum(&times));
            for (problem, secs) in times {
                sessions.insert(format!("{problem} on device {d}"), secs);
            }
        }
        Ok((fresh, longest))
    }

    /// Runs `units` one after the other; returns their new records and each problem's seconds.
    fn run_units(
        &self,
        units: &[Unit],
        peers: &mut Vec<PeerMedian>,
        peer_server: &mut PeerServer,
    ) -> anyhow::Result<(Vec<Record>, serde_json::Map<String, serde_json::Value>)> {
        let mut p = Progress::default();
        // Units being prepared ahead, by their index in `units`.
        let mut ahead: Vec<(usize, Ahead)> = Vec::new();
        // Units whose answers wait for later units' natives ([`ANSWER_LAG`]), by index, in
        // order.
        let mut lagging: VecDeque<(usize, UnitAnswers)> = VecDeque::new();
        for (i, unit) in units.iter().enumerate() {
            if !self.room_to_lag(&lagging, &ahead) {
                for (_, todo) in lagging.drain(..) {
                    self.answer_unit(todo, &mut p)?;
                }
            }
            let clock = Instant::now();
            self.take_ahead(&mut ahead, i, &mut p.leftover);
            if self.prepare_ahead {
                let lagging_bytes = lagging.iter().map(|(_, a)| a.cache.bytes()).sum();
                self.prepare_next(units, i, lagging_bytes, &mut ahead);
                let mut all = self.ahead_totals.lock().unwrap_or_else(|e| e.into_inner());
                all.most_at_once = all.most_at_once.max(ahead.len());
            }
            let (records, answers) = self.run_unit(unit, peers, peer_server, &mut p.leftover)?;
            p.fresh.extend(records);
            add_secs(&mut p.sessions, unit.problem.name(), clock.elapsed());
            if self.answers_wait(&answers, &p.fresh) {
                lagging.push_back((i, answers));
            } else {
                self.answer_unit(answers, &mut p)?;
            }
            // Those of ANSWER_LAG units back (units without answers count too).
            while lagging.front().is_some_and(|(j, _)| j + ANSWER_LAG <= i) {
                if let Some((_, todo)) = lagging.pop_front() {
                    self.answer_unit(todo, &mut p)?;
                }
            }
        }
        for (_, todo) in lagging {
            self.answer_unit(todo, &mut p)?;
        }
        Ok((p.fresh, p.sessions))
    }

    /// Unit `i`'s sets, if they were being made ahead: waited for, the wait going with its
    /// first record (`leftover`).
    fn take_ahead(&self, ahead: &mut Vec<(usize, Ahead)>, i: usize, leftover: &mut PhaseTimes) {
        if let Some(k) = ahead.iter().position(|(j, _)| *j == i) {
            let (_, a) = ahead.remove(k);
            let mut totals = AheadTotals::default();
            leftover.add(&a.finish(PREPARE_TIMEOUT_S.max(self.opts.timeout_s), &mut totals));
            let mut all = self.ahead_totals.lock().unwrap_or_else(|e| e.into_inner());
            all.units += totals.units;
            all.seconds += totals.seconds;
        }
    }

    /// Runs `unit`'s reference and native candidates; returns their records and its answers
    /// still to evaluate ([`Self::run_answers`], which also removes the unit's inputs).
    fn run_unit<'u, 'c>(
        &self,
        unit: &'u Unit<'c>,
        peers: &mut Vec<PeerMedian>,
        peer_server: &mut PeerServer,
        leftover: &mut PhaseTimes,
    ) -> anyhow::Result<(Vec<Record>, UnitAnswers<'u, 'c>)> {
        let (opts, problem) = (self.opts, unit.problem);
        let key = unit_key(problem.name(), problem.shape_name());
        let is_done = |origin: &str| self.done.contains(&(key.clone(), origin.into()));
        let failed_elsewhere = failed_at_other_shapes(self.log, problem, &key);
        let mut pending: Vec<Candidate> = unit
            .candidates
            .iter()
            .filter(|c| !is_done(&c.origin) && !failed_elsewhere.contains(&c.origin))
            .map(|&c| c.clone())
            .collect();
        // A unit that does not log the reference needs it only to pair its candidates with.
        let reference_done = if unit.keeps_reference {
            is_done("reference")
        } else {
            pending.is_empty()
        };
        let cache_root = if self.per_device_cache {
            self.cache_root.join(device_cache(unit.device))
        } else {
            self.cache_root.to_path_buf()
        };
        let cache = InputCache::new(&cache_root, problem);
        let answers: Vec<&kernelbench::Answer> = unit
            .answers
            .iter()
            .copied()
            .filter(|a| !is_done(&a.origin()))
            .collect();
        self.bar.inc(
            (usize::from(unit.keeps_reference && reference_done)
                + unit.candidates.len()
                + unit.answers.len()
                - pending.len()
                - answers.len()) as u64,
        );
        let mut session = ProblemSession {
            problem,
            opts,
            exe: self.exe,
            secret_seed: self.secret_seed,
            ceilings: self.ceilings,
            peers,
            log: self.log,
            bar: self.bar,
            reference_done,
            keeps_reference: unit.keeps_reference,
            device: unit.device,
            reference_ms: self
                .previous
                .iter()
                .find(|r| r.unit_key() == key && r.is_reference())
                .and_then(|r| r.timing.as_ref().map(|t| t.median_ms)),
            input_cache: cache_root.clone(),
            ptx_cache: self.cache_root.join(super::prebuild::PTX_DIR),
            sandbox_hide: self.sandbox_hide,
            // What the unit before left unlogged (its last worker's end) goes with this one.
            carried: std::mem::take(leftover),
            accounted_s: 0.0,
            // The peer's time goes beside the reference: only a problem whose reference is to
            // come.
            peer: (self.torch && !reference_done && unit.keeps_reference).then(|| PeerJob {
                server: peer_server,
                cache: cache.clone(),
                file: self.peer_file.to_path_buf(),
            }),
        };
        let fresh = session.evaluate(&mut pending)?;
        *leftover = std::mem::take(&mut session.carried);
        let answers = UnitAnswers {
            unit,
            answers,
            cache,
            cache_root,
            key,
            keep_inputs: opts.keep_inputs,
        };
        Ok((fresh, answers))
    }
}

/// A unit's KernelBench answers still to evaluate, and where its inputs are (removed once
/// they are evaluated).
struct UnitAnswers<'u, 'c> {
    unit: &'u Unit<'c>,
    answers: Vec<&'c kernelbench::Answer>,
    cache: InputCache,
    cache_root: PathBuf,
    key: String,
    /// `--keep-inputs`: the cache stays when these are done.
    keep_inputs: bool,
}

impl Drop for UnitAnswers<'_, '_> {
    /// Evaluated or not (a run that ended on an error), the unit's inputs go.
    fn drop(&mut self) {
        if !self.keep_inputs {
            self.cache.remove();
        }
    }
}

impl UnitContext<'_> {
    /// [`Self::run_answers`], its seconds added to its problem's.
    fn answer_unit(&self, todo: UnitAnswers, p: &mut Progress) -> anyhow::Result<()> {
        let (problem, clock) = (todo.unit.problem.name(), Instant::now());
        self.run_answers(todo, &mut p.fresh, &mut p.evaluator, &mut p.leftover)?;
        add_secs(&mut p.sessions, problem, clock.elapsed());
        Ok(())
    }

    /// Whether the inputs of the units whose answers wait (`lagging`) may stay while another
    /// unit runs: the cache's file system and the memory have room twice over for them and
    /// for the units being prepared `ahead` (the next unit's among them, as far as made).
    fn room_to_lag(
        &self,
        lagging: &VecDeque<(usize, UnitAnswers)>,
        ahead: &[(usize, Ahead)],
    ) -> bool {
        let bytes: u64 = lagging.iter().map(|(_, a)| a.cache.bytes()).sum::<u64>()
            + ahead.iter().map(|(_, a)| a.cache_bytes()).sum::<u64>();
        lagging.is_empty() || super::ahead::room_for_another(self.cache_root, bytes)
    }

    /// Whether `todo`'s answers wait for later units: only when there are answers and the
    /// unit's reference is correct (else they are not run, and their inputs may go now).
    fn answers_wait(&self, todo: &UnitAnswers, fresh: &[Record]) -> bool {
        !todo.answers.is_empty()
            && self
                .unit_reference(&todo.key, fresh)
                .is_some_and(|r| r.status == Status::Correct)
    }

    /// The record of the reference of the unit `key`: this run's (`fresh`) or the resumed
    /// run's.
    fn unit_reference<'r>(&'r self, key: &str, fresh: &'r [Record]) -> Option<&'r Record> {
        (fresh.iter().chain(self.previous.iter())).find(|r| r.unit_key() == key && r.is_reference())
    }

    /// Evaluates a unit's answers (after its native candidates, maybe a unit later),
    /// appending their records to `fresh` (this run's so far, the unit's reference among them
    /// or among the resumed run's), then removes the unit's inputs; the first record carries
    /// what the workers before left unlogged (`leftover`).
    fn run_answers(
        &self,
        todo: UnitAnswers,
        fresh: &mut Vec<Record>,
        evaluator: &mut Option<Evaluator>,
        leftover: &mut PhaseTimes,
    ) -> anyhow::Result<()> {
        leftover.add(&self.inputs_for_answers(&todo, fresh));
        let (unit, cache, cache_root, key) = (todo.unit, &todo.cache, &todo.cache_root, &todo.key);
        let baseline = self.kernelbench_baseline(&todo, fresh, evaluator, leftover);
        for &answer in &todo.answers {
            self.bar.set_message(format!(
                "{}: KernelBench answer {}/{}",
                unit.problem.name(),
                answer.group,
                answer.name()
            ));
            let reference = self.unit_reference(key, fresh);
            let mut r = evaluate_answer(
                answer,
                unit.problem,
                AnswerContext {
                    opts: self.opts,
                    cache,
                    reference,
                    ceilings: self.ceilings,
                    torch: self.torch,
                    builds: self.builds,
                    kernelbench_eager_ms: baseline,
                },
                || self.evaluator(unit, cache_root, evaluator),
            );
            r.device = Some(unit.device);
            r.shape = unit.problem.shape_name().map(str::to_string);
            if !leftover.is_empty() {
                r.phases
                    .get_or_insert_with(PhaseTimes::default)
                    .add(&std::mem::take(leftover));
            }
            append(self.log, &r)?;
            self.bar.inc(1);
            fresh.push(r);
        }
        Ok(())
    }
}

impl UnitContext<'_> {
    /// The evaluator of `unit`'s device, started with the first job that needs it.
    fn evaluator<'e>(
        &self,
        unit: &Unit,
        cache_root: &Path,
        slot: &'e mut Option<Evaluator>,
    ) -> &'e mut Evaluator {
        slot.get_or_insert_with(|| {
            // Where the sandbox's uid can reach it (not under a private home).
            let name = format!("evaluator-{}-{}", std::process::id(), unit.device);
            let scratch = crate::toolchain::sandbox::shared_dir(&name)
                .unwrap_or_else(|_| self.dir.join("kernelbench").join(&name));
            Evaluator::new(
                Path::new(kernelbench::KERNELBENCH_EVAL),
                &self.answers_sandbox(cache_root),
                &scratch,
                unit.device,
            )
        })
    }

    /// KernelBench's eager baseline of `todo`'s problem ([`kernelbench::eager_baseline`]),
    /// when its answers will run; its seconds go to `leftover` (the first answer's record).
    fn kernelbench_baseline(
        &self,
        todo: &UnitAnswers,
        fresh: &[Record],
        evaluator: &mut Option<Evaluator>,
        leftover: &mut PhaseTimes,
    ) -> Option<f64> {
        let first = todo.answers.first()?;
        let cx = AnswerContext {
            opts: self.opts,
            cache: &todo.cache,
            reference: self.unit_reference(&todo.key, fresh),
            ceilings: self.ceilings,
            torch: self.torch,
            builds: self.builds,
            kernelbench_eager_ms: None,
        };
        if not_run(todo.unit.problem, &cx).is_some() {
            return None;
        }
        let request = kernelbench::request(todo.unit.problem, first, &self.opts.eval, &todo.cache);
        let clock = Instant::now();
        let mut phases = PhaseTimes::default();
        let ms = kernelbench::eager_baseline(
            &request,
            self.evaluator(todo.unit, &todo.cache_root, evaluator),
            self.opts.answer_timeout_s,
            &mut phases,
        );
        // A server that failed to start or answer: its processes' time.
        let unreported = clock.elapsed().as_secs_f64() - phases.total();
        if unreported > 0.0 {
            *phases.0.entry(Phase::Worker).or_default() += unreported;
        }
        leftover.add(&phases);
        ms
    }
}

/// What an answer's evaluation needs from its run and problem.
pub(crate) struct AnswerContext<'a> {
    pub(crate) opts: &'a RunOptions,
    pub(crate) cache: &'a InputCache,
    /// The run's record of the problem's reference.
    pub(crate) reference: Option<&'a Record>,
    pub(crate) ceilings: Option<Ceilings>,
    /// Whether the run has PyTorch on a GPU.
    pub(crate) torch: bool,
    /// The answers' builds, made ahead (on threads of their own).
    pub(crate) builds: &'a AheadBuilds,
    /// KernelBench's eager baseline of the problem, measured once for its answers.
    pub(crate) kernelbench_eager_ms: Option<f64>,
}

/// One KernelBench answer's record: both protocols run (through the evaluator `evaluator`
/// gives) when the run has PyTorch on a GPU, the problem's reference passed and its input sets
/// are in the cache; otherwise skipped, saying why.
pub(crate) fn evaluate_answer<'e>(
    answer: &kernelbench::Answer,
    problem: &'static dyn Problem,
    cx: AnswerContext,
    evaluator: impl FnOnce() -> &'e mut Evaluator,
) -> Record {
    let opts = cx.opts;
    if let Some(why) = not_run(problem, &cx) {
        return kernelbench::skipped_record(answer, &why);
    }
    let mut request = kernelbench::request(problem, answer, &opts.eval, cx.cache);
    if let Some(ms) = cx.kernelbench_eager_ms {
        request["kernelbench_eager_ms"] = json!(ms);
    }
    let mut phases = PhaseTimes::default();
    let (build, waited) = cx.builds.wait(&answer.file);
    if let Some(kernelbench::builds::Build::Undecided(why)) = &build {
        // Its evaluation builds it (inside the protocols' time): say why the build ahead did not.
        eprintln!(
            "{}: no build made ahead ({}); its evaluation compiles it",
            answer.file.display(),
            why.lines().last().unwrap_or("no reason given")
        );
    }
    if waited > 0.0 {
        phases.0.insert(Phase::AnswerBuild, waited);
    }
    let clock = Instant::now();
    let reported = phases.total();
    let (ours, kb) = kernelbench::evaluate(
        &request,
        build.as_ref(),
        evaluator(),
        opts.answer_timeout_s,
        &mut phases,
    );
    // An evaluator that failed to start or answer, or was restarted: its processes' time.
    let unreported = clock.elapsed().as_secs_f64() - (phases.total() - reported);
    if unreported > 0.0 {
        *phases.0.entry(Phase::Worker).or_default() += unreported;
    }
    let mut r = kernelbench::answer_record(
        answer,
        &ours,
        &kb,
        cx.reference,
        cx.ceilings,
        opts.eval.win_threshold,
    );
    r.kernelbench = r
        .kernelbench
        .map(|v| kernelbench::with_baseline(v, cx.kernelbench_eager_ms));
    r.phases = Some(phases);
    r.sandbox = Some(answer_sandbox().isolation);
    r
}

impl UnitContext<'_> {
    /// Starts preparing the units after `units[current]` that have work left (a resumed run's
    /// done units need no inputs) and are not being prepared, in order, until
    /// [`super::ahead::DEPTH`] are under way or memory and the cache have no room for another
    /// beside the sets of this unit, of those under way and of those whose answers wait
    /// (`lagging_bytes`).
    fn prepare_next(
        &self,
        units: &[Unit],
        current: usize,
        lagging_bytes: u64,
        ahead: &mut Vec<(usize, Ahead)>,
    ) {
        for k in current + 1..units.len() {
            if ahead.len() >= super::ahead::DEPTH {
                return;
            }
            if ahead.iter().any(|(j, _)| *j == k) || !self.has_work(&units[k]) {
                continue;
            }
            let bytes: u64 = std::iter::once(current)
                .chain(ahead.iter().map(|(j, _)| *j))
                .map(|j| InputCache::new(self.cache_root, units[j].problem).bytes())
                .sum::<u64>()
                + lagging_bytes;
            if !super::ahead::room_for_another(self.cache_root, bytes) {
                return;
            }
            match self.start_ahead(&units[k]) {
                Some(a) => ahead.push((k, a)),
                None => return,
            }
        }
    }

    /// Starts making `next`'s inputs ahead ([`super::ahead`]; one device, one cache root).
    fn start_ahead(&self, next: &Unit) -> Option<Ahead> {
        Ahead::start(
            self.exe,
            self.preparing_spec(next, self.cache_root),
            InputCache::new(self.cache_root, next.problem),
        )
    }

    /// A worker that only makes `unit`'s sets and oracles into `cache_root`.
    fn preparing_spec(&self, unit: &Unit, cache_root: &Path) -> WorkerSpec {
        WorkerSpec {
            problem: unit.problem.name().to_string(),
            shape: unit.problem.shape_name().map(str::to_string),
            input_cache: Some(cache_root.to_path_buf()),
            device: unit.device,
            ..base_spec(self.opts, self.secret_seed)
        }
    }

    /// Makes the sets `todo`'s answers read where the unit's workers did not (a resumed run
    /// whose reference and candidates were done: no worker ran), when the answers can run;
    /// the wait goes with the next record.
    fn inputs_for_answers(&self, todo: &UnitAnswers, fresh: &[Record]) -> PhaseTimes {
        let reference_correct = self
            .unit_reference(&todo.key, fresh)
            .is_some_and(|r| r.status == Status::Correct);
        let needed = self.torch
            && sandbox_refusal(self.opts.unsandboxed).is_none()
            && reference_correct
            && !todo.answers.is_empty()
            && missing_answer_set(todo.unit.problem, &self.opts.eval, &todo.cache).is_some();
        if !needed {
            return PhaseTimes::default();
        }
        self.bar.set_message(format!(
            "{}: making the inputs of its KernelBench answers",
            todo.unit.problem.name()
        ));
        Ahead::prepare_now(
            self.exe,
            self.preparing_spec(todo.unit, &todo.cache_root),
            todo.cache.clone(),
            PREPARE_TIMEOUT_S.max(self.opts.timeout_s),
        )
    }

    /// Whether `unit` has a record still to make: its reference, a candidate or an answer.
    fn has_work(&self, unit: &Unit) -> bool {
        let key = unit_key(unit.problem.name(), unit.problem.shape_name());
        let done = |origin: &str| self.done.contains(&(key.clone(), origin.to_string()));
        (unit.keeps_reference && !done("reference"))
            || unit.candidates.iter().any(|c| !done(&c.origin))
            || unit.answers.iter().any(|a| !done(&a.origin()))
    }

    /// The sandbox of this run's answers, whose Python reads the sets of the cache under
    /// `cache_root` and nothing else of the run: `/dev/shm` hidden (other runs' caches, one
    /// left by a crash among them) with `cache_root` shown again, its oracles hidden, and the
    /// run's results and seed ([`Self::sandbox_hide`] less the cache; the seed's file always,
    /// even where the cache lies inside the run directory).
    fn answers_sandbox(&self, cache_root: &Path) -> Sandbox {
        // Made now, so the cover has a directory to land on.
        let oracles = crate::evaluate::oracles_root(cache_root)
            .unwrap_or_else(|_| cache_root.join(crate::evaluate::ORACLES_DIR));
        let seed = self.dir.join(crate::results::run_dir::SECRET_FILE);
        let hidden = [PathBuf::from("/dev/shm"), oracles, seed]
            .into_iter()
            .chain(
                self.sandbox_hide
                    .iter()
                    .filter(|p| !cache_root.starts_with(p) && !p.starts_with(cache_root))
                    .cloned(),
            );
        answer_sandbox()
            .hiding(hidden)
            .exposing([cache_root.to_path_buf()])
    }
}

/// Why an answer to `problem` cannot run (no torch, a failed reference, missing inputs, no
/// sandbox), if so.
fn not_run(problem: &'static dyn Problem, cx: &AnswerContext) -> Option<String> {
    if !cx.torch {
        return Some(
            "not run: KernelBench answers need python3 with torch and a CUDA GPU, and this run \
             has none"
                .into(),
        );
    }
    if cx.reference.is_none_or(|r| r.status != Status::Correct) {
        return Some("not run: the reference failed its own check on this device".into());
    }
    if let Some(m) = missing_answer_set(problem, &cx.opts.eval, cx.cache) {
        return Some(format!(
            "not run: input set {} is not in the input cache (its making failed: see the \
             run's warnings)",
            m.display()
        ));
    }
    sandbox_refusal(cx.opts.unsandboxed)
}

/// The first of the sets an answer to `problem` is checked on that is not in `cache`.
fn missing_answer_set(
    problem: &'static dyn Problem,
    eval: &crate::evaluate::EvalConfig,
    cache: &InputCache,
) -> Option<PathBuf> {
    crate::evaluate::check_set_files(problem, eval, cache)
        .into_iter()
        .map(|(_, path)| path)
        .find(|p| !p.is_file())
}

/// Why answers may not run here: a sandbox weaker than bubblewrap without `--unsandboxed`.
pub(crate) fn sandbox_refusal(unsandboxed: bool) -> Option<String> {
    let sandbox = answer_sandbox();
    (sandbox.isolation != Isolation::Bubblewrap && !unsandboxed).then(|| {
        format!(
            "not run: bubblewrap (bwrap) does not work here, and the best sandbox left, {}, \
             would let an answer's Python write outside its directory; install bubblewrap, or \
             --unsandboxed runs it so",
            sandbox.isolation.describe()
        )
    })
}

/// The sandbox of KernelBench answers, found once per process; a loud warning when it is
/// weaker than bubblewrap.
pub(crate) fn answer_sandbox() -> &'static Sandbox {
    static WARNED: std::sync::Once = std::sync::Once::new();
    let s = crate::toolchain::sandbox::detected();
    WARNED.call_once(|| {
        if s.isolation != Isolation::Bubblewrap {
            eprintln!(
                "WARNING: KernelBench answers run under {}: install bubblewrap (bwrap) to confine \
                 their network and writes",
                s.isolation.describe()
            );
        }
    });
    s
}
