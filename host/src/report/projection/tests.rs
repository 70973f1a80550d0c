//! Tests of [`super`].
use super::*;
use crate::results::record::{PeerTime, Speedup, Timing};

fn workload(fractions: &[(&str, f64)]) -> Workload {
    Workload {
        name: "w".into(),
        description: "d".into(),
        source: "test".into(),
        fractions: fractions.iter().map(|&(k, v)| (k.into(), v)).collect(),
        step_ms: None,
        gpu_ms: None,
        coverage: None,
        method: None,
        kernels_csv: None,
        classes: None,
        problems_ran: None,
    }
}

fn record(problem: &str, candidate: &str, group: &str, ms: f64, speedup: f64) -> Record {
    let mut r = Record::new(problem, candidate, group, "test");
    r.status = Status::Correct;
    r.timing = Some(Timing {
        median_ms: ms,
        ..Default::default()
    });
    if candidate != "reference" {
        r.speedup = Some(Speedup {
            median: speedup,
            ..Default::default()
        });
        r.win = speedup > 1.0;
    }
    r
}

#[test]
fn a_step_that_ran_the_problems_compiled_takes_speedups_over_the_compiled_model() {
    // Eager 1.0 ms, compiled 0.5 ms, the candidate 0.25 ms: 4x over eager, 2x over compile.
    // A second problem's candidate beats eager (1.2 vs 1.0 ms) but not compile (0.5 ms).
    let peer = |ms: f64| PeerTime {
        median_ms: ms,
        reference_over_pytorch: 1.0,
        source: "t".into(),
        ..PeerTime::default()
    };
    let mut bag = record("embedding_bag_sum", "reference", "reference", 1.0, 0.0);
    bag.pytorch = Some(peer(1.0));
    bag.pytorch_compile = Some(peer(0.5));
    let mut fm = record("fm_interaction", "reference", "reference", 1.2, 0.0);
    fm.pytorch = Some(peer(1.2));
    fm.pytorch_compile = Some(peer(0.5));
    let records = vec![
        bag,
        record("embedding_bag_sum", "fast", "b", 0.25, 4.0),
        fm,
        record("fm_interaction", "y", "a", 1.0, 1.2),
    ];
    let mut w = workload(&[("embedding_bag_sum", 0.5), ("fm_interaction", 0.1)]);
    let eager = project(&w, &records, None);
    assert_eq!(eager.problems[0].speedup, 4.0);
    w.problems_ran = Some("compile".into());
    w.validate().unwrap();
    let compiled = project(&w, &records, None);
    let by = |name: &str| {
        compiled
            .problems
            .iter()
            .find(|x| x.problem == name)
            .unwrap()
    };
    assert_eq!(by("embedding_bag_sum").speedup, 2.0);
    assert_eq!(by("embedding_bag_sum").basis, "torch.compile");
    assert_eq!(by("fm_interaction").speedup, 1.0);
    assert_eq!(by("fm_interaction").basis, "no win over torch.compile");
    // (1 - 0.6) + 0.5/2 + 0.1 = 0.75
    assert!((compiled.new_time_share - 0.75).abs() < 1e-12);
    w.problems_ran = Some("inductor".into());
    assert!(w.validate().unwrap_err().contains("`problems_ran`"));
}

#[test]
fn the_classes_are_the_profilers() {
    // tools/kernel_classes.py's CLASSES tuple, in its order.
    let py = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/kernel_classes.py"),
    )
    .unwrap();
    let tuple = &py[py
        .find("\nCLASSES = (")
        .expect("CLASSES in kernel_classes.py")..];
    let tuple = &tuple[..tuple.find(')').unwrap()];
    let names: Vec<&str> = tuple.split('"').skip(1).step_by(2).collect();
    assert_eq!(names, CLASSES);
}

