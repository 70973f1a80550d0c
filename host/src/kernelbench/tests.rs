//! Tests of [`super`]: answers discovered, requests, verdicts (the sandboxed evaluator's are in
//! host/tests/sandbox.rs).

use super::*;
use crate::results::record::Timing;
use bench_problems::Work;

fn answer() -> Answer {
    Answer {
        problem: "embedding_bag_sum",
        file: PathBuf::from("/x/demo/01_embedding_bag_sum.py"),
        group: "demo".into(),
    }
}

fn reference(median_ms: f64, floor_ms: f64) -> Record {
    let mut r = Record::new("embedding_bag_sum", "reference", "reference", "reference");
    r.status = Status::Correct;
    r.work = Some(Work {
        compulsory_bytes: 1e9,
        logical_bytes: 2e9,
        flops: 0.0,
        gathered: None,
    });
    r.floor_ms = Some(floor_ms);
    r.timing = Some(Timing {
        median_ms,
        p10_ms: 0.98 * median_ms,
        p90_ms: 1.02 * median_ms,
        samples: 40,
        ..Timing::default()
    });
    r
}

fn ours(status: &str, answer_ms: &[f64]) -> Outcome {
    Outcome::Result(json!({
        "status": status, "message": if status == "correct" { "" } else { "public-1: off" },
        "answer_ms": answer_ms,
        "eager_timing": {"median_ms": 1.5},
        "speedup_eager": {"median": 1.4, "ci_low": 1.3, "ci_high": 1.45, "pairs": 30},
    }))
}

fn kb(passed: bool) -> Outcome {
    Outcome::Result(
        json!({"passed": passed, "compiled": true, "passed_trials": 5,
                               "trials": 5, "atol": 0.01, "rtol": 0.01, "max_abs_diff": "inf",
                               "speedup": 2.0, "message": ""}),
    )
}

#[test]
fn names_give_the_problem_by_number_and_name_or_say_what_is_wrong() {
    let p = |s: &str| problem_of(Path::new(s)).map(|p| p.name());
    assert_eq!(p("d/01_embedding_bag_sum.py"), Ok("embedding_bag_sum"));
    assert_eq!(p("d/fm_interaction.py"), Ok("fm_interaction"));
    assert_eq!(p("d/12_fm_interaction.py"), Ok("fm_interaction"));
    let wrong = p("d/03_embedding_bag_sum.py").unwrap_err();
    assert!(
        wrong.contains("number 3 does not match problem 1"),
        "{wrong}"
    );
    let unknown = p("d/07_bag_of_words.py").unwrap_err();
    assert!(
        unknown.contains("`bag_of_words` is not a problem"),
        "{unknown}"
    );
}

#[test]
fn discovery_groups_by_directory_and_reports_bad_files_without_stopping() {
    let root = std::env::temp_dir().join(format!("kb-discover-{}", std::process::id()));
    let a = root.join("model_a");
    let b = root.join("model_b");
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    std::fs::write(a.join("01_embedding_bag_sum.py"), "").unwrap();
    std::fs::write(a.join("embedding_bag_sum.py"), "").unwrap(); // a second answer to p1
    std::fs::write(a.join("notes.txt"), "").unwrap(); // ignored
    std::fs::write(b.join("12_fm_interaction.py"), "").unwrap();
    std::fs::write(b.join("99_nothing.py"), "").unwrap();
    let (answers, errors) = discover(&[a.clone(), b.clone(), root.join("missing")]);
    std::fs::remove_dir_all(&root).unwrap();
    let got: Vec<(&str, &str)> = answers
        .iter()
        .map(|x| (x.group.as_str(), x.problem))
        .collect();
    assert_eq!(
        got,
        [
            ("model_a", "embedding_bag_sum"),
            ("model_b", "fm_interaction")
        ]
    );
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert_eq!(errors[0].0, a.join("embedding_bag_sum.py"));
    assert!(errors[0].1.contains("a second answer to embedding_bag_sum"));
    assert_eq!(errors[1].0, b.join("99_nothing.py"));
    assert!(errors[1].1.contains("`nothing` is not a problem"));
    assert!(errors[2].1.contains("missing: not a readable directory"));
}

