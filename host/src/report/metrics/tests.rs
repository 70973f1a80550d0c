//! Tests of [`super`].
use super::*;
use crate::results::record::{PeerTime, Speedup, Timing};

fn rec(problem: &str, status: Status, speedup: f64, win: bool) -> Record {
    let mut r = Record::new(problem, "c", "examples", "x");
    r.status = status;
    r.speedup = Some(Speedup {
        median: speedup,
        ci_low: speedup * 0.99,
        ci_high: speedup * 1.01,
        pairs: 30,
    });
    r.win = win;
    r
}

fn timed(mut r: Record, ms: f64) -> Record {
    r.timing = Some(Timing {
        median_ms: ms,
        ..Default::default()
    });
    r
}

fn eager(ms: f64) -> Option<PeerTime> {
    Some(PeerTime {
        median_ms: ms,
        reference_over_pytorch: 1.0,
        source: "test".into(),
        ..PeerTime::default()
    })
}

fn paired(median: f64, ci_low: f64) -> Option<Speedup> {
    Some(Speedup {
        median,
        ci_low,
        ci_high: median + 0.1,
        pairs: 40,
    })
}

fn reference(problem: &str, eager_ms: Option<f64>) -> Record {
    let mut r = timed(
        Record::new(problem, "reference", "reference", "reference"),
        1.0,
    );
    r.status = Status::Correct;
    r.pytorch = eager_ms.and_then(eager);
    r
}

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 1e-12)
}

#[test]
fn win_rate_and_medians() {
    let records = vec![
        rec("a", Status::Correct, 2.0, true),
        rec("b", Status::Correct, 0.5, false),
        rec("c", Status::Incorrect, 9.0, false),
        rec("d", Status::Suspect, 50.0, false),
    ];
    let m = &summarize(&records, 4, Basis::Reference)[0];
    assert_eq!(m.basis, Basis::Reference);
    assert_eq!(m.wins, 1);
    assert_eq!(m.win_rate, 0.25);
    assert_eq!(m.median_speedup_wins, Some(2.0));
    assert_eq!(m.median_speedup_correct, Some(1.25));
    assert!((m.geomean_speedup_correct.unwrap() - 1.0).abs() < 1e-12);
    assert_eq!(m.correct, 2);
    assert_eq!(m.suspect, 1);
    assert_eq!(m.fast_p["0"], 0.5, "a and b of the 4 problems");
    assert_eq!(
        m.fast_p["1"], 0.25,
        "incorrect and suspect ones never count"
    );
}

#[test]
fn eager_speedup_is_paired_when_present_else_the_unpaired_ratio() {
    let b = Basis::Eager;
    // Unpaired: eager 1.0 ms / candidate 0.5 ms = 2.
    let mut fast = timed(rec("a", Status::Correct, 1.5, true), 0.5);
    fast.pytorch = eager(1.0);
    assert_eq!(b.speedup(&fast), Some(2.0));
    assert!(b.win(&fast));
    assert_eq!(Basis::Reference.speedup(&fast), Some(1.5));
    // Unpaired 1.0 / 2.0 = 0.5: a loss to eager, though a win over the reference.
    let mut slow = timed(rec("a", Status::Correct, 1.2, true), 2.0);
    slow.pytorch = eager(1.0);
    assert_eq!(b.speedup(&slow), Some(0.5));
    assert!(!b.win(&slow));
    assert!(Basis::Reference.win(&slow));
    // Paired wins over the unpaired ratio (2.0 here): 1.2 with its lower bound 0.98 < 1.
    let mut unsure = fast.clone();
    unsure.speedup_eager = paired(1.2, 0.98);
    assert_eq!(b.speedup(&unsure), Some(1.2));
    assert!(!b.win(&unsure), "the paired lower bound is not above 1");
    let mut sure = unsure.clone();
    sure.speedup_eager = paired(1.1, 1.02);
    assert!(b.win(&sure));
    // Paired with no eager time or timing at all still counts.
    let mut python = Record::new("a", "k", "kernelbench", "x");
    python.status = Status::Correct;
    python.speedup_eager = paired(3.0, 2.5);
    assert_eq!(b.speedup(&python), Some(3.0));
    assert!(b.win(&python));
    assert_eq!(Basis::Reference.speedup(&python), None);
    // Eager not measured.
    let none = timed(rec("a", Status::Correct, 3.0, true), 0.5);
    assert_eq!(b.speedup(&none), None);
    assert!(!b.win(&none));
    // Suspect and incorrect never win, however fast.
    let mut suspect = timed(rec("a", Status::Suspect, 90.0, false), 0.01);
    suspect.pytorch = eager(1.0);
    assert_eq!(b.speedup(&suspect), Some(100.0));
    assert!(!b.win(&suspect));
    let mut wrong = suspect.clone();
    wrong.status = Status::Incorrect;
    wrong.speedup_eager = paired(5.0, 4.0);
    assert!(!b.win(&wrong));
}