#[test]
fn amdahl_with_eager_basis_reference_basis_and_no_win() {
    // embedding_bag_sum: f = 0.3, eager 1.0 ms, best win 0.25 ms -> s = 4 (over eager, not
    // the 3.5 over the reference). dot_interaction: f = 0.1, no PyTorch time -> s = 2 over
    // the reference. fm_interaction: f = 0.1, only a loss -> s = 1.
    let mut reference = record("embedding_bag_sum", "reference", "reference", 0.9, 0.0);
    reference.pytorch = Some(PeerTime {
        median_ms: 1.0,
        reference_over_pytorch: 0.9,
        source: "t".into(),
        ..PeerTime::default()
    });
    // unique_indices: the reference is slower than eager (2.0 vs 1.5 ms); a 1.1x win over
    // it (1.8 ms) still loses to eager -> s = 1.
    let mut slower_than_eager_reference =
        record("unique_indices", "reference", "reference", 2.0, 0.0);
    slower_than_eager_reference.pytorch = Some(PeerTime {
        median_ms: 1.5,
        reference_over_pytorch: 2.0 / 1.5,
        source: "t".into(),
        ..PeerTime::default()
    });
    let records = vec![
        reference,
        record("embedding_bag_sum", "slow", "a", 0.5, 1.8),
        record("embedding_bag_sum", "fast", "b", 0.25, 3.5),
        record("dot_interaction", "reference", "reference", 1.0, 0.0),
        record("dot_interaction", "x", "a", 0.5, 2.0),
        record("fm_interaction", "reference", "reference", 1.0, 0.0),
        record("fm_interaction", "y", "a", 2.0, 0.5),
        slower_than_eager_reference,
        record("unique_indices", "z", "a", 1.8, 1.1),
    ];
    let w = workload(&[
        ("embedding_bag_sum", 0.3),
        ("dot_interaction", 0.1),
        ("fm_interaction", 0.1),
        ("unique_indices", 0.05),
        ("kjt_permute", 0.02),
    ]);
    let p = project(&w, &records, None);
    let by = |name: &str| p.problems.iter().find(|x| x.problem == name).unwrap();
    assert_eq!(by("embedding_bag_sum").speedup, 4.0);
    assert_eq!(by("embedding_bag_sum").basis, "PyTorch eager");
    assert_eq!(by("embedding_bag_sum").candidate.as_deref(), Some("b/fast"));
    assert_eq!(by("dot_interaction").speedup, 2.0);
    assert_eq!(by("dot_interaction").basis, "reference");
    assert_eq!(by("fm_interaction").speedup, 1.0);
    assert_eq!(by("fm_interaction").basis, "no win");
    assert_eq!(by("unique_indices").speedup, 1.0);
    assert_eq!(by("unique_indices").basis, "no win over eager");
    assert_eq!(by("kjt_permute").basis, "not in this run");
    // (1 - 0.57) + 0.3/4 + 0.1/2 + 0.1 + 0.05 + 0.02 = 0.725
    assert!((p.addressable - 0.57).abs() < 1e-12);
    assert!((p.new_time_share - 0.725).abs() < 1e-12);
    assert!((p.step_speedup() - 1.0 / 0.725).abs() < 1e-12);
    assert!((p.time_saved() - 0.275).abs() < 1e-12);
    assert!((p.ceiling() - 1.0 / 0.43).abs() < 1e-12);
    let md = p.markdown(&w);
    assert!(md.contains("| embedding_bag_sum | 30.0% | b/fast | 4.000 | PyTorch eager | 7.5% |"));
    assert!(md.contains("Addressable fraction 57.0%"));
    assert!(md.contains("projected step speedup 1.379x, step time -27.5%"));
    let json = p.to_json();
    assert!((json["addressable_fraction"].as_f64().unwrap() - 0.57).abs() < 1e-12);
    assert_eq!(json["problems"].as_array().unwrap().len(), 5);
    // Group a only: embedding_bag_sum falls back to its 0.5 ms candidate (s = 2).
    let a = project(&w, &records, Some("a"));
    assert_eq!(
        a.problems
            .iter()
            .find(|x| x.problem == "embedding_bag_sum")
            .unwrap()
            .speedup,
        2.0
    );
}

#[test]
fn committed_profiles_are_valid() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../workloads");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let w = Workload::load(&path).unwrap_or_else(|e| panic!("{e}"));
            assert!(w.source.contains("measured") || w.source.contains("http"));
            seen += 1;
        }
    }
    assert!(seen > 0, "no profile in {}", dir.display());
}

