//! Evaluates candidates of one problem (docs/design.md §6–7, docs/checks-and-timing.md): generates the
//! input sets (public seeds, secret seeds, edge cases), computes the oracle, checks the reference
//! and each candidate with poisoned outputs and input fingerprints (the candidate on every set
//! but the timing's), then times candidate and reference interleaved on the secret sets with the
//! L2 flushed, checking every timed run of the candidate against the reference's outputs on the
//! same inputs, rechecks what the timed runs left, and flags times below the physical floor as
//! `suspect`. After every execution of a candidate its module's globals must be as loaded.
//!
//! [`ProblemRun`] holds the run and decides the verdicts; its parts are `config` (which input
//! sets), `cache` (the run's input cache), `inputs` (the sets on the device), `guard` (the
//! guard regions around every buffer), `load` (a plan's module, scratch and bound launches),
//! `verify` (poisoned runs, guard, output and input checks, the check of a timed run, the
//! recheck) and `timing`. The reference's outputs and scratch are zeroed after each of its runs
//! (or right after the comparison that follows it), so no candidate finds them; inputs a
//! candidate wrote are put back before the next.
mod cache;
mod config;
mod expected;
mod fresh;
mod guard;
mod inputs;
mod load;
mod oracle_cache;
pub mod quantiles;
mod specs;
mod timing;
mod verify;

use cache::StoreQueue;
pub(crate) use cache::{free_bytes, oracles_root, InputCache, ORACLES_DIR};
pub(crate) use config::public_seed;
pub use config::{table_seed, EvalConfig};
pub use inputs::canary_pattern;
pub(crate) use timing::timing_stats;

use crate::backend::{Backend, BackendError};
use crate::candidate::{reference_candidate, Candidate};
use crate::results::record::{Ceilings, Record, Status};
use crate::runner::activity::{Phase, PhaseTimes};
use bench_problems::{Problem, Work};
use fresh::Freshener;
use inputs::{DeviceSet, SharedUploads, Side};
use load::Loaded;
use timing::{PairTimes, Timer, TimingFailure};
use verify::Verifier;

/// The cache files of the input sets the timing rotates among (what PyTorch's peer times).
pub(crate) fn rotation_files(
    problem: &'static dyn Problem,
    cfg: &EvalConfig,
    cache: &InputCache,
) -> Vec<std::path::PathBuf> {
    let cfg = &cfg.at_shape(problem);
    let plans = cfg.input_sets(problem);
    let rotation = cfg.rotation_range();
    plans[rotation.start.min(plans.len())..rotation.end.min(plans.len())]
        .iter()
        .map(|plan| cache.set_path(problem, cfg.preset, plan))
        .collect()
}

/// Every input set of `problem` the run checks, with its label (`public-0`, `secret-1`,
/// `edge-0`, `special-nan`, ...), and the file it has in `cache` once stored: what the
/// KernelBench evaluator checks an answer on.
pub(crate) fn check_set_files(
    problem: &'static dyn Problem,
    cfg: &EvalConfig,
    cache: &InputCache,
) -> Vec<(String, std::path::PathBuf)> {
    let cfg = &cfg.at_shape(problem);
    cfg.input_sets(problem)
        .iter()
        .map(|plan| {
            (
                plan.label.clone(),
                cache.set_path(problem, cfg.preset, plan),
            )
        })
        .collect()
}

/// One problem's input sets on the device, with the reference loaded.
pub struct ProblemRun<'a> {
    backend: &'a mut dyn Backend,
    problem: &'static dyn Problem,
    cfg: EvalConfig,
    ceilings: Option<Ceilings>,
    sets: Vec<DeviceSet>,
    reference: Candidate,
    /// The reference's plan, once it passed its own check.
    reference_plan: Option<Loaded>,
    /// Seconds of generating, computing the oracle of and uploading the sets.
    prepare_phases: PhaseTimes,
}