/// Problems a, b, c have eager times (on their references); d has none. Candidates of one
/// group: several per problem.
fn run() -> Vec<Record> {
    let cand = |p: &str, status, ms, sp: f64, win| {
        let mut r = timed(rec(p, status, sp, win), ms);
        r.pytorch = None;
        r
    };
    let mut c1 = cand("c", Status::Correct, 0.9, 1.1, true);
    c1.speedup_eager = paired(1.5, 1.2); // the unpaired 1.0 / 0.9 is not used
    vec![
        reference("a", Some(1.0)),
        cand("a", Status::Correct, 0.5, 1.8, true), // eager 2
        cand("a", Status::Correct, 0.25, 3.6, true), // eager 4
        cand("a", Status::Suspect, 0.01, 90.0, false), // eager 100, never counts
        reference("b", Some(2.0)),
        cand("b", Status::Correct, 4.0, 0.45, false), // eager 0.5
        cand("b", Status::Incorrect, 0.5, 3.6, false), // eager 4, never counts
        reference("c", Some(1.0)),
        c1, // eager 1.5 (paired)
        reference("d", None),
        cand("d", Status::Correct, 1.0, 3.0, true), // no eager
    ]
}

#[test]
fn eager_metrics_count_only_problems_where_eager_was_measured() {
    let m = &summarize(&run(), 4, Basis::Eager)[0];
    assert_eq!(m.basis, Basis::Eager);
    assert_eq!(m.problems, 3, "d had no eager time");
    assert_eq!(m.wins, 2, "a (best 4) and c (paired 1.5)");
    assert!((m.win_rate - 2.0 / 3.0).abs() < 1e-12);
    assert!(close(m.median_speedup_wins, 2.75));
    // Correct candidates with an eager speedup: 2, 4, 0.5, 1.5 (d's has none).
    assert!(close(m.median_speedup_correct, 1.75));
    assert!(close(m.geomean_speedup_correct, 6f64.powf(0.25)));
    assert_eq!((m.candidates, m.correct, m.suspect), (7, 5, 1));
    let third = 1.0 / 3.0;
    for (p, want) in [
        ("0", 1.0),
        ("0.5", 2.0 * third),
        ("0.8", 2.0 * third),
        ("1", 2.0 * third),
        ("1.5", third),
        ("2", third),
    ] {
        assert!(
            (m.fast_p[p] - want).abs() < 1e-12,
            "fast_{p}: {}",
            m.fast_p[p]
        );
    }
}

#[test]
fn fast_p_is_kernelbench_s_share_of_problems_not_of_candidates() {
    let m = &summarize(&run(), 4, Basis::Reference)[0];
    assert_eq!(m.problems, 4);
    assert_eq!(m.wins, 3, "a, c, d");
    assert_eq!(m.median_speedup_wins, Some(3.0));
    assert_eq!(m.median_speedup_correct, Some(1.8));
    // a counts once though two of its candidates beat 1x (the candidate share is 4/7).
    assert_eq!(m.fast_p["1"], 0.75);
    assert_eq!(m.fast_p["2"], 0.5, "a (3.6) and d (3.0)");
    assert_eq!(m.fast_p["0"], 1.0);
    assert_eq!(m.fast_p["1.5"], 0.5, "c's 1.1 does not count");
    assert_eq!(
        m.fast_p.keys().collect::<Vec<_>>(),
        ["0", "0.5", "0.8", "1", "1.5", "2"]
    );
}