/// Each (file, body, message): loading `body` written to `file` fails with an error naming
/// the file and containing the message.
fn assert_load_errors(
    write: &dyn Fn(&str, &str) -> std::path::PathBuf,
    cases: &[(&str, String, &str)],
) {
    for (file, body, want) in cases {
        let err = Workload::load(&write(file, body)).unwrap_err().to_string();
        assert!(err.contains(file), "{err}");
        assert!(err.contains(want), "{file}: {err}");
    }
}

#[test]
fn profiles_are_validated_with_the_file_and_field_named() {
    let dir = std::env::temp_dir().join(format!("dlrm-workload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, body: &str| {
        let p = dir.join(name);
        std::fs::write(&p, body).unwrap();
        p
    };
    let head = "name = \"w\"\ndescription = \"d\"\nsource = \"s\"\n";
    let ok = write(
        "ok.toml",
        &format!("{head}[fractions]\nembedding_bag_sum = 0.25\ndot_interaction = 0.05\n"),
    );
    let w = Workload::load(&ok).unwrap();
    assert_eq!(w.fractions.len(), 2);
    let cases = [
            (
                "unknown.toml",
                format!("{head}[fractions]\nembedding_bag_summ = 0.2\n"),
                "`fractions.embedding_bag_summ`: no such problem",
            ),
            (
                "range.toml",
                format!("{head}[fractions]\nembedding_bag_sum = 1.5\n"),
                "is not in [0, 1]",
            ),
            (
                "sum.toml",
                format!("{head}[fractions]\nembedding_bag_sum = 0.7\ndot_interaction = 0.4\n"),
                "add up to 1.1000",
            ),
            (
                "source.toml",
                "name = \"w\"\ndescription = \"d\"\nsource = \" \"\n[fractions]\nfm_interaction = 0.1\n"
                    .to_string(),
                "field `source` is empty",
            ),
            (
                "type.toml",
                format!("{head}[fractions]\nembedding_bag_sum = \"0.1\"\n"),
                "line 5, column 21",
            ),
            (
                "extra.toml",
                format!("{head}steps = 3\n[fractions]\nfm_interaction = 0.1\n"),
                "unknown field `steps`",
            ),
        ];
    assert_load_errors(&write, &cases);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_share_of_one_has_an_unbounded_ceiling_not_a_309_digit_one() {
    let w = workload(&[("embedding_bag_sum", 1.0)]);
    let p = project(&w, &[], None);
    assert!(p.ceiling().is_infinite());
    let md = p.markdown(&w);
    assert!(md.contains("more than an unbounded speedup"), "{md}");
    assert!(!md.contains("00000000"), "{md}");
    assert!(p.to_json()["ceiling"].is_null());
    let half = project(&workload(&[("embedding_bag_sum", 0.5)]), &[], None);
    assert_eq!(half.ceiling_text(), "2.000x");
}

#[test]
fn measured_profiles_parse_with_classes_coverage_and_an_empty_fractions_table() {
    let dir = std::env::temp_dir().join(format!("dlrm-workload-new-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, body: &str| {
        let p = dir.join(name);
        std::fs::write(&p, body).unwrap();
        p
    };
    let head = "name = \"w\"\ndescription = \"d\"\nsource = \"measured\"\n\
                    step_ms = 21.5\ngpu_ms = 20.25\ncoverage = 0.998\nmethod = \"m\"\n\
                    kernels_csv = \"w.kernels.csv\"\n";
    let ok = write(
        "ok.toml",
        &format!(
            "{head}\n[fractions]\nembedding_bag_sum = 0.3\n\n[classes]\nmatmul = 0.5\n\
                 copy = 0.198\nother = 0.002\n"
        ),
    );
    let w = Workload::load(&ok).unwrap();
    assert_eq!(w.step_ms, Some(21.5));
    assert_eq!(w.gpu_ms, Some(20.25));
    assert_eq!(w.coverage, Some(0.998));
    assert_eq!(w.kernels_csv.as_deref(), Some("w.kernels.csv"));
    assert_eq!(w.classes.as_ref().unwrap().len(), 3);
    // A transformer step: no problem in it, the classes make the whole step.
    let gpt = write(
        "gpt.toml",
        &format!("{head}\n[fractions]\n\n[classes]\nmatmul = 0.6\nattention = 0.4\n"),
    );
    let w = Workload::load(&gpt).unwrap();
    assert!(w.fractions.is_empty());
    let p = project(&w, &[], None);
    assert_eq!(p.addressable, 0.0);
    assert_eq!(p.step_speedup(), 1.0);
    let cases = [
        (
            "noclass.toml",
            format!("{head}[fractions]\n[classes]\nmatmull = 1.0\n"),
            "`classes.matmull`: no such class",
        ),
        (
            "classrange.toml",
            format!("{head}[fractions]\n[classes]\nmatmul = 1.5\n"),
            "`classes.matmul` = 1.5 is not in [0, 1]",
        ),
        (
            "whole.toml",
            format!("{head}[fractions]\nembedding_bag_sum = 0.2\n[classes]\nmatmul = 0.5\n"),
            "add up to 0.7000, not the whole step",
        ),
        (
            "coverage.toml",
            "name = \"w\"\ndescription = \"d\"\nsource = \"s\"\ncoverage = 1.5\n\
                 [fractions]\nfm_interaction = 0.1\n"
                .to_string(),
            "`coverage` = 1.5 is out of range",
        ),
        (
            "empty.toml",
            "name = \"w\"\ndescription = \"d\"\nsource = \"s\"\n[fractions]\n".to_string(),
            "`fractions` lists no problem",
        ),
    ];
    assert_load_errors(&write, &cases);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn several_profiles_make_one_table_with_the_published_range() {
    let mut reference = record("embedding_bag_sum", "reference", "reference", 1.0, 0.0);
    reference.pytorch = Some(PeerTime {
        median_ms: 1.0,
        reference_over_pytorch: 1.0,
        source: "t".into(),
        ..PeerTime::default()
    });
    let records = vec![
        reference,
        record("embedding_bag_sum", "fast", "b", 0.5, 2.0),
    ];
    let mut rec = workload(&[("embedding_bag_sum", 0.6), ("dot_interaction", 0.1)]);
    rec.name = "dlrm-train".into();
    rec.coverage = Some(0.995);
    let mut gpt = workload(&[]);
    gpt.name = "gpt-train".into();
    gpt.classes = Some([("matmul".to_string(), 1.0)].into_iter().collect());
    let mut small = workload(&[("embedding_bag_sum", 0.1)]);
    small.name = "small".into();
    let items: Vec<_> = [rec, gpt, small]
        .into_iter()
        .map(|w| {
            let p = project(&w, &records, None);
            (w, p)
        })
        .collect();
    let t = table_many(&items);
    // dlrm: Σf = 0.7, new share 0.3 + 0.6/2 + 0.1 = 0.7 -> 1.429x, -30%; ceiling 1/0.3.
    assert!(
        t.contains("| dlrm-train | 70.0% | 3.333x | 1.429x | 30.0% | 99.5% | above |"),
        "{t}"
    );
    assert!(
        t.contains("| gpt-train | 0.0% | 1.000x | 1.000x | 0.0% | - | below |"),
        "{t}"
    );
    // 0.9 + 0.05 = 0.95 -> 1.053x, -5%
    assert!(
        t.contains("| small | 10.0% | 1.111x | 1.053x | 5.0% | - | within |"),
        "{t}"
    );
    assert!(
        t.contains("| embedding_bag_sum | b/fast | 2.000 | PyTorch eager |"),
        "{t}"
    );
    assert!(
        t.contains("| dot_interaction | - | 1.000 | not in this run |"),
        "{t}"
    );
    assert!(t.contains("vs published 8.9–58.2%"), "{t}");
    assert!(
        t.contains(
            "the published study found 8.9% to 58.2% of runtime addressable across seven \
                 workloads in three domains"
        ),
        "{t}"
    );
    assert!(t.starts_with("## End-to-end projection over 3 workload profiles"));
}

#[test]
fn workload_directories_expand_to_their_profiles_sorted() {
    let dir = std::env::temp_dir().join(format!("dlrm-workload-dir-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    for f in ["b.toml", "a.toml", "a.kernels.csv"] {
        std::fs::write(dir.join(f), "").unwrap();
    }
    let single = dir.join("x.toml");
    let got = workload_paths(&[dir.clone(), single.clone()]).unwrap();
    assert_eq!(got, vec![dir.join("a.toml"), dir.join("b.toml"), single]);
    let err = workload_paths(&[dir.join("sub")]).unwrap_err().to_string();
    assert!(err.contains("no workload profile"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}
