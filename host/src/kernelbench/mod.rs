//! KernelBench answers (`ModelNew` classes) as candidates: `dlrm-bench kernelbench DIR...`.
//!
//! Each directory holds answers of one model or sample, one file per problem named
//! `NN_<problem>.py` or `<problem>.py` ([`discover`]); its name is the answers' group. The
//! runner measures each problem's reference and PyTorch eager as `run --torch` does, then hands
//! each answer to `tools/kernelbench_eval.py` twice, each time in a fresh process under a time
//! limit ([`evaluate`]): once under the suite's protocol (the run's own input sets, poisoned
//! allocator, input fingerprints, paired timing against eager, recheck of timed outputs) and
//! once under KernelBench's own (reference first, `torch.allclose` at 1e-2, 5 trials, means).
//! [`answer_record`] turns both results into one [`Record`] (origin `kernelbench:<file>`), so
//! `report` and `project` pool answers with native candidates: its status, timing and speedups
//! on both bases are the suite's; its `kernelbench` field is what KernelBench would have said.
use crate::evaluate::{check_set_files, rotation_files, timing_stats, EvalConfig, InputCache};
use crate::results::record::{
    Ceilings, KernelBenchVerdict, PeerTime, Record, Speedup, Status, Timing,
};
use crate::runner::activity::{Phase, PhaseTimes};
use bench_problems::{Problem, Role};
use builds::Build;
use evaluator::{Evaluator, JobTimes};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub mod builds;
pub mod evaluator;

/// The evaluator, relative to the working directory (the repository root).
pub(crate) const KERNELBENCH_EVAL: &str = "tools/kernelbench_eval.py";
/// The prefix of a KernelBench record's `origin` (the answer file follows).
pub(crate) const ORIGIN_PREFIX: &str = "kernelbench:";

/// One answer file.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    pub problem: &'static str,
    pub file: PathBuf,
    /// The directory's name.
    pub group: String,
}

impl Answer {
    /// The `origin` of its record: unique per file, and says where it came from.
    pub fn origin(&self) -> String {
        format!("{ORIGIN_PREFIX}{}", self.file.display())
    }

    /// The record's candidate name: the file's stem.
    pub fn name(&self) -> String {
        self.file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

/// The problem an answer file's name names: `NN_<problem>.py` (NN its catalog number) or
/// `<problem>.py`; an error says what is wrong with the name.
pub(crate) fn problem_of(file: &Path) -> Result<&'static dyn Problem, String> {
    let name = file
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name
        .strip_suffix(".py")
        .ok_or_else(|| format!("{}: an answer is a .py file", file.display()))?;
    let (number, problem) = match stem.split_once('_') {
        Some((n, rest)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
            (Some(n.parse::<u32>().unwrap_or(0)), rest)
        }
        _ => (None, stem),
    };
    let found = bench_problems::find_problem(problem).ok_or_else(|| {
        format!(
            "{}: `{problem}` is not a problem (name the file NN_<problem>.py or <problem>.py; \
             `dlrm-bench list --names` lists them)",
            file.display()
        )
    })?;
    match number {
        Some(n) if n != found.number() => Err(format!(
            "{}: number {n} does not match problem {} `{}`",
            file.display(),
            found.number(),
            found.name()
        )),
        _ => Ok(found),
    }
}

/// The answers in `dirs` (each a directory of `.py` files; other files are ignored), and for
/// each file or directory that cannot be an answer (a bad name, two answers to one problem in
/// one directory, a missing directory) its path and why.
pub fn discover(dirs: &[PathBuf]) -> (Vec<Answer>, Vec<(PathBuf, String)>) {
    let mut answers: Vec<Answer> = Vec::new();
    let mut errors = Vec::new();
    for dir in dirs {
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) => {
                errors.push((
                    dir.clone(),
                    format!("{}: not a readable directory: {e}", dir.display()),
                ));
                continue;
            }
        };
        let group = dir
            .canonicalize()
            .unwrap_or_else(|_| dir.clone())
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "kernelbench".into());
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "py"))
            .collect();
        files.sort();
        if files.is_empty() {
            errors.push((
                dir.clone(),
                format!("{}: no answer files (*.py)", dir.display()),
            ));
        }
        for file in files {
            match problem_of(&file) {
                Ok(p) => {
                    if let Some(other) = answers
                        .iter()
                        .find(|a| a.group == group && a.problem == p.name())
                    {
                        let why = format!(
                            "{}: a second answer to {} in group `{group}` (first: {})",
                            file.display(),
                            p.name(),
                            other.file.display()
                        );
                        errors.push((file.clone(), why));
                        continue;
                    }
                    answers.push(Answer {
                        problem: p.name(),
                        file: std::path::absolute(&file).unwrap_or(file),
                        group: group.clone(),
                    });
                }
                Err(e) => errors.push((file.clone(), e)),
            }
        }
    }
    (answers, errors)
}