#[test]
fn the_summary_puts_the_headline_first_and_drops_eager_when_unmeasured() {
    let records = run();
    let s = Summary::new(&records, 4, Basis::Eager);
    assert_eq!(s.eager_problems, 3);
    let order: Vec<Basis> = s.tables().iter().map(|t| t.0).collect();
    assert_eq!(order, [Basis::Eager, Basis::Reference]);
    assert_eq!(s.headline_metrics().1[0].problems, 3);
    let s = Summary::new(&records, 4, Basis::Reference);
    let order: Vec<Basis> = s.tables().iter().map(|t| t.0).collect();
    assert_eq!(order, [Basis::Reference, Basis::Eager]);
    // No eager anywhere: the reference alone, even when eager is asked for.
    let native: Vec<Record> = records
        .into_iter()
        .map(|mut r| {
            r.pytorch = None;
            r.speedup_eager = None;
            r
        })
        .collect();
    let s = Summary::new(&native, 4, Basis::Eager);
    assert_eq!(s.eager_problems, 0);
    assert!(s.eager.is_none());
    let order: Vec<Basis> = s.tables().iter().map(|t| t.0).collect();
    assert_eq!(order, [Basis::Reference]);
}

#[test]
fn candidates_take_eager_from_their_problem_s_reference_unless_they_have_their_own() {
    let mut own = timed(rec("a", Status::Correct, 1.0, false), 1.0);
    own.pytorch = eager(5.0);
    let records = vec![
        reference("a", Some(1.0)),
        timed(rec("a", Status::Correct, 1.0, false), 0.5),
        own,
        timed(rec("b", Status::Correct, 1.0, false), 0.5),
    ];
    let filled = with_reference_peers(&records);
    let got: Vec<Option<f64>> = filled.iter().map(|r| Basis::Eager.speedup(r)).collect();
    assert_eq!(got, [Some(1.0), Some(2.0), Some(5.0), None]);
}

fn compiled(ms: f64) -> Option<PeerTime> {
    Some(PeerTime {
        median_ms: ms,
        reference_over_pytorch: 1.0 / ms,
        source: "test".into(),
        ..PeerTime::default()
    })
}

/// a: compiled Model 0.4 ms; x (0.5 ms) wins over the reference (1.8) but loses to the
/// compiler (0.4 / 0.5 = 0.8); y (0.25 ms) wins on both (1.6). b: compiled 2.0 ms; a slow
/// candidate (4 ms: 0.5). c: the Model failed to compile; its candidate wins over the
/// reference. d: no torch.compile at all.
fn compile_run() -> Vec<Record> {
    let cand = |p: &str, name: &str, status, ms, sp: f64, win| {
        let mut r = timed(rec(p, status, sp, win), ms);
        r.candidate = name.into();
        r
    };
    let with_compile = |p: &str, ms: Option<f64>, error: Option<&str>| {
        let mut r = reference(p, Some(1.0));
        r.pytorch_compile = ms.and_then(compiled);
        r.pytorch_compile_error = error.map(String::from);
        r
    };
    vec![
        with_compile("a", Some(0.4), None),
        cand("a", "x", Status::Correct, 0.5, 1.8, true),
        cand("a", "y", Status::Correct, 0.25, 3.6, true),
        cand("a", "s", Status::Suspect, 0.01, 90.0, false), // 40, never counts
        with_compile("b", Some(2.0), None),
        cand("b", "z", Status::Correct, 4.0, 0.45, false),
        with_compile("c", None, Some("torch.compile failed: graph break in X")),
        cand("c", "w", Status::Correct, 0.9, 1.1, true),
        reference("d", Some(1.0)),
        cand("d", "v", Status::Correct, 1.0, 3.0, true),
    ]
}