impl<'a> ProblemRun<'a> {
    /// Reads from `cache` (or else generates, computes the oracle of and caches) and uploads
    /// every input set.
    pub fn prepare(
        backend: &'a mut dyn Backend,
        problem: &'static dyn Problem,
        cfg: EvalConfig,
        ceilings: Option<Ceilings>,
        cache: Option<&InputCache>,
    ) -> anyhow::Result<Self> {
        let cfg = cfg.at_shape(problem);
        anyhow::ensure!(
            cfg.public_sets >= 1,
            "at least one public input set is needed"
        );
        anyhow::ensure!(
            !cfg.rotation_range().is_empty(),
            "at least one secret input set is needed: the timing rotates among them"
        );
        let mut sets = Vec::new();
        let mut prepare_phases = PhaseTimes::default();
        let mut uploads = SharedUploads::default();
        std::thread::scope(|scope| {
            let store = cache.map(|c| (c, StoreQueue::start(scope, c, problem, cfg.preset)));
            let plans = cfg.input_sets(problem);
            let sides = inputs::host_sides(problem, cfg.preset, plans, cache, &mut prepare_phases)?;
            for side in sides {
                let mut set = DeviceSet::prepare(
                    &mut *backend,
                    problem,
                    side,
                    store.as_ref().map(|(_, q)| q),
                    &mut uploads,
                    &mut prepare_phases,
                )?;
                // What exact outputs must hold, encoded and fingerprinted once per set.
                prepare_phases.time(Phase::Oracle, || set.prepare_checks(problem))?;
                sets.push(set);
            }
            // Store: only the wait for writes the rest of the preparation did not hide.
            match store {
                Some((_, queue)) if queue.queued() > 0 => {
                    prepare_phases.time(Phase::Store, || queue.finish())
                }
                Some((_, queue)) => queue.finish(),
                None => Ok(()),
            }
        })?;
        let reference = reference_candidate(problem);
        Ok(ProblemRun {
            backend,
            problem,
            cfg,
            ceilings,
            sets,
            reference,
            reference_plan: None,
            prepare_phases,
        })
    }

    /// Seconds of reading or generating, computing the oracle of, caching and uploading the sets.
    pub(crate) fn prepare_phases(&self) -> &PhaseTimes {
        &self.prepare_phases
    }

    /// The sets the timing rotates among.
    fn rotation(&self) -> &[DeviceSet] {
        &self.sets[self.cfg.rotation_range()]
    }

    /// The mean work of one timed run.
    fn work(&self) -> Work {
        let sets = self.rotation();
        let r = sets.len() as f64;
        let mut w = Work::default();
        for s in sets {
            w.compulsory_bytes += s.work.compulsory_bytes / r;
            w.logical_bytes += s.work.logical_bytes / r;
            w.flops += s.work.flops / r;
            if let Some(g) = s.work.gathered {
                let sum = w.gathered.get_or_insert(bench_problems::Gathered {
                    row_bytes: g.row_bytes,
                    ..Default::default()
                });
                sum.distinct_bytes += g.distinct_bytes / r;
                sum.lookup_bytes += g.lookup_bytes / r;
            }
        }
        w
    }

    /// A verifier on the backend, with every set (borrowed beside it).
    fn verifier(&mut self) -> (Verifier<'_>, &[DeviceSet]) {
        let verifier = Verifier {
            backend: &mut *self.backend,
            problem: self.problem,
        };
        (verifier, &self.sets)
    }

    /// A timer on the backend, with every set (the timing takes those of
    /// [`EvalConfig::rotation_range`]).
    fn timer(&mut self) -> (Timer<'_>, &[DeviceSet]) {
        let timer = Timer {
            backend: &mut *self.backend,
            problem: self.problem,
            cfg: &self.cfg,
            fresh: None,
        };
        (timer, &self.sets)
    }

    /// The fresh-input rewriter of the timed sets ([`fresh`]), when the problem names
    /// relabelable inputs and every output of a timed run is compared with the reference's
    /// (an oracle of the generated inputs would not hold for relabeled ones).
    fn freshener(&mut self) -> Result<Freshener, BackendError> {
        let rotation = self.cfg.rotation_range();
        // Drawn anew for every candidate: no candidate can leave state keyed to the ids the
        // next one will be timed on.
        let seed = data_gen::seed::derive(self.cfg.secret_seed, rand::random::<u64>());
        let all_against_reference = {
            let (verifier, sets) = self.verifier();
            sets[rotation.clone()]
                .iter()
                .all(|s| verifier.timed_checks_all_against_reference(s))
        };
        let rotation = if all_against_reference {
            rotation
        } else {
            0..0
        };
        Freshener::prepare(&mut *self.backend, self.problem, &self.sets, rotation, seed)
    }

