//! Every tuned candidate is correct on the CPU emulator at each of its problem's `full` shapes,
//! scaled down to `ci`: the shape's widths and recipe knobs (D, F, K, L, W, T, P, POOL) on the
//! `ci` sizes, whose counts (E, B, N) stay small. `ci` itself runs two shapes per problem; this
//! is what tells, without a GPU, that a tuned kernel (and the reference) is not tied to the
//! default width — a kernel that assumed D = 128 would fail here at D = 32 or 256.
use bench_problems::{all_problems, AtShape, Preset, Problem, Shape, DEFAULT_SHAPE};
use dlrm_bench::backend::emu::EmuBackend;
use dlrm_bench::candidate::load_candidate;
use dlrm_bench::evaluate::{EvalConfig, ProblemRun};
use dlrm_bench::results::record::Status;
use std::path::Path;

/// Size symbols a shape may carry to `ci` unchanged: widths and knobs, not counts.
const WIDTHS: [&str; 8] = ["D", "F", "K", "L", "W", "T", "P", "POOL"];

/// `problem`'s full shapes other than the default, as `ci` sizes with their widths.
fn scaled_shapes(problem: &dyn Problem) -> Vec<Shape> {
    let ci = problem.sizes(Preset::Ci);
    let full = problem.sizes(Preset::Full);
    let mut out: Vec<Shape> = Vec::new();
    for shape in problem.shapes(Preset::Full).into_iter().skip(1) {
        let mut sizes = ci.clone();
        for (k, v) in &shape.sizes {
            if WIDTHS.contains(&k.as_str()) && full.get(k) != Some(v) {
                sizes.insert(k.clone(), *v);
            }
        }
        if sizes != ci && !out.iter().any(|s| s.sizes == sizes) {
            out.push(Shape {
                name: format!("{} at ci", shape.name),
                sizes,
                about: shape.about,
            });
        }
    }
    out
}

#[test]
fn every_tuned_candidate_is_correct_at_every_shape_scaled_to_ci() {
    let tuned = Path::new(env!("CARGO_MANIFEST_DIR")).join("../candidates/tuned");
    let mut checked = 0;
    for problem in all_problems() {
        let cand = load_candidate(&tuned.join(problem.name()))
            .unwrap_or_else(|e| panic!("{}: {e}", problem.name()));
        for shape in scaled_shapes(problem) {
            let what = format!("{} {} {:?}", problem.name(), shape.name, shape.sizes);
            let at: &'static dyn Problem = Box::leak(Box::new(AtShape::new(problem, shape)));
            let mut backend = EmuBackend::new();
            let mut run =
                ProblemRun::prepare(&mut backend, at, EvalConfig::quick_ci(5, 6), None, None)
                    .unwrap_or_else(|e| panic!("{what}: {e:#}"));
            let reference = run.reference_record();
            assert_eq!(
                reference.status,
                Status::Correct,
                "{what}: the reference: {}",
                reference.message
            );
            let rec = run.evaluate(&cand);
            run.release();
            assert_eq!(rec.status, Status::Correct, "{what}: {}", rec.message);
            checked += 1;
        }
    }
    assert!(checked >= 24, "only {checked} scaled shapes");
}

#[test]
fn the_default_shape_is_never_among_the_scaled_ones() {
    for problem in all_problems() {
        let ci = problem.sizes(Preset::Ci);
        for s in scaled_shapes(problem) {
            assert_ne!(s.sizes, ci, "{}", problem.name());
            assert!(!s.name.starts_with(DEFAULT_SHAPE));
        }
    }
}