#[test]
fn compile_speedup_is_the_compiled_model_s_median_over_the_candidate_s() {
    let b = Basis::Compile;
    let mut r = timed(rec("a", Status::Correct, 1.8, true), 0.5);
    assert_eq!(b.speedup(&r), None, "not measured");
    assert!(!b.win(&r) && !loses_to_compile(&r));
    r.pytorch_compile = compiled(0.4);
    assert!(close(b.speedup(&r), 0.8));
    assert!(!b.win(&r));
    assert!(
        loses_to_compile(&r),
        "a win over the reference, 0.8 over compile"
    );
    r.pytorch_compile = compiled(1.0);
    assert!(close(b.speedup(&r), 2.0));
    assert!(b.win(&r) && !loses_to_compile(&r));
    // Paired eager speedups do not leak into the compile basis.
    r.speedup_eager = paired(9.0, 8.0);
    assert!(close(b.speedup(&r), 2.0));
    let mut wrong = r.clone();
    wrong.status = Status::Incorrect;
    assert!(!b.win(&wrong));
    // Not a win over the reference: never a loss to compile.
    let mut slow = r.clone();
    slow.win = false;
    slow.pytorch_compile = compiled(0.1);
    assert!(!loses_to_compile(&slow));
}

/// With the peer's spread, an unpaired win needs the candidate's 90th percentile below the
/// peer's 10th: a 2% faster median inside overlapping spreads is no win, on either basis.
#[test]
fn an_unpaired_win_needs_the_spreads_apart_when_the_peer_gave_its_spread() {
    let spread = |median_ms: f64, p10_ms: f64, p90_ms: f64| PeerTime {
        median_ms,
        reference_over_pytorch: 1.0,
        source: "test".into(),
        p10_ms: Some(p10_ms),
        p90_ms: Some(p90_ms),
    };
    let mut r = rec("a", Status::Correct, 1.0, false);
    r.timing = Some(Timing {
        median_ms: 0.98,
        p10_ms: 0.95,
        p90_ms: 1.01,
        samples: 20,
        ..Default::default()
    });
    // PyTorch 1.0 ms (0.97 to 1.03): medians 2% apart, spreads overlapping.
    r.pytorch = Some(spread(1.0, 0.97, 1.03));
    r.pytorch_compile = r.pytorch.clone();
    for b in [Basis::Eager, Basis::Compile] {
        assert!(b.speedup(&r).unwrap() > 1.0);
        assert!(!b.win(&r), "{b}: noise is no win");
    }
    // PyTorch 1.2 ms (1.1 to 1.3): 1.1 / 1.01 > 1.
    r.pytorch = Some(spread(1.2, 1.1, 1.3));
    r.pytorch_compile = r.pytorch.clone();
    for b in [Basis::Eager, Basis::Compile] {
        assert!(b.win(&r), "{b}");
    }
    // Too few times for a spread: no win, however far apart.
    r.timing.as_mut().unwrap().samples = 2;
    for b in [Basis::Eager, Basis::Compile] {
        assert!(!b.win(&r), "{b}: two times give no spread");
    }
    r.timing.as_mut().unwrap().samples = 20;
    // Without the spread (records written before it): the ratio of medians decides.
    r.pytorch = eager(1.0);
    r.pytorch_compile = compiled(1.0);
    for b in [Basis::Eager, Basis::Compile] {
        assert!(b.win(&r), "{b}: 1.0 / 0.98 > 1");
    }
}

#[test]
fn compile_metrics_count_only_problems_whose_model_compiled() {
    let records = compile_run();
    let m = &summarize(&records, 4, Basis::Compile)[0];
    assert_eq!(m.basis, Basis::Compile);
    assert_eq!(
        m.problems, 2,
        "a and b: c failed to compile, d was not measured"
    );
    assert_eq!(m.wins, 1, "a, by y");
    assert_eq!(m.win_rate, 0.5);
    assert!(close(m.median_speedup_wins, 1.6));
    // Correct candidates with a compile speedup: x 0.8, y 1.6, z 0.5 (w and v have none).
    assert!(close(m.median_speedup_correct, 0.8));
    assert!(close(m.geomean_speedup_correct, 0.64f64.powf(1.0 / 3.0)));
    assert_eq!((m.candidates, m.correct, m.suspect), (6, 5, 1));
    for (p, want) in [
        ("0", 1.0),
        ("0.5", 0.5),
        ("1", 0.5),
        ("1.5", 0.5),
        ("2", 0.0),
    ] {
        assert!(
            (m.fast_p[p] - want).abs() < 1e-12,
            "fast_{p}: {}",
            m.fast_p[p]
        );
    }
    let s = Summary::new(&records, 4, Basis::Compile);
    assert_eq!(s.compile_problems, 2);
    assert_eq!(s.measured_problems(Basis::Compile), 2);
    assert_eq!(
        s.compile_losses,
        [CompileLoss {
            problem: "a".into(),
            group: "examples".into(),
            candidate: "x".into(),
            speedup_reference: 1.8,
            speedup_compile: 0.8,
        }]
    );
    assert_eq!(
        s.compile_failures.into_iter().collect::<Vec<_>>(),
        [(
            "c".to_string(),
            "torch.compile failed: graph break in X".to_string()
        )]
    );
    let json = serde_json::to_value(Summary::new(&records, 4, Basis::Compile)).unwrap();
    assert_eq!(json["headline"], "compile");
    assert_eq!(json["compile"][0]["basis"], "compile");
    assert_eq!(
        json["compile_failures"]["c"],
        "torch.compile failed: graph break in X"
    );
}