#[test]
fn a_correct_answer_gets_both_bases_and_kernelbenchs_verdict() {
    let r = answer_record(
        &answer(),
        &ours("correct", &[0.5, 0.4, 0.6, 0.45, 0.55]),
        &kb(true),
        Some(&reference(1.0, 0.1)),
        None,
        1.0,
    );
    assert_eq!(r.status, Status::Correct);
    assert_eq!(r.origin, "kernelbench:/x/demo/01_embedding_bag_sum.py");
    assert_eq!(
        (r.group.as_str(), r.candidate.as_str()),
        ("demo", "01_embedding_bag_sum")
    );
    // Reference basis: 1.0 ms / the median 0.5 ms, unpaired; its interval the spreads':
    // 0.98 / p90 to 1.02 / p10 of the answer's samples.
    let s = r.speedup.as_ref().unwrap();
    assert_eq!((s.median, s.pairs), (2.0, 0));
    let t = r.timing.as_ref().unwrap();
    assert!(
        s.ci_low == 0.98 / t.p90_ms && s.ci_high == 1.02 / t.p10_ms,
        "{s:?}"
    );
    assert!(s.ci_low > 1.0 && r.win);
    assert_eq!(r.speedup_eager.as_ref().unwrap().ci_low, 1.3);
    assert_eq!(r.pytorch.as_ref().unwrap().median_ms, 1.5);
    // Logical bytes 2e9 in 0.5 ms.
    assert!((r.timing.as_ref().unwrap().logical_gbps - 4000.0).abs() < 1e-9);
    let v = r.kernelbench.as_ref().unwrap();
    assert!(v.passed && v.compiled);
    assert_eq!(v.max_abs_diff, Some(f64::INFINITY));
}

#[test]
fn a_few_percent_faster_within_the_noise_is_no_win_over_the_reference() {
    // The answer's median is 2% below the reference's, but its spread overlaps the reference's
    // (timed in another process): the ratio of medians is above 1, its low end is not.
    let r = answer_record(
        &answer(),
        &ours("correct", &[0.96, 0.98, 1.0, 0.97, 0.99]),
        &kb(true),
        Some(&reference(1.0, 0.1)),
        None,
        1.0,
    );
    let s = r.speedup.as_ref().unwrap();
    assert!(s.median > 1.0 && s.ci_low < 1.0, "{s:?}");
    assert_eq!(r.status, Status::Correct);
    assert!(!r.win);
}

#[test]
fn too_few_or_zero_times_give_no_interval_and_no_win() {
    for samples in [&[0.5, 0.4][..], &[0.0, 0.0, 0.0, 0.0, 0.0, 0.5][..]] {
        let r = answer_record(
            &answer(),
            &ours("correct", samples),
            &kb(true),
            Some(&reference(1.0, 0.0001)),
            None,
            1.0,
        );
        let s = r.speedup.as_ref().unwrap();
        assert!(!r.win, "{samples:?}: {s:?}");
        assert!(s.ci_low.is_finite() && s.ci_high.is_finite() && s.median.is_finite());
    }
}

#[test]
fn faster_than_the_floor_is_suspect_and_not_a_win() {
    let r = answer_record(
        &answer(),
        &ours("correct", &[0.05, 0.05, 0.05]),
        &kb(true),
        Some(&reference(1.0, 0.1)),
        None,
        1.0,
    );
    assert_eq!(r.status, Status::Suspect);
    assert!(
        r.message.contains("below the physical floor"),
        "{}",
        r.message
    );
    assert!(!r.win);
}

#[test]
fn our_rejection_stands_beside_kernelbenchs_pass() {
    let r = answer_record(
        &answer(),
        &ours("incorrect", &[]),
        &kb(true),
        Some(&reference(1.0, 0.1)),
        None,
        1.0,
    );
    assert_eq!(r.status, Status::Incorrect);
    assert_eq!(r.message, "public-1: off");
    assert!(r.speedup.is_none() && !r.win);
    assert!(r.kernelbench.as_ref().unwrap().passed);
}

#[test]
fn a_killed_or_crashed_evaluator_is_a_timeout_or_a_runtime_error() {
    let t = answer_record(
        &answer(),
        &Outcome::Timeout(600.0),
        &Outcome::Timeout(600.0),
        None,
        None,
        1.0,
    );
    assert_eq!(t.status, Status::Timeout);
    assert!(t.kernelbench.as_ref().unwrap().message.contains("600 s"));
    let c = answer_record(
        &answer(),
        &Outcome::Failed("killed by signal 11".into()),
        &kb(false),
        None,
        None,
        1.0,
    );
    assert_eq!(c.status, Status::RuntimeError);
    assert_eq!(c.message, "killed by signal 11");
}