/// The evaluator's request for one answer of `problem`: the run's check sets and timing
/// rotation (from its input cache), the float bounds of the problem's outputs by dtype, the
/// timing limits of the run.
pub(crate) fn request(
    problem: &'static dyn Problem,
    answer: &Answer,
    eval: &EvalConfig,
    cache: &InputCache,
) -> Value {
    let mut bounds = serde_json::Map::new();
    for t in problem.tensors().iter().filter(|t| t.role != Role::Input) {
        let tol = problem.tolerance(t);
        if t.dtype.is_float() && !tol.exact {
            let torch_name = match t.dtype.name() {
                "f32" => "float32",
                "f16" => "float16",
                "bf16" => "bfloat16",
                _ => "float64",
            };
            bounds.insert(torch_name.into(), json!([tol.rel_l2, tol.max_scaled]));
        }
    }
    let checks = check_set_files(problem, eval, cache);
    // The row ids relabeled before each timed pair, with their bound at this shape.
    let sizes = problem.sizes(eval.preset);
    let relabel: Vec<Value> = problem
        .relabeled_inputs()
        .into_iter()
        .filter_map(|(name, symbol)| {
            sizes
                .get(symbol)
                .map(|bound| json!({"name": name, "bound": bound}))
        })
        .collect();
    let public0 = checks.first().map(|(_, p)| p.clone());
    json!({
        "problem": problem.name(),
        "answer": answer.file,
        "check_sets": checks.iter().map(|(label, path)| json!({"label": label, "path": path}))
            .collect::<Vec<_>>(),
        "time_sets": rotation_files(problem, eval, cache),
        "relabel": relabel,
        "bounds": bounds,
        "update_bounds": [
            bench_problems::problems::embedding_backward_rowwise_adagrad::UPDATE_REL_L2,
            bench_problems::problems::embedding_backward_rowwise_adagrad::UPDATE_MAX_SCALED,
        ],
        "min_pairs": eval.min_pairs,
        "max_pairs": eval.max_pairs,
        "target_half_width": eval.target_half_width,
        "budget_s": eval.budget_s,
        "warmup": 3,
        "warm_l2": eval.warm_l2,
        "seed": eval.seed,
        "kernelbench_set": public0,
    })
}

/// What one protocol's process gave.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// The evaluator's result object.
    Result(Value),
    /// It ran past its limit and was killed.
    Timeout(f64),
    /// It could not start, died or wrote no answer: why.
    Failed(String),
}

/// Both protocols on one answer through `evaluator`, the suite's first, each in a child
/// process of its own, `limit_s` each; the seconds go to `phases` (the server's start apart).
/// An answer whose build the compiler rejected ahead ([`Build::CompileError`]) is not run: both
/// protocols say `compile_error` with the compiler's message.
pub fn evaluate(
    request: &Value,
    build: Option<&Build>,
    evaluator: &mut Evaluator,
    limit_s: f64,
    phases: &mut PhaseTimes,
) -> (Outcome, Outcome) {
    if let Some(Build::CompileError(message)) = build {
        let ours = json!({"protocol": "ours", "status": "compile_error", "message": message});
        let kb = json!({"protocol": "kernelbench", "compiled": false, "passed": false,
                        "message": message});
        return (Outcome::Result(ours), Outcome::Result(kb));
    }
    let libraries = build.map_or(&[][..], Build::libraries);
    let mut one = |protocol: &str| {
        let (outcome, t) = evaluator.run(request, protocol, libraries, limit_s);
        *phases.0.entry(Phase::EvaluatorStart).or_default() += t.start_s;
        for (phase, s) in job_phases(protocol, &t) {
            *phases.0.entry(phase).or_default() += s;
        }
        outcome
    };
    let ours = one("ours");
    let kb = one("kernelbench");
    (ours, kb)
}

