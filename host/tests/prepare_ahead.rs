//! A unit's inputs made ahead (`runner::ahead`, forced on for the emulator with
//! `DLRM_BENCH_PREPARE_AHEAD=1`): the second shape's sets and oracles are made while the first
//! is measured, so its worker reads every one from the input cache and generates none; the
//! run says so in `run.json`, and its verdicts are those of a run without it.
use std::path::Path;
use std::process::Command;

fn run(root: &Path, ahead: &str) -> (Vec<serde_json::Value>, serde_json::Value) {
    run_problems(root, ahead, &["fm_interaction"])
}

fn run_problems(
    root: &Path,
    ahead: &str,
    problems: &[&str],
) -> (Vec<serde_json::Value>, serde_json::Value) {
    let _ = std::fs::remove_dir_all(root);
    let out = Command::new(env!("CARGO_BIN_EXE_dlrm-bench"))
        .args(["run", "--cpu", "--no-candidates"])
        .args(problems.iter().flat_map(|p| ["--problem", p]))
        .arg("--out")
        .arg(root.join("results"))
        .arg("--input-cache")
        .arg(root.join("cache"))
        .env("DLRM_BENCH_PREPARE_AHEAD", ahead)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = std::fs::read_dir(root.join("results"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let records = std::fs::read_to_string(dir.join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let meta =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    (records, meta)
}

#[test]
fn the_next_shapes_sets_are_made_ahead_and_read_from_the_cache() {
    let root = std::env::temp_dir().join(format!("dlrm-bench-ahead-{}", std::process::id()));
    let (records, meta) = run(&root, "1");
    assert_eq!(
        records.len(),
        2,
        "the reference at both ci shapes: {records:?}"
    );
    let (first, second) = (&records[0]["phases"], &records[1]["phases"]);
    assert!(first["generate"].as_f64().is_some(), "{first}");
    assert!(second["read"].as_f64().is_some(), "{second}");
    assert!(
        second["generate"].is_null(),
        "made ahead, not again: {second}"
    );
    assert_eq!(
        meta["phases"]["setup_s"]["inputs_prepared_ahead"]["units"], 1,
        "{}",
        meta["phases"]
    );
    let left: Vec<_> = std::fs::read_dir(root.join("cache"))
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "every unit's inputs removed: {left:?}");
    let (without, _) = run(&root, "0");
    for (a, b) in records.iter().zip(&without) {
        assert_eq!(a["status"], b["status"]);
        assert_eq!(a["shape"], b["shape"]);
    }
    assert!(without[1]["phases"]["generate"].as_f64().is_some());
    std::fs::remove_dir_all(&root).unwrap();
}

/// Two units are prepared at once ahead of the one measured: with four units, the second and
/// the third start while the first is measured, and every unit after the first reads all its
/// sets from the cache.
#[test]
fn two_units_are_prepared_at_once_and_every_later_unit_reads_its_sets() {
    let root = std::env::temp_dir().join(format!("dlrm-bench-ahead2-{}", std::process::id()));
    let (records, meta) = run_problems(&root, "1", &["fm_interaction", "dot_interaction"]);
    assert_eq!(
        records.len(),
        4,
        "two problems at both ci shapes: {records:?}"
    );
    for r in &records[1..] {
        let phases = &r["phases"];
        assert!(phases["generate"].is_null(), "made ahead: {phases}");
        assert!(
            phases["read"].as_f64().is_some(),
            "read from the cache: {phases}"
        );
    }
    let ahead = &meta["phases"]["setup_s"]["inputs_prepared_ahead"];
    assert_eq!(ahead["units"], 3, "{ahead}");
    assert_eq!(ahead["most_at_once"], 2, "{ahead}");
    std::fs::remove_dir_all(&root).unwrap();
}
