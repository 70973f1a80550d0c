//! A unit's KernelBench answers: what they wait for ([`UnitAnswers`], kept a few units after
//! their reference while the answers' builds finish), the problem's eager baseline under
//! KernelBench's protocol, each answer's evaluation through the device's evaluator server
//! ([`evaluate_answer`]), and whether answers can run at all (torch, the reference, their sets,
//! the sandbox).
use super::ahead::Ahead;
use super::unit::{Unit, UnitContext};
use super::PREPARE_TIMEOUT_S;
use crate::evaluate::InputCache;
use crate::kernelbench;
use crate::kernelbench::builds::AheadBuilds;
use crate::kernelbench::evaluator::Evaluator;
use crate::results::record::Ceilings;
use crate::results::record::Record;
use crate::results::record::Status;
use crate::runner::activity::{Phase, PhaseTimes};
use crate::runner::options::RunOptions;
use crate::runner::session::append;
use crate::toolchain::sandbox::{Isolation, Sandbox};
use bench_problems::Problem;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// A unit's KernelBench answers still to evaluate, and where its inputs are (removed once
/// they are evaluated).
pub(super) struct UnitAnswers<'u, 'c> {
    pub(super) unit: &'u Unit<'c>,
    pub(super) answers: Vec<&'c kernelbench::Answer>,
    pub(super) cache: InputCache,
    pub(super) cache_root: PathBuf,
    pub(super) key: String,
    /// `--keep-inputs`: the cache stays when these are done.
    pub(super) keep_inputs: bool,
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
    /// The record of the reference of the unit `key`: this run's (`fresh`) or the resumed
    /// run's.
    pub(super) fn unit_reference<'r>(
        &'r self,
        key: &str,
        fresh: &'r [Record],
    ) -> Option<&'r Record> {
        (fresh.iter().chain(self.previous.iter())).find(|r| r.unit_key() == key && r.is_reference())
    }

    /// Evaluates a unit's answers (after its native candidates, maybe a unit later),
    /// appending their records to `fresh` (this run's so far, the unit's reference among them
    /// or among the resumed run's), then removes the unit's inputs; the first record carries
    /// what the workers before left unlogged (`leftover`).
    pub(super) fn run_answers(
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
    pub(super) fn evaluator<'e>(
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
    pub(super) fn kernelbench_baseline(
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
        self.bar.set_message(format!(
            "{}: KernelBench's eager baseline",
            todo.unit.problem.name()
        ));
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
    /// Makes the sets `todo`'s answers read where the unit's workers did not (a resumed run
    /// whose reference and candidates were done: no worker ran), when the answers can run;
    /// the wait goes with the next record.
    pub(super) fn inputs_for_answers(&self, todo: &UnitAnswers, fresh: &[Record]) -> PhaseTimes {
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

    /// The sandbox of this run's answers, whose Python reads the sets of the cache under
    /// `cache_root` and nothing else of the run: `/dev/shm` hidden (other runs' caches, one
    /// left by a crash among them) with `cache_root` shown again, its oracles hidden, and the
    /// run's results and seed ([`Self::sandbox_hide`] less the cache; the seed's file always,
    /// even where the cache lies inside the run directory).
    pub(super) fn answers_sandbox(&self, cache_root: &Path) -> Sandbox {
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
pub(super) fn not_run(problem: &'static dyn Problem, cx: &AnswerContext) -> Option<String> {
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