/// KernelBench's baseline for a problem: its eager `Model` timed as KernelBench times an answer,
/// once, in a job of its own that imports no answer (`request` names the problem and its set);
/// every answer's speedup under KernelBench's protocol is then over it ([`with_baseline`]), as
/// KernelBench compares against a baseline measured apart. Its seconds go to `phases` as
/// KernelBench's protocol's; `None` when the job gave no usable time (each answer's job then
/// times the Model itself).
pub fn eager_baseline(
    request: &Value,
    evaluator: &mut Evaluator,
    limit_s: f64,
    phases: &mut PhaseTimes,
) -> Option<f64> {
    let (outcome, t) = evaluator.run(request, "kernelbench_eager", &[], limit_s);
    *phases.0.entry(Phase::EvaluatorStart).or_default() += t.start_s;
    for (phase, s) in job_phases("kernelbench", &t) {
        *phases.0.entry(phase).or_default() += s;
    }
    let ms = match &outcome {
        Outcome::Result(v) => f64_of(&v["ref_runtime_ms"]).filter(|ms| ms.is_finite() && *ms > 0.0),
        Outcome::Timeout(_) | Outcome::Failed(_) => None,
    };
    if ms.is_none() {
        let why = match outcome {
            Outcome::Result(v) => format!("no usable time in {v}"),
            Outcome::Timeout(s) => format!("it ran past {s:.0} s"),
            Outcome::Failed(why) => why,
        };
        eprintln!(
            "warning: {}: KernelBench's eager baseline failed ({}); each answer's job times the \
             Model itself",
            request["problem"].as_str().unwrap_or("?"),
            why.lines().next().unwrap_or("")
        );
    }
    ms
}

/// `verdict` with the problem's `baseline` (ms, [`eager_baseline`]) as its reference time and
/// the speedup over it, both from the runner: whatever the answer's process said of them is
/// dropped, and an answer that failed its trials or gave no usable time of its own has no
/// speedup. Without a baseline (its job failed) the verdict is the job's own.
pub(crate) fn with_baseline(
    mut verdict: KernelBenchVerdict,
    baseline: Option<f64>,
) -> KernelBenchVerdict {
    let Some(b) = baseline else {
        return verdict;
    };
    let runtime = verdict.runtime_ms.filter(|t| t.is_finite() && *t > 0.0);
    verdict.ref_runtime_ms = Some(b);
    verdict.ref_runtime_source = Some("baseline".into());
    verdict.speedup = runtime.filter(|_| verdict.passed).map(|t| b / t);
    verdict
}

/// A protocol's job seconds by phase: its checks' and its timing's stages (as its child
/// reported them) apart, the rest of the job (process, CUDA, sets, oracles, import) in the
/// protocol's start phase. The child is the answer's process, so its account is only
/// believed within the job's wall time: the stages are scaled down to fit it.
pub(crate) fn job_phases(protocol: &str, t: &JobTimes) -> Vec<(Phase, f64)> {
    let (start, check, time) = if protocol == "ours" {
        (
            Phase::AnswerOurs,
            Phase::AnswerOursCheck,
            Phase::AnswerOursTime,
        )
    } else {
        (
            Phase::AnswerKernelBench,
            Phase::AnswerKernelBenchCheck,
            Phase::AnswerKernelBenchTime,
        )
    };
    let job = if t.job_s.is_finite() {
        t.job_s.max(0.0)
    } else {
        0.0
    };
    // Each stage within the job's wall time before any is added: two huge claims must not
    // add up to infinity (then 0 · ∞ is NaN, which a results file cannot hold).
    let stage = |names: &[&str]| -> f64 {
        t.stages
            .iter()
            .filter(|(k, _)| names.contains(&k.as_str()))
            .map(|(_, s)| {
                if s.is_finite() {
                    s.clamp(0.0, job)
                } else {
                    0.0
                }
            })
            .sum()
    };
    let (mut c, mut m) = (stage(&["check", "recheck", "trials"]), stage(&["time"]));
    if c + m > job {
        let scale = job / (c + m);
        (c, m) = (c * scale, m * scale);
    }
    vec![(start, (job - c - m).max(0.0)), (check, c), (time, m)]
}