    /// A record of `cand` with the work and floor of a timed run.
    fn new_record(&self, cand: &Candidate) -> Record {
        let mut rec = Record::new(self.problem.name(), &cand.name, &cand.group, &cand.origin);
        rec.work = Some(self.work());
        rec.floor_ms = self.ceilings.map(|c| c.floor_ms(&self.work()));
        rec
    }

    /// Checks and times the reference alone. Must be called before [`Self::evaluate`]. Its
    /// phases are the reference's own (the preparation's are [`Self::prepare_phases`]).
    pub fn reference_record(&mut self) -> Record {
        let mut phases = PhaseTimes::default();
        let mut rec = self.reference_record_timed(&mut phases);
        rec.phases = Some(phases);
        rec
    }

    fn reference_record_timed(&mut self, phases: &mut PhaseTimes) -> Record {
        let mut rec = self.new_record(&self.reference);
        let stats: Vec<serde_json::Value> = self
            .rotation()
            .iter()
            .map(|s| serde_json::json!({"set": s.label, "seed": s.input.seed, "sizes": s.input.sizes, "stats": self.problem.input_stats(&s.input)}))
            .collect();
        rec.input_stats = Some(serde_json::Value::Array(stats));
        let loaded = phases.time(Phase::Load, || {
            load::load(
                &mut *self.backend,
                &self.sets,
                &self.reference,
                Side::Reference,
            )
        });
        let plan = match loaded {
            Ok(x) => x,
            Err((status, msg)) => {
                rec.status = status;
                rec.message = msg;
                return rec;
            }
        };
        let (checks, fail) = phases.time(Phase::Check, || {
            let (mut verifier, sets) = self.verifier();
            verifier.check_all(sets, &plan, Side::Reference, 0..0)
        });
        rec.checks = checks;
        if let Some((status, msg)) = fail {
            rec.status = status;
            rec.message = format!("THE REFERENCE FAILED ITS OWN CHECK: {msg}");
            return rec;
        }
        // No candidate may find the reference's answers: its outputs and scratch are zeroed
        // after every run of it (the timing does it after each timed run).
        let cleared = self.clear_reference(&plan);
        if let Err(e) = cleared {
            rec.status = Status::RuntimeError;
            rec.message = format!("while clearing the reference's outputs: {e}");
            return rec;
        }
        let rotation = self.cfg.rotation_range();
        let series = phases.time(Phase::Time, || {
            let (mut timer, sets) = self.timer();
            timer.reference_series(sets, rotation.clone(), &plan)
        });
        let series = series.and_then(|ms| {
            let (mut verifier, sets) = self.verifier();
            match verifier.guards_after_timing(sets, rotation, &plan, Side::Reference)? {
                None => Ok(ms),
                Some(msg) => Err(BackendError::Device(format!("the reference {msg}"))),
            }
        });
        self.reference_plan = Some(plan);
        match series {
            Ok(ms) => {
                rec.status = Status::Correct;
                rec.timing = Some(self.timing_of(&ms, &self.work()));
            }
            Err(e) => {
                rec.status = Status::RuntimeError;
                rec.message = e.to_string();
            }
        }
        rec
    }