#[test]
fn compile_tables_order_headline_first_and_vanish_when_unmeasured() {
    let records = compile_run();
    let order = |s: &Summary| s.tables().iter().map(|t| t.0).collect::<Vec<_>>();
    let s = Summary::new(&records, 4, Basis::Compile);
    assert_eq!(order(&s), [Basis::Compile, Basis::Reference, Basis::Eager]);
    assert_eq!(s.headline_metrics().1[0].problems, 2);
    let s = Summary::new(&records, 4, Basis::Eager);
    assert_eq!(order(&s), [Basis::Eager, Basis::Reference, Basis::Compile]);
    let s = Summary::new(&records, 4, Basis::Reference);
    assert_eq!(order(&s), [Basis::Reference, Basis::Eager, Basis::Compile]);
    // Every Model failed to compile (or none was timed): no compile table; the reference
    // stands in as the headline.
    let uncompiled: Vec<Record> = records
        .into_iter()
        .map(|mut r| {
            r.pytorch_compile = None;
            r
        })
        .collect();
    let s = Summary::new(&uncompiled, 4, Basis::Compile);
    assert_eq!(s.compile_problems, 0);
    assert!(s.compile.is_none() && s.compile_losses.is_empty());
    assert_eq!(s.headline_basis(), Basis::Reference);
    assert_eq!(order(&s), [Basis::Reference, Basis::Eager]);
    assert_eq!(s.compile_failures.len(), 1, "c's error is still named");
}

#[test]
fn candidates_take_the_compiled_time_and_its_error_from_their_reference() {
    let records = compile_run();
    let filled = with_reference_peers(&records);
    let got: Vec<Option<f64>> = filled.iter().map(|r| Basis::Compile.speedup(r)).collect();
    let want = [
        Some(0.4), // the reference itself: 0.4 / 1.0
        Some(0.8),
        Some(1.6),
        Some(40.0),
        Some(2.0),
        Some(0.5),
        None,
        None,
        None,
        None,
    ];
    for (g, w) in got.iter().zip(want) {
        assert!(
            g.zip(w).is_some_and(|(g, w)| (g - w).abs() < 1e-12) || (g.is_none() && w.is_none()),
            "{got:?}"
        );
    }
    assert_eq!(
        filled[7].pytorch_compile_error.as_deref(),
        Some("torch.compile failed: graph break in X")
    );
    // Eager is filled as before.
    assert!(close(Basis::Eager.speedup(&filled[1]), 2.0));
}

#[test]
fn basis_names_parse() {
    assert_eq!(Basis::parse("compile"), Some(Basis::Compile));
    assert_eq!(Basis::Compile.to_string(), "compile");
    assert_eq!(
        serde_json::from_str::<Basis>("\"compile\"").unwrap(),
        Basis::Compile
    );
    assert_eq!(
        <Basis as clap::ValueEnum>::from_str("compile", false),
        Ok(Basis::Compile)
    );
    assert_eq!(Basis::parse("eager"), Some(Basis::Eager));
    assert_eq!(Basis::parse("reference"), Some(Basis::Reference));
    assert_eq!(Basis::parse("torch"), None);
    assert_eq!(Basis::default(), Basis::Reference);
    assert_eq!(Basis::Eager.to_string(), "eager");
    assert_eq!(serde_json::to_string(&Basis::Eager).unwrap(), "\"eager\"");
}