/// The fields of `object` named in `names` that are numbers in [0, 10^6) (what an answer's
/// process reports of itself: anything else is dropped).
pub(crate) fn known_figures(object: &Value, names: &[&str]) -> BTreeMap<String, f64> {
    object
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| names.contains(&k.as_str()))
        .filter_map(|(k, s)| Some((k.clone(), s.as_f64()?)))
        .filter(|(_, s)| s.is_finite() && (0.0..1e6).contains(s))
        .collect()
}

/// The stage names a protocol's child may report (`stages_s`); others are dropped.
pub(crate) const STAGES: [&str; 9] = [
    "cuda_init",
    "load",
    "oracle",
    "compile",
    "check",
    "time",
    "recheck",
    "trials",
    "import",
];

fn f64_of(v: &Value) -> Option<f64> {
    v.as_f64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
}

/// KernelBench's verdict from its protocol's outcome.
pub(crate) fn kernelbench_verdict(kb: &Outcome) -> KernelBenchVerdict {
    match kb {
        Outcome::Result(v) => KernelBenchVerdict {
            passed: v["passed"].as_bool().unwrap_or(false),
            compiled: v["compiled"].as_bool().unwrap_or(false),
            passed_trials: v["passed_trials"].as_u64().unwrap_or(0) as usize,
            trials: v["trials"].as_u64().unwrap_or(0) as usize,
            atol: f64_of(&v["atol"]).unwrap_or(f64::NAN),
            rtol: f64_of(&v["rtol"]).unwrap_or(f64::NAN),
            max_abs_diff: f64_of(&v["max_abs_diff"]),
            runtime_ms: f64_of(&v["runtime_ms"]),
            ref_runtime_ms: f64_of(&v["ref_runtime_ms"]),
            speedup: f64_of(&v["speedup"]),
            message: v["message"].as_str().unwrap_or("").to_string(),
            ref_runtime_source: Some("the answer's job".into()),
        },
        Outcome::Timeout(s) => KernelBenchVerdict {
            message: format!("KernelBench's protocol ran past {s:.0} s and was killed"),
            ..KernelBenchVerdict::default()
        },
        Outcome::Failed(why) => KernelBenchVerdict {
            message: why.clone(),
            ..KernelBenchVerdict::default()
        },
    }
}

