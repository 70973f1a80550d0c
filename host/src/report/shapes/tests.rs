//! Tests of [`super`]: the combination against hand-computed geometric means.
use super::*;

fn timed(problem: &str, shape: &str, origin: &str, ms: f64, speedup: (f64, f64, f64)) -> Record {
    let group = if origin == "reference" {
        "reference"
    } else {
        "tuned"
    };
    let mut r = Record::new(problem, origin, group, origin);
    r.shape = Some(shape.into());
    r.status = Status::Correct;
    r.timing = Some(Timing {
        median_ms: ms,
        p10_ms: ms * 0.9,
        p90_ms: ms * 1.1,
        samples: 20,
        ..Timing::default()
    });
    r.speedup = Some(Speedup {
        median: speedup.0,
        ci_low: speedup.1,
        ci_high: speedup.2,
        pairs: 20,
    });
    r
}

fn peer(ms: f64) -> PeerTime {
    PeerTime {
        median_ms: ms,
        reference_over_pytorch: 1.0,
        source: "p".into(),
        p10_ms: Some(ms * 0.95),
        p90_ms: Some(ms * 1.05),
    }
}

#[test]
fn speedups_and_times_are_geometric_means_with_the_errors_added_in_quadrature() {
    let records = vec![
        timed("p", "default", "c", 1.0, (2.0, 1.9, 2.1)),
        timed("p", "d32", "c", 4.0, (8.0, 7.6, 8.4)),
    ];
    let out = by_problem(&records, 1.0);
    assert_eq!(out.len(), 1);
    let r = &out[0];
    let s = r.speedup.as_ref().unwrap();
    assert!((s.median - 4.0).abs() < 1e-12, "√(2·8) = 4: {}", s.median);
    // Each side on the log scale: the shapes' distances to their bounds in quadrature, over
    // the two shapes.
    let below = ((2f64 / 1.9).ln().powi(2) + (8f64 / 7.6).ln().powi(2)).sqrt() / 2.0;
    let above = ((2.1f64 / 2.0).ln().powi(2) + (8.4f64 / 8.0).ln().powi(2)).sqrt() / 2.0;
    assert!((s.ci_low - 4.0 * (-below).exp()).abs() < 1e-12);
    assert!((s.ci_high - 4.0 * above.exp()).abs() < 1e-12);
    assert!(s.ci_low < 4.0 && s.ci_low > 3.7, "{}", s.ci_low);
    assert!((r.timing.as_ref().unwrap().median_ms - 2.0).abs() < 1e-12);
    assert!(r.win && r.status == Status::Correct && r.shape.is_none());
    let shapes: Vec<&str> = r.shapes.iter().map(|f| f.shape.as_str()).collect();
    assert_eq!(shapes, ["default", "d32"]);
    assert_eq!(r.shapes[1].speedup.as_ref().unwrap().median, 8.0);
}

#[test]
fn one_failed_shape_fails_the_problem_and_says_which() {
    let mut bad = timed("p", "one-hot", "c", 1.0, (3.0, 2.9, 3.1));
    bad.status = Status::Incorrect;
    bad.message = "out: 12 elements wrong".into();
    let records = vec![timed("p", "default", "c", 1.0, (3.0, 2.9, 3.1)), bad];
    let r = &by_problem(&records, 1.0)[0];
    assert_eq!(r.status, Status::Incorrect);
    assert!(!r.win);
    assert_eq!(r.message, "shape one-hot: out: 12 elements wrong");
}

#[test]
fn a_win_needs_the_geomean_bound_above_the_threshold_not_the_best_shape() {
    // One shape far ahead, one behind: the mean is under the threshold.
    let records = vec![
        timed("p", "default", "c", 1.0, (4.0, 3.9, 4.1)),
        timed("p", "d32", "c", 1.0, (0.2, 0.19, 0.21)),
    ];
    let r = &by_problem(&records, 1.0)[0];
    assert!((r.speedup.as_ref().unwrap().median - (0.8f64).sqrt()).abs() < 1e-12);
    assert!(!r.win);
    let narrow = vec![
        timed("p", "default", "c", 1.0, (1.2, 1.19, 1.21)),
        timed("p", "d32", "c", 1.0, (1.2, 1.19, 1.21)),
    ];
    assert!(by_problem(&narrow, 1.0)[0].win);
    assert!(
        !by_problem(&narrow, 1.25)[0].win,
        "the run's threshold decides"
    );
}

#[test]
fn pytorch_times_come_from_each_shapes_reference_and_a_missing_one_drops_the_basis() {
    let mut ref_a = timed("p", "default", "reference", 2.0, (1.0, 1.0, 1.0));
    ref_a.pytorch = Some(peer(4.0));
    let mut ref_b = timed("p", "d32", "reference", 2.0, (1.0, 1.0, 1.0));
    ref_b.pytorch = Some(peer(16.0));
    let records = vec![
        ref_a.clone(),
        ref_b,
        timed("p", "default", "c", 1.0, (2.0, 1.9, 2.1)),
        timed("p", "d32", "c", 2.0, (1.0, 0.9, 1.1)),
    ];
    let out = by_problem(&records, 1.0);
    let c = out.iter().find(|r| r.origin == "c").unwrap();
    // Eager over the candidate: 4/1 and 16/2, geometric mean √32.
    let eager = Basis::Eager.speedup(c).unwrap();
    assert!((eager - 32f64.sqrt()).abs() < 1e-9, "{eager}");
    assert!((c.shapes[1].over_eager.unwrap() - 8.0).abs() < 1e-12);
    // Without the second shape's eager time, no eager figure for the problem at all.
    let mut ref_b = timed("p", "d32", "reference", 2.0, (1.0, 1.0, 1.0));
    ref_b.pytorch = None;
    let partial = vec![
        ref_a,
        ref_b,
        timed("p", "default", "c", 1.0, (2.0, 1.9, 2.1)),
        timed("p", "d32", "c", 2.0, (1.0, 0.9, 1.1)),
    ];
    let c = by_problem(&partial, 1.0)
        .into_iter()
        .find(|r| r.origin == "c")
        .unwrap();
    assert!(Basis::Eager.speedup(&c).is_none());
}

