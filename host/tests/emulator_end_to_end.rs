//! End to end on the CPU emulator at `ci` size: every problem's reference and every Rust
//! candidate pass the full check (poisoned outputs, public, secret and edge input sets, input
//! fingerprints, timed-output recheck), and a deliberately broken plan is caught.
//!
//! A custom harness (`libtest-mimic`): one trial per registered problem, named after it, plus
//! two more. One problem alone:
//!
//!     cargo test -p dlrm-bench --test emulator_end_to_end -- embedding_bag_sum
//!
//! (As with the standard harness the filter matches names as substrings; `--exact` takes whole
//! names only, `--list` names the trials.)
use bench_problems::{all_problems, Dim, Problem};
use dlrm_bench::backend::emu::EmuBackend;
use dlrm_bench::candidate::{reference_candidate, Candidate, CandidateError, ModuleSource};
use dlrm_bench::evaluate::{EvalConfig, ProblemRun};
use dlrm_bench::results::record::Status;
use dlrm_bench::runner::load_all;
use libtest_mimic::{Arguments, Trial};
use std::path::PathBuf;
use std::sync::Arc;

fn main() {
    let args = Arguments::from_args();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../candidates");
    let candidates = Arc::new(load_all(&[root]));
    let mut trials: Vec<Trial> = all_problems()
        .into_iter()
        .map(|problem| {
            let candidates = candidates.clone();
            Trial::test(problem.name(), move || {
                reference_and_rust_candidates_pass_every_check(problem, &candidates);
                Ok(())
            })
        })
        .collect();
    trials.push(Trial::test(
        "cuda_candidates_are_skipped_on_the_emulator_not_failed",
        || {
            cuda_candidates_are_skipped_on_the_emulator_not_failed();
            Ok(())
        },
    ));
    trials.push(Trial::test(
        "a_plan_that_covers_half_the_bags_is_incorrect",
        || {
            a_plan_that_covers_half_the_bags_is_incorrect();
            Ok(())
        },
    ));
    libtest_mimic::run(&args, trials).exit();
}

fn config() -> EvalConfig {
    EvalConfig::quick_ci(7, 99)
}

/// The problem's reference, then each of its Rust candidates (`candidates/`), pass.
fn reference_and_rust_candidates_pass_every_check(
    problem: &'static dyn Problem,
    (candidates, invalid): &(Vec<Candidate>, Vec<CandidateError>),
) {
    assert!(invalid.is_empty(), "{invalid:?}");
    let mut backend = EmuBackend::new();
    let mut run = ProblemRun::prepare(&mut backend, problem, config(), None, None).unwrap();
    let reference = run.reference_record();
    assert_eq!(
        reference.status,
        Status::Correct,
        "{}: {}",
        problem.name(),
        reference.message
    );
    assert!(reference.checks.iter().any(|c| c.set.starts_with("secret")));
    assert!(reference.checks.iter().any(|c| c.set.starts_with("edge")));
    let rust: Vec<_> = candidates
        .iter()
        .filter(|c| c.problem == problem.name() && c.source == ModuleSource::Builtin)
        .collect();
    for cand in rust {
        let rec = run.evaluate(cand);
        assert_eq!(
            rec.status,
            Status::Correct,
            "{}/{}: {}",
            problem.name(),
            cand.name,
            rec.message
        );
        assert!(
            rec.checks.iter().any(|c| c.set.starts_with("recheck")),
            "timed outputs are rechecked"
        );
        assert!(rec.speedup.is_some());
    }
    run.release();
}

fn cuda_candidates_are_skipped_on_the_emulator_not_failed() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../candidates/examples");
    let (candidates, _) = load_all(&[root]);
    // CUDA C++, a Triton function, a cubin not built yet (a fresh clone has none).
    type Kind = fn(&ModuleSource) -> bool;
    let kinds: [(Kind, &str); 3] = [
        (|s| matches!(s, ModuleSource::Cuda { .. }), "needs a GPU"),
        (
            |s| matches!(s, ModuleSource::Triton { .. }),
            "needs a GPU and Triton",
        ),
        (
            |s| {
                matches!(
                    s,
                    ModuleSource::Unavailable { .. } | ModuleSource::Binary { .. }
                )
            },
            "cubin",
        ),
    ];
    for (kind, why) in kinds {
        let cand = candidates
            .iter()
            .find(|c| kind(&c.source))
            .expect("an example");
        let problem = bench_problems::find_problem(&cand.problem).unwrap();
        let mut backend = EmuBackend::new();
        let mut run = ProblemRun::prepare(&mut backend, problem, config(), None, None).unwrap();
        run.reference_record();
        let rec = run.evaluate(cand);
        assert_eq!(
            rec.status,
            Status::Skipped,
            "{}: {}",
            cand.name,
            rec.message
        );
        assert!(rec.message.contains(why), "{}: {}", cand.name, rec.message);
    }
}

fn a_plan_that_covers_half_the_bags_is_incorrect() {
    // The reference kernel with half the blocks and no grid-stride coverage of the rest: some
    // bags are never written, so poison is left and the check must say so.
    let problem = bench_problems::find_problem("embedding_bag_sum").unwrap();
    let mut partial = reference_candidate(problem);
    partial.name = "half_the_bags".into();
    partial.group = "test".into();
    partial.launches[0].grid[0] = Dim::Number(1);
    partial.launches[0].args[6] = "B / 2".into();
    let mut backend = EmuBackend::new();
    let mut run = ProblemRun::prepare(&mut backend, problem, config(), None, None).unwrap();
    run.reference_record();
    let rec = run.evaluate(&partial);
    assert_eq!(rec.status, Status::Incorrect);
    assert!(rec.message.contains("never written"), "{}", rec.message);
}