/// The record of `answer` from both protocols' outcomes and the run's `reference` record of its
/// problem (its work, floor and median time). The suite's protocol decides the status; a
/// correct answer faster than the physical floor is `suspect`. The speedup over the reference
/// is the ratio of medians measured in two processes (unpaired: its interval is the two timings'
/// spreads, [`unpaired_speedup`]); the speedup over eager is paired (`speedup_eager`).
pub(crate) fn answer_record(
    answer: &Answer,
    ours: &Outcome,
    kb: &Outcome,
    reference: Option<&Record>,
    ceilings: Option<Ceilings>,
    win_threshold: f64,
) -> Record {
    let mut r = Record::new(
        answer.problem,
        &answer.name(),
        &answer.group,
        &answer.origin(),
    );
    r.kernelbench = Some(kernelbench_verdict(kb));
    r.answer_stages = answer_stages(ours, kb);
    r.work = reference.and_then(|x| x.work);
    r.floor_ms = reference.and_then(|x| x.floor_ms);
    let v = match ours {
        Outcome::Result(v) => v,
        Outcome::Timeout(s) => {
            r.status = Status::Timeout;
            r.message = format!(
                "the evaluator ran past {s:.0} s (loading, compiling, checking and timing the \
                 answer) and was killed"
            );
            return r;
        }
        Outcome::Failed(why) => {
            r.status = Status::RuntimeError;
            r.message = why.clone();
            return r;
        }
    };
    r.status = v["status"]
        .as_str()
        .and_then(Status::parse)
        .unwrap_or(Status::RuntimeError);
    r.message = v["message"].as_str().unwrap_or("").to_string();
    if r.status != Status::Correct {
        return r;
    }
    let samples: Vec<f64> = v["answer_ms"]
        .as_array()
        .map(|a| a.iter().filter_map(f64_of).collect())
        .unwrap_or_default();
    let eager_median = f64_of(&v["eager_timing"]["median_ms"]);
    if let (false, Some(work)) = (samples.is_empty(), &r.work) {
        let t = timing_stats(&samples, work, ceilings);
        if let Some(reft) = reference.and_then(|x| x.timing.as_ref()) {
            r.speedup = Some(unpaired_speedup(reft, &t));
            r.reference_timing = Some(reft.clone());
            if let Some(e) = eager_median {
                r.pytorch = Some(PeerTime {
                    median_ms: e,
                    reference_over_pytorch: reft.median_ms / e,
                    source: "kernelbench_eval.py (eager timed in the answer's process)".into(),
                    p10_ms: f64_of(&v["eager_timing"]["p10_ms"]),
                    p90_ms: f64_of(&v["eager_timing"]["p90_ms"]),
                });
            }
        }
        r.timing = Some(t);
    }
    r.timed_runs_checked = v
        .get("timed_runs_checked")
        .and_then(|n| n.as_u64())
        .map(|n| n as usize);
    if let Some(s) = v.get("speedup_eager").filter(|s| s.is_object()) {
        r.speedup_eager = Some(Speedup {
            median: f64_of(&s["median"]).unwrap_or(f64::NAN),
            ci_low: f64_of(&s["ci_low"]).unwrap_or(f64::NAN),
            ci_high: f64_of(&s["ci_high"]).unwrap_or(f64::NAN),
            pairs: s["pairs"].as_u64().unwrap_or(0) as usize,
        });
    }
    if let (Some(floor), Some(t)) = (r.floor_ms, &r.timing) {
        if t.median_ms < floor {
            r.status = Status::Suspect;
            r.message = format!(
                "median {:.4} ms is below the physical floor {floor:.4} ms: impossible, not \
                 counted as a win",
                t.median_ms
            );
        }
    }
    r.win =
        r.status == Status::Correct && r.speedup.as_ref().is_some_and(|s| s.ci_low > win_threshold);
    r
}

/// Both protocols' `stages_s` (known names, seconds in [0, 10^6)), by protocol, and our
/// protocol's `hidden_work` figures (the medians of host span less event span, answer's and
/// eager's, and the bound: milliseconds, for calibrating that check); `None` when there are none.
fn answer_stages(ours: &Outcome, kb: &Outcome) -> Option<BTreeMap<String, BTreeMap<String, f64>>> {
    let figures = |o: &Outcome, field: &str, names: &[&str]| -> BTreeMap<String, f64> {
        match o {
            Outcome::Result(v) => known_figures(&v[field], names),
            _ => BTreeMap::new(),
        }
    };
    let hidden = ["answer_gap_ms", "eager_gap_ms", "bound_ms"];
    let all: BTreeMap<String, BTreeMap<String, f64>> = [
        ("ours", figures(ours, "stages_s", &STAGES)),
        ("kernelbench", figures(kb, "stages_s", &STAGES)),
        ("hidden_work", figures(ours, "hidden_work", &hidden)),
    ]
    .into_iter()
    .map(|(name, f)| (name.to_string(), f))
    .filter(|(_, f)| !f.is_empty())
    .collect();
    (!all.is_empty()).then_some(all)
}