    /// Checks, times and rechecks one candidate against the reference.
    pub fn evaluate(&mut self, cand: &Candidate) -> Record {
        let mut rec = self.new_record(cand);
        let Some(reference) = self.reference_plan.take() else {
            rec.message = "the reference did not pass, so nothing is compared with it".into();
            rec.expected_status = cand.expect.clone();
            return rec;
        };
        let mut phases = PhaseTimes::default();
        // Inputs as uploaded, whatever the candidate before wrote into them.
        let restored = phases.time(Phase::Check, || {
            let (mut verifier, sets) = self.verifier();
            verifier.restore_inputs(sets)
        });
        if let Err(e) = restored {
            rec.status = Status::RuntimeError;
            rec.message = format!("while restoring the inputs before the candidate: {e}");
            self.reference_plan = Some(reference);
            rec.expected_status = cand.expect.clone();
            return rec;
        }
        let loaded = phases.time(Phase::Load, || {
            load::load(&mut *self.backend, &self.sets, cand, Side::Candidate)
        });
        match loaded {
            Ok(plan) => {
                self.check_and_time(&reference, &plan, &mut rec, &mut phases);
                plan.free_scratch(&mut *self.backend);
            }
            Err((status, msg)) => {
                rec.status = status;
                rec.message = msg;
            }
        }
        self.reference_plan = Some(reference);
        rec.expected_status = cand.expect.clone();
        rec.phases = Some(phases);
        rec
    }

    /// The verdict on a loaded candidate: checked, timed against `reference`, rechecked, and
    /// judged against the floor and the win threshold.
    fn check_and_time(
        &mut self,
        reference: &Loaded,
        plan: &Loaded,
        rec: &mut Record,
        phases: &mut PhaseTimes,
    ) {
        // The timing's sets are not checked here: the candidate meets them first in a timed
        // run, and every timed run is checked.
        let rotation = self.cfg.rotation_range();
        let (checks, fail) = phases.time(Phase::Check, || {
            let (mut verifier, sets) = self.verifier();
            verifier.check_all(sets, plan, Side::Candidate, rotation.clone())
        });
        rec.checks = checks;
        if let Some((status, msg)) = fail {
            rec.status = status;
            rec.message = msg;
            return;
        }
        let pairs = self.time_pairs(reference, plan, phases);
        match pairs {
            Ok(pairs) => {
                // The checks between the timed runs are a phase of their own.
                phases.move_seconds(Phase::Time, Phase::TimedCheck, pairs.check_s);
                rec.timed_runs_checked = Some(pairs.checked);
                self.record_times(&pairs, rec);
            }
            Err(TimingFailure::Incorrect(msg)) => {
                rec.status = Status::Incorrect;
                rec.message = msg;
                return;
            }
            Err(TimingFailure::Device(e)) => {
                rec.status = Status::RuntimeError;
                rec.message = format!("while timing: {e}");
                return;
            }
        }
        // The guards of every buffer the timed runs reached (no guard check ran between them).
        let guards = phases.time(Phase::Recheck, || {
            let (mut verifier, sets) = self.verifier();
            verifier.guards_after_timing(sets, rotation.clone(), plan, Side::Candidate)
        });
        match guards {
            Ok(None) => {}
            Ok(Some(msg)) => {
                rec.status = Status::OutOfBoundsWrite;
                rec.message = msg;
                return;
            }
            Err(e) => {
                rec.status = Status::RuntimeError;
                rec.message = format!("while checking guard regions: {e}");
                return;
            }
        }
        // Recheck what the timed runs left (no poison in between): against the oracle and
        // against the reference's output on the same inputs.
        let recheck = phases.time(Phase::Recheck, || {
            let (mut verifier, sets) = self.verifier();
            verifier.recheck(sets, rotation, reference, &mut rec.checks)
        });
        match recheck {
            Ok(None) => rec.status = Status::Correct,
            Ok(Some(msg)) => {
                rec.status = Status::Incorrect;
                rec.message = msg;
            }
            Err(e) => {
                rec.status = Status::RuntimeError;
                rec.message = format!("while rechecking: {e}");
            }
        }
        if rec.status == Status::Correct {
            if let (Some(floor), Some(t)) = (rec.floor_ms, &rec.timing) {
                if t.median_ms < floor {
                    rec.status = Status::Suspect;
                    rec.message = format!(
                        "median {:.4} ms is below the physical floor {:.4} ms: impossible, not counted as a win",
                        t.median_ms, floor
                    );
                }
            }
        }
        rec.win = rec.status == Status::Correct
            && rec
                .speedup
                .as_ref()
                .is_some_and(|s| s.ci_low > self.cfg.win_threshold);
    }

