//! The work of a run as units, one problem's chunk of candidates on one device each
//! ([`plan`]), and their running ([`UnitContext::run_all`]): one after the other on one device,
//! or one thread per device (`run --devices`), each running its units' workers in turn.

use super::ahead::{Ahead, AheadTotals};
use super::answers::UnitAnswers;
use super::session::PeerJob;
use super::session::ProblemSession;
use super::shard;
use super::spawn::base_spec;
use super::unit::{Unit, UnitContext};
use super::worker::WorkerSpec;
use super::PREPARE_TIMEOUT_S;
use crate::candidate::Candidate;
use crate::evaluate::InputCache;
use crate::kernelbench;
use crate::kernelbench::evaluator::Evaluator;
use crate::results::record::unit_key;
use crate::results::record::Record;
use crate::results::record::RecordLog;
use crate::results::record::Status;
use crate::runner::activity::PhaseTimes;
use crate::runner::peer::PeerMedian;
use crate::runner::peer::PeerServer;
use bench_problems::Problem;
use serde_json::json;
use std::collections::{BTreeSet, VecDeque};
use std::path::Path;
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
    pub(super) fn preparing_spec(&self, unit: &Unit, cache_root: &Path) -> WorkerSpec {
        WorkerSpec {
            problem: unit.problem.name().to_string(),
            shape: unit.problem.shape_name().map(str::to_string),
            input_cache: Some(cache_root.to_path_buf()),
            device: unit.device,
            ..base_spec(self.opts, self.secret_seed)
        }
    }

    /// Whether `unit` has a record still to make: its reference, a candidate or an answer.
    fn has_work(&self, unit: &Unit) -> bool {
        let key = unit_key(unit.problem.name(), unit.problem.shape_name());
        let done = |origin: &str| self.done.contains(&(key.clone(), origin.to_string()));
        (unit.keeps_reference && !done("reference"))
            || unit.candidates.iter().any(|c| !done(&c.origin))
            || unit.answers.iter().any(|a| !done(&a.origin()))
    }
}