/// The answer's speedup over the reference, timed in two processes (so unpaired): the ratio of
/// medians, within the interval of the two spreads — the reference's p10 over the answer's p90 to
/// its p90 over the answer's p10. A win needs the interval's low end above the threshold, as a
/// paired speedup's 95% bound must be: two timings of the same work, a few percent apart by noise,
/// are no win.
fn unpaired_speedup(reference: &Timing, answer: &Timing) -> Speedup {
    let usable = |t: &Timing| {
        t.samples >= MIN_UNPAIRED_SAMPLES
            && [t.median_ms, t.p10_ms, t.p90_ms]
                .iter()
                .all(|v| v.is_finite() && *v > 0.0)
    };
    let median = reference.median_ms / answer.median_ms;
    if !(usable(reference) && usable(answer)) {
        // Too few times, or a zero or non-finite one: no interval, so no win (and nothing that
        // a results file could not hold: JSON has no infinity).
        return Speedup {
            median: if median.is_finite() { median } else { 0.0 },
            ci_low: 0.0,
            ci_high: 0.0,
            pairs: 0,
        };
    }
    Speedup {
        median,
        ci_low: reference.p10_ms / answer.p90_ms,
        ci_high: reference.p90_ms / answer.p10_ms,
        pairs: 0,
    }
}

/// The fewest times a spread (p10, p90) is taken from for an unpaired win.
pub(crate) const MIN_UNPAIRED_SAMPLES: usize = 5;

/// The record of an answer that was not evaluated (`why`: no torch, no GPU, missing inputs).
pub(crate) fn skipped_record(answer: &Answer, why: &str) -> Record {
    let mut r = Record::new(
        answer.problem,
        &answer.name(),
        &answer.group,
        &answer.origin(),
    );
    r.status = Status::Skipped;
    r.message = why.to_string();
    r
}

/// The answers' two verdicts side by side (markdown), and the count of answers KernelBench's
/// protocol passes and the suite's rejects; `None` when `records` hold no KernelBench answer.
pub(crate) fn verdicts_markdown(records: &[Record]) -> Option<String> {
    let answers: Vec<&Record> = records.iter().filter(|r| r.kernelbench.is_some()).collect();
    if answers.is_empty() {
        return None;
    }
    let ms = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.3}"));
    let mut s = String::from(
        "| problem | group | ours | KernelBench (allclose 1e-2, trials) | KernelBench speedup \
         (means) | ours over eager [95% CI] | ours over reference |\n| --- | --- | --- | --- | \
         --- | --- | --- |\n",
    );
    let mut holes = Vec::new();
    for r in &answers {
        let kb = r.kernelbench.as_ref().expect("filtered");
        let kb_text = if kb.passed {
            format!("passed ({}/{})", kb.passed_trials, kb.trials)
        } else if !kb.compiled {
            "did not compile or load".to_string()
        } else {
            format!("failed ({}/{})", kb.passed_trials, kb.trials)
        };
        let eager = r.speedup_eager.as_ref().map_or("-".to_string(), |e| {
            format!("{:.3} [{:.3}, {:.3}]", e.median, e.ci_low, e.ci_high)
        });
        s += &format!(
            "| {} | {} | {} | {kb_text} | {} | {eager} | {} |\n",
            r.problem,
            r.group,
            r.status.name(),
            ms(kb.speedup),
            ms(r.speedup.as_ref().map(|x| x.median)),
        );
        if kb.passed && !matches!(r.status, Status::Correct) {
            holes.push(format!(
                "`{}/{}` ({}: {})",
                r.group,
                r.problem,
                r.status.name(),
                r.message.lines().next().unwrap_or("")
            ));
        }
    }
    let passed = answers
        .iter()
        .filter(|r| r.kernelbench.as_ref().is_some_and(|k| k.passed))
        .count();
    s += &format!(
        "\nKernelBench's protocol passes {passed} of {} answers; {} of them are rejected by ours{}\n",
        answers.len(),
        holes.len(),
        if holes.is_empty() {
            ".".to_string()
        } else {
            format!(":\n\n{}", holes.iter().map(|h| format!("- {h}\n")).collect::<String>())
        }
    );
    Some(s)
}

#[cfg(test)]
mod tests;