    /// The interleaved pairs of `plan` against `reference` on the timed sets, on fresh ids
    /// where the problem allows ([`fresh`]); then the generated ids back and, after a timing
    /// that went through on fresh ids, one more run of the candidate on each set (what the
    /// recheck compares with the oracle and the reference).
    fn time_pairs(
        &mut self,
        reference: &Loaded,
        plan: &Loaded,
        phases: &mut PhaseTimes,
    ) -> Result<PairTimes, TimingFailure> {
        let rotation = self.cfg.rotation_range();
        let fresh = phases.time(Phase::Time, || self.freshener()).map_err(|e| {
            TimingFailure::Device(BackendError::Device(format!(
                "while preparing fresh inputs for the timing: {e}"
            )))
        })?;
        let pairs = phases.time(Phase::Time, || {
            let (mut timer, sets) = self.timer();
            timer.fresh = Some(&fresh);
            timer.pairs(sets, rotation.clone(), reference, plan)
        });
        let active = fresh.is_active();
        let restored = phases.time(Phase::Recheck, || fresh.restore(&mut *self.backend));
        let pairs = match (pairs, restored) {
            (Ok(_), Err(e)) => return Err(TimingFailure::Device(e)),
            (pairs, _) => pairs?,
        };
        if active {
            let settled = phases.time(Phase::Recheck, || {
                let (mut timer, sets) = self.timer();
                timer.settle(sets, rotation, plan)
            })?;
            if let Some(msg) = settled {
                return Err(TimingFailure::Incorrect(msg));
            }
        }
        Ok(pairs)
    }

    fn record_times(&self, pairs: &PairTimes, rec: &mut Record) {
        let work = self.work();
        rec.speedup = Some(pairs.speedup(self.cfg.seed));
        rec.timing = Some(self.timing_of(&pairs.candidate, &work));
        rec.reference_timing = Some(self.timing_of(&pairs.reference, &work));
    }

    /// The statistics of `ms`, against the streaming floor and (for a problem that gathers
    /// rows) the gather floor.
    fn timing_of(&self, ms: &[f64], work: &Work) -> crate::results::record::Timing {
        timing::with_gather_floor(timing_stats(ms, work, self.ceilings), work, self.ceilings)
    }

    /// Zeroes the reference's outputs and `plan`'s scratch on every set.
    fn clear_reference(&mut self, plan: &Loaded) -> Result<(), BackendError> {
        for (i, set) in self.sets.iter().enumerate() {
            set.clear_outputs(&mut *self.backend, Side::Reference)?;
            plan.clear_scratch(&mut *self.backend, i)?;
        }
        Ok(())
    }

    /// Whether the device still works after a fault (a CUDA illegal address is sticky: every
    /// later call fails).
    pub(crate) fn device_health(&mut self) -> Result<(), BackendError> {
        self.backend.synchronize()?;
        let probe = self.backend.alloc(256)?;
        self.backend.fill(&probe, &[0])?;
        self.backend.synchronize()?;
        self.backend.free(probe);
        Ok(())
    }

    /// Frees every device buffer of the problem, the reference's scratch included.
    pub fn release(self) {
        if let Some(reference) = self.reference_plan {
            reference.free_scratch(&mut *self.backend);
        }
        let mut freed = std::collections::BTreeSet::new();
        for set in self.sets {
            set.release(&mut *self.backend, &mut freed);
        }
    }
}