#[test]
fn the_verdict_table_counts_what_kernelbench_passes_and_we_reject() {
    let reference = reference(1.0, 0.1);
    let mut other = answer();
    other.group = "partial".into();
    let records = [
        answer_record(
            &answer(),
            &ours("correct", &[0.5]),
            &kb(true),
            Some(&reference),
            None,
            1.0,
        ),
        answer_record(
            &other,
            &ours("incorrect", &[]),
            &kb(true),
            Some(&reference),
            None,
            1.0,
        ),
        reference.clone(),
    ];
    let md = verdicts_markdown(&records).unwrap();
    assert!(md.contains("| embedding_bag_sum | demo | correct | passed (5/5) | 2.000 | 1.400 [1.300, 1.450] | 2.000 |"), "{md}");
    assert!(
        md.contains("passes 2 of 2 answers; 1 of them are rejected by ours:"),
        "{md}"
    );
    assert!(
        md.contains("- `partial/embedding_bag_sum` (incorrect: public-1: off)"),
        "{md}"
    );
    assert!(verdicts_markdown(&records[2..]).is_none());
}

#[test]
fn the_request_carries_every_check_set_and_the_float_bounds_by_dtype() {
    let p = bench_problems::find_problem("tbe_forward_fp16").unwrap();
    let cfg = EvalConfig::quick_ci(1, 2);
    let cache = InputCache::new(Path::new("/cache"), p);
    let req = request(p, &answer(), &cfg, &cache);
    let labels: Vec<&str> = req["check_sets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["label"].as_str().unwrap())
        .collect();
    assert_eq!(&labels[..3], ["public-0", "public-1", "secret-0"]);
    // The timing's sets are the secret ones (the answer first meets them in a timed call).
    let time_sets: Vec<&str> = req["time_sets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(time_sets.len(), 1);
    assert!(time_sets[0].contains("secret-0"), "{time_sets:?}");
    // tbe_forward_fp16 reads fp16 tables into an fp32 output with its own bound (eager's
    // fp16 round trip), not the fp32 default's 1e-5 / 1e-4.
    assert_eq!(req["bounds"], json!({"float32": [6e-4, 1e-3]}));
}

#[test]
fn the_request_names_the_row_ids_relabeled_in_timing_with_the_shapes_bound() {
    let cfg = EvalConfig::quick_ci(1, 2);
    let bag = bench_problems::find_problem("embedding_bag_sum").unwrap();
    // At a shape other than the default, the bound is that shape's table rows.
    let shapes = bag.shapes(cfg.preset);
    let other = shapes
        .iter()
        .find(|s| s.name != bench_problems::DEFAULT_SHAPE);
    assert!(
        other.is_some(),
        "embedding_bag_sum has shapes besides the default"
    );
    for shape in std::iter::once(None).chain(other.map(Some)) {
        let p: &'static dyn bench_problems::Problem = match shape {
            None => bag,
            Some(s) => Box::leak(Box::new(bench_problems::shapes::AtShape::new(
                bag,
                s.clone(),
            ))),
        };
        let cache = InputCache::new(Path::new("/cache"), p);
        let req = request(p, &answer(), &cfg, &cache);
        let rows = p.sizes(cfg.preset)["E"];
        assert_eq!(req["relabel"], json!([{"name": "indices", "bound": rows}]));
    }
    // A problem with no relabelable ids asks for none.
    let dot = bench_problems::find_problem("dot_interaction").unwrap();
    let cache = InputCache::new(Path::new("/cache"), dot);
    assert_eq!(request(dot, &answer(), &cfg, &cache)["relabel"], json!([]));
}

#[test]
fn a_jobs_seconds_go_to_its_protocols_start_checks_and_timing_and_add_up() {
    let times = |job_s: f64, stages: &[(&str, f64)]| JobTimes {
        job_s,
        start_s: 0.0,
        stages: stages.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
    };
    let of = |v: &[(Phase, f64)], p: Phase| v.iter().find(|(q, _)| *q == p).map(|x| x.1);
    let t = times(
        10.0,
        &[
            ("load", 2.0),
            ("check", 2.0),
            ("recheck", 1.0),
            ("time", 3.0),
        ],
    );
    let v = job_phases("ours", &t);
    assert_eq!(of(&v, Phase::AnswerOurs), Some(4.0));
    assert_eq!(of(&v, Phase::AnswerOursCheck), Some(3.0));
    assert_eq!(of(&v, Phase::AnswerOursTime), Some(3.0));
    let v = job_phases(
        "kernelbench",
        &times(5.0, &[("trials", 1.5), ("time", 0.5)]),
    );
    assert_eq!(of(&v, Phase::AnswerKernelBench), Some(3.0));
    assert_eq!(of(&v, Phase::AnswerKernelBenchCheck), Some(1.5));
    assert_eq!(of(&v, Phase::AnswerKernelBenchTime), Some(0.5));
    // An answer's process that claims more than the job's wall time: each stage is capped at
    // the job, then both are scaled to fit it: the phases still add up to the job.
    let v = job_phases("ours", &times(4.0, &[("check", 30.0), ("time", 1.0)]));
    assert_eq!(of(&v, Phase::AnswerOurs), Some(0.0));
    assert!((of(&v, Phase::AnswerOursCheck).unwrap() - 3.2).abs() < 1e-12);
    assert!((of(&v, Phase::AnswerOursTime).unwrap() - 0.8).abs() < 1e-12);
    // Claims that add up past any float (1e308 twice) or are not numbers: no NaN, no
    // infinity, nothing negative, the total still the job's.
    let v = job_phases(
        "ours",
        &times(
            3.0,
            &[
                ("check", 1e308),
                ("recheck", 1e308),
                ("time", f64::INFINITY),
            ],
        ),
    );
    assert!(v.iter().all(|x| x.1.is_finite() && x.1 >= 0.0), "{v:?}");
    assert!(
        (v.iter().map(|x| x.1).sum::<f64>() - 3.0).abs() < 1e-9,
        "{v:?}"
    );
    // No account (a crash): all of it is the start phase.
    let v = job_phases("ours", &times(2.5, &[]));
    assert_eq!(v.iter().map(|x| x.1).sum::<f64>(), 2.5);
    assert_eq!(of(&v, Phase::AnswerOurs), Some(2.5));
}

#[test]
fn each_protocols_stages_are_kept_on_the_record_without_bad_figures() {
    let mut o = ours("correct", &[1.0; 30]);
    if let Outcome::Result(v) = &mut o {
        v["stages_s"] = json!({"cuda_init": 0.4, "load": 1.25, "check": -1.0, "time": "x",
                               "recheck": 1e300, "made_up": 1.0});
        v["hidden_work"] = json!({"answer_gap_ms": 0.02, "eager_gap_ms": 0.018, "x": 1.0});
    }
    let k = Outcome::Result(json!({"passed": true, "stages_s": {"trials": 0.5}}));
    let r = answer_record(&answer(), &o, &k, Some(&reference(1.0, 0.1)), None, 1.0);
    let stages = r.answer_stages.expect("stages kept");
    assert_eq!(
        stages["ours"],
        BTreeMap::from([("cuda_init".to_string(), 0.4), ("load".to_string(), 1.25)])
    );
    assert_eq!(stages["kernelbench"]["trials"], 0.5);
    assert_eq!(
        stages["hidden_work"],
        BTreeMap::from([
            ("answer_gap_ms".to_string(), 0.02),
            ("eager_gap_ms".to_string(), 0.018)
        ])
    );
    // A protocol that reported none (a crash, a timeout) has no entry.
    let r = answer_record(
        &answer(),
        &Outcome::Timeout(60.0),
        &kb(true),
        Some(&reference(1.0, 0.1)),
        None,
        1.0,
    );
    assert!(r.answer_stages.is_none());
}

#[test]
fn the_problems_baseline_replaces_what_the_answers_process_said_of_the_model() {
    let verdict = |passed: bool, runtime: Option<f64>| {
        let mut v = kernelbench_verdict(&kb(passed));
        v.runtime_ms = runtime;
        v.ref_runtime_ms = Some(0.001); // what an answer's process might claim
        v.speedup = Some(1e6);
        v
    };
    let v = with_baseline(verdict(true, Some(2.0)), Some(5.0));
    assert_eq!((v.ref_runtime_ms, v.speedup), (Some(5.0), Some(2.5)));
    assert_eq!(v.ref_runtime_source.as_deref(), Some("baseline"));
    // No baseline (its job failed): the job's own figures stand, and say so.
    let v = with_baseline(verdict(true, Some(2.0)), None);
    assert_eq!((v.ref_runtime_ms, v.speedup), (Some(0.001), Some(1e6)));
    assert_eq!(v.ref_runtime_source.as_deref(), Some("the answer's job"));
    // Failed trials, or no usable time of the answer: the claim is dropped, no speedup.
    for (passed, runtime) in [
        (false, Some(2.0)),
        (true, None),
        (true, Some(0.0)),
        (true, Some(f64::NAN)),
    ] {
        let v = with_baseline(verdict(passed, runtime), Some(5.0));
        assert_eq!(
            (v.ref_runtime_ms, v.speedup),
            (Some(5.0), None),
            "{passed} {runtime:?}"
        );
    }
}