#[test]
fn a_single_shape_and_other_problems_are_kept_as_they_are() {
    let one = timed("q", "default", "c", 1.0, (2.0, 1.5, 2.5));
    let out = by_problem(std::slice::from_ref(&one), 1.0);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].shape.as_deref(), Some("default"));
    assert!(out[0].shapes.is_empty());
    let two = vec![
        one.clone(),
        timed("r", "default", "c", 1.0, (2.0, 1.5, 2.5)),
    ];
    assert_eq!(by_problem(&two, 1.0).len(), 2);
}

#[test]
fn a_candidate_that_failed_at_one_shape_of_several_is_one_record_naming_the_shape() {
    // It failed at d32 and was not run at the default shape; the reference ran at both.
    let mut bad = timed("p", "d32", "c", 1.0, (3.0, 2.9, 3.1));
    bad.status = Status::Timeout;
    bad.message = "no result within 5 s".into();
    let records = vec![
        timed("p", "default", "reference", 1.0, (1.0, 1.0, 1.0)),
        timed("p", "d32", "reference", 1.0, (1.0, 1.0, 1.0)),
        bad,
    ];
    let out = by_problem(&records, 1.0);
    let c = out.iter().find(|r| r.origin == "c").unwrap();
    assert_eq!(c.status, Status::Timeout);
    assert_eq!(c.message, "shape d32: no result within 5 s");
    assert!(c.shape.is_none() && !c.win);
}

#[test]
fn a_shape_without_an_interval_leaves_the_mean_without_one_and_skew_is_kept() {
    // "No interval, no win" is written as bounds of 0: the mean gets none either.
    let records = vec![
        timed("p", "default", "c", 1.0, (3.0, 0.0, 0.0)),
        timed("p", "d32", "c", 1.0, (3.0, 2.9, 3.1)),
    ];
    let r = &by_problem(&records, 1.0)[0];
    assert_eq!(r.speedup.as_ref().unwrap().ci_low, 0.0);
    assert!(!r.win);
    // A skewed interval keeps its own lower side: two shapes at 1.5 in [1.0, 1.6].
    let skewed = vec![
        timed("p", "default", "c", 1.0, (1.5, 1.0, 1.6)),
        timed("p", "d32", "c", 1.0, (1.5, 1.0, 1.6)),
    ];
    let s = by_problem(&skewed, 1.0)[0].speedup.clone().unwrap();
    let below = (1.5f64.ln() * 2f64.sqrt()) / 2.0;
    let above = ((1.6f64 / 1.5).ln() * 2f64.sqrt()) / 2.0;
    assert!((s.ci_low - 1.5 * (-below).exp()).abs() < 1e-12);
    assert!((s.ci_high - 1.5 * above.exp()).abs() < 1e-12);
}

#[test]
fn a_candidate_measured_at_fewer_shapes_than_its_problem_has_no_verdict() {
    let records = vec![
        timed("p", "default", "reference", 1.0, (1.0, 1.0, 1.0)),
        timed("p", "d32", "reference", 1.0, (1.0, 1.0, 1.0)),
        timed("p", "default", "c", 1.0, (5.0, 4.9, 5.1)),
    ];
    let out = by_problem(&records, 1.0);
    let c = out.iter().find(|r| r.origin == "c").unwrap();
    assert_eq!(c.status, Status::Skipped, "{}", c.message);
    assert!(
        c.message.contains("1 of the problem's 2 shapes (default)"),
        "{}",
        c.message
    );
    assert!(!c.win);
}

#[test]
fn kernelbench_answers_and_each_pooled_group_stand_alone() {
    let mut answer = timed("p", "default", "kernelbench:a.py", 1.0, (2.0, 0.0, 0.0));
    answer.group = "model".into();
    let mut again = answer.clone();
    again.group = "model @ other".into();
    let records = vec![
        timed("p", "default", "reference", 1.0, (1.0, 1.0, 1.0)),
        timed("p", "d32", "reference", 1.0, (1.0, 1.0, 1.0)),
        answer.clone(),
        again,
    ];
    let out = by_problem(&records, 1.0);
    let answers: Vec<&Record> = out.iter().filter(|r| is_answer(r)).collect();
    assert_eq!(answers.len(), 2, "one per group, never averaged together");
    assert_eq!(
        answers[0].speedup.as_ref().unwrap().ci_low,
        0.0,
        "kept as it is"
    );
    assert_eq!(answers[0].shape.as_deref(), Some("default"));
    assert!(!answers[0].win);
}