/// Makes `problem`'s input sets and their oracles into `cache` on the host alone (no device):
/// a unit prepared ahead while another is measured, so that its worker reads every set from
/// the cache. The seconds of each phase, which overlapped other work.
pub(crate) fn prepare_ahead(
    problem: &'static dyn Problem,
    cfg: EvalConfig,
    cache: &InputCache,
) -> anyhow::Result<PhaseTimes> {
    let cfg = cfg.at_shape(problem);
    let mut phases = PhaseTimes::default();
    let plans = cfg.input_sets(problem);
    // A kept cache (`--keep-inputs`) may hold the unit already: nothing to read or make.
    let cached = |plan: &config::SetPlan| {
        cache.set_path(problem, cfg.preset, plan).is_file()
            && cache.oracle_path(problem, cfg.preset, plan).is_file()
    };
    if plans.iter().all(cached) {
        return Ok(phases);
    }
    std::thread::scope(|scope| {
        let queue = StoreQueue::start(scope, cache, problem, cfg.preset);
        let sides =
            inputs::host_sides(problem, cfg.preset, plans.clone(), Some(cache), &mut phases)?;
        for side in sides {
            side.store(&queue);
        }
        phases.time(Phase::Store, || queue.finish())
    })?;
    // A write that failed is only a warning to a measuring worker; here it fails the whole,
    // so that no unit starts from a cache half made ahead.
    for plan in &plans {
        let path = cache.set_path(problem, cfg.preset, plan);
        anyhow::ensure!(path.is_file(), "{} was not cached", path.display());
    }
    Ok(phases)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::emu::EmuBackend;

    /// The reference's plan plus one launch writing a word at `offset` bytes from buffer `base`.
    fn writing_at(problem: &'static dyn Problem, base: &str, offset: &str) -> Candidate {
        let mut c = reference_candidate(problem);
        c.name = format!("write_{base}");
        c.origin = "test".into();
        c.launches.push(bench_problems::LaunchSpec {
            kernel: "fault_write_address".into(),
            grid: [1, 1, 1].map(bench_problems::Dim::Number),
            block: [32, 1, 1].map(bench_problems::Dim::Number),
            shared_bytes: bench_problems::Dim::Number(0),
            args: vec![base.into(), offset.into()],
        });
        c
    }

    #[test]
    fn a_write_before_or_after_any_buffer_is_an_out_of_bounds_write_naming_it() {
        let problem = bench_problems::find_problem("embedding_bag_sum").unwrap();
        let mut backend = EmuBackend::new();
        let mut run =
            ProblemRun::prepare(&mut backend, problem, config::ci_config(1, 1), None, None)
                .unwrap();
        assert_eq!(run.reference_record().status, Status::Correct);
        // D = 40 floats a row: `out` ends on a 16-byte boundary, `bag_size` ((B + 1) · 8 bytes)
        // too when B is odd; the offsets are from each buffer's first byte.
        let cases = [
            (
                "out",
                "B * D * 4 + 4",
                "the candidate's output buffer `out`",
                "after it",
                "first at 4 bytes past its end",
            ),
            (
                "out",
                "0 - 8",
                "the candidate's output buffer `out`",
                "before it",
                "first at 8 bytes before its start",
            ),
            (
                "weight",
                "E * D * 4",
                "input buffer `weight`",
                "after it",
                "first at 0 bytes past its end",
            ),
            (
                "indices",
                "0 - 65536",
                "input buffer `indices`",
                "before it",
                "first at 65536 bytes before its start",
            ),
            (
                "bag_size",
                "(B + 1) * 8 + 64",
                "the candidate's scratch buffer `bag_size`",
                "after it",
                "bytes past its end",
            ),
        ];
        for (base, offset, buffer, side, at) in cases {
            let rec = run.evaluate(&writing_at(problem, base, offset));
            assert_eq!(
                rec.status,
                Status::OutOfBoundsWrite,
                "{base} {offset}: {}",
                rec.message
            );
            for part in [buffer, side, at] {
                assert!(
                    rec.message.contains(part),
                    "{base} {offset}: `{part}` in {}",
                    rec.message
                );
            }
        }
        // Inside the buffers, the same kind of write is no violation: a legitimate candidate
        // (the reference's plan with a harmless extra launch writing into its own scratch).
        let rec = run.evaluate(&writing_at(problem, "bag_size", "0"));
        assert_eq!(rec.status, Status::Correct, "{}", rec.message);
        run.release();
        assert_eq!(backend.live_buffers(), 0);

        // An in-out buffer (problem 5's table and momentum, restored before every run).
        let problem = bench_problems::find_problem("embedding_backward_rowwise_adagrad").unwrap();
        let mut backend = EmuBackend::new();
        let mut run =
            ProblemRun::prepare(&mut backend, problem, config::ci_config(1, 1), None, None)
                .unwrap();
        assert_eq!(run.reference_record().status, Status::Correct);
        for (base, offset, side) in [
            ("weight", "E * D * 4", "after it"),
            ("momentum", "0 - 4", "before it"),
        ] {
            let rec = run.evaluate(&writing_at(problem, base, offset));
            assert_eq!(
                rec.status,
                Status::OutOfBoundsWrite,
                "{base}: {}",
                rec.message
            );
            let buffer = format!("the candidate's output buffer `{base}`");
            assert!(
                rec.message.contains(&buffer) && rec.message.contains(side),
                "{}",
                rec.message
            );
        }
        let rec = run.evaluate(&reference_candidate(problem));
        assert_eq!(
            rec.status,
            Status::Correct,
            "after the repaired guards: {}",
            rec.message
        );
        run.release();
    }

    /// Whether every reference output of every set, and the reference's scratch, is all zeros.
    fn reference_answers_cleared(run: &mut ProblemRun<'_>) -> bool {
        let mut buffers: Vec<crate::backend::Buffer> = run
            .sets
            .iter()
            .flat_map(|s| s.outputs(Side::Reference).values().copied())
            .collect();
        let plan = run.reference_plan.as_ref().expect("the reference passed");
        buffers.extend(plan.scratch.iter().map(|s| s.buffer));
        buffers
            .iter()
            .all(|b| run.backend.download(b).unwrap().iter().all(|&x| x == 0))
    }

    #[test]
    fn no_answer_of_the_reference_is_on_the_device_while_a_candidate_runs() {
        // Problem 5 (in place, row ids), 9 (the reference's scratch holds the sorted ids) and 1.
        for name in [
            "embedding_bag_sum",
            "embedding_backward_rowwise_adagrad",
            "unique_indices",
        ] {
            let problem = bench_problems::find_problem(name).unwrap();
            let mut backend = EmuBackend::new();
            let mut run =
                ProblemRun::prepare(&mut backend, problem, config::ci_config(1, 1), None, None)
                    .unwrap();
            assert_eq!(run.reference_record().status, Status::Correct, "{name}");
            assert!(
                reference_answers_cleared(&mut run),
                "{name}: after the reference's record"
            );
            // A candidate (the reference's plan again) is checked, timed and rechecked against
            // the reference's answers, and still nothing of them stays behind.
            let mut cand = reference_candidate(problem);
            cand.name = "again".into();
            let rec = run.evaluate(&cand);
            assert_eq!(rec.status, Status::Correct, "{name}: {}", rec.message);
            assert!(rec.checks.iter().any(|c| c.set.ends_with("-vs-reference")));
            assert!(
                reference_answers_cleared(&mut run),
                "{name}: after a candidate"
            );
            run.release();
        }
    }

    #[test]
    fn release_frees_every_buffer_the_run_allocated() {
        let problem = bench_problems::find_problem("embedding_bag_sum").unwrap();
        let mut backend = EmuBackend::new();
        let mut run =
            ProblemRun::prepare(&mut backend, problem, config::ci_config(1, 1), None, None)
                .unwrap();
        assert_eq!(run.reference_record().status, Status::Correct);
        run.release();
        assert_eq!(backend.live_buffers(), 0, "the reference's scratch too");
    }

    #[test]
    fn an_input_or_initial_value_a_candidate_wrote_is_put_back_before_the_next() {
        // Problem 5's in-place table starts every run from a kept initial value; a write into
        // that copy or into an input (through any pointer) must not reach the next candidate.
        let problem = bench_problems::find_problem("embedding_backward_rowwise_adagrad").unwrap();
        let mut backend = EmuBackend::new();
        let mut run =
            ProblemRun::prepare(&mut backend, problem, config::ci_config(1, 1), None, None)
                .unwrap();
        assert_eq!(run.reference_record().status, Status::Correct);
        for (which, buffer) in [
            ("initial value", run.sets[0].pristine["weight"]),
            ("input", run.sets[1].inputs["indices"]),
        ] {
            run.backend.fill(&buffer, &[0]).unwrap();
            let mut again = reference_candidate(problem);
            again.name = "again".into();
            let rec = run.evaluate(&again);
            assert_eq!(rec.status, Status::Correct, "{which}: {}", rec.message);
        }
        run.release();
    }
}
