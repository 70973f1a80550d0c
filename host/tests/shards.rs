//! `run --shard i/n` with `report --merge`, and `run --devices`, on the CPU emulator at `ci`:
//! two shards run one after the other and merged hold the same records (problem, candidate,
//! status, check verdicts) as one run of the same seeds; a run on two emulated devices holds
//! the same records as a run on one, each saying its device; a shard without the common
//! secret seed is refused, and an ended shard resumes only with it. Two problems and few timed
//! pairs keep it to seconds.
mod common;
use common::untimed;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn dlrm_bench(args: &[&str], envs: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dlrm-bench"));
    cmd.env_remove(dlrm_bench::runner::shard::SECRET_ENV);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the binary runs")
}

fn ok(out: Output) -> Output {
    assert!(
        out.status.success(),
        "exit {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `run --cpu` of two problems' example and tuned candidates into `out`, with `extra`.
fn run(out: &Path, extra: &[&str], envs: &[(&str, &str)]) -> Output {
    let out = out.to_str().unwrap();
    let mut args = vec![
        "run",
        "--cpu",
        "--problem",
        "embedding_bag_sum",
        "--problem",
        "kjt_permute",
        "--candidates",
        "../candidates/examples",
        "--candidates",
        "../candidates/tuned",
        "--max-pairs",
        "4",
        "--out",
        out,
    ];
    args.extend_from_slice(extra);
    dlrm_bench(&args, envs)
}

/// The run directories under `out`, sorted.
fn run_dirs(out: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dirs.sort();
    dirs
}

fn records(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// What must agree between runs of one seed: each record's identity, status and the verdict
/// of each of its checks (not its timings), sorted.
fn content(records: &[Value]) -> Vec<String> {
    let mut rows: Vec<String> = records
        .iter()
        .map(|r| {
            let checks: Vec<String> = r["checks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| format!("{}/{}={}", c["set"], c["output"], c["passed"]))
                .collect();
            format!(
                "{} {} {} {} [{}]",
                r["problem"],
                r["group"],
                r["candidate"],
                r["status"],
                checks.join(" ")
            )
        })
        .collect();
    rows.sort();
    rows
}

fn tmp(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dlrm-bench-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn two_shards_merged_equal_one_run_of_the_same_seeds() {
    let root = tmp("shards");
    let seed_file = root.join("secret");
    std::fs::write(&seed_file, "4242\n").unwrap();
    let seed = seed_file.to_str().unwrap();
    ok(run(
        &root.join("single"),
        &["--secret-seed-file", seed],
        &[],
    ));
    let shards = root.join("shards");
    // One shard from the file, the other from the environment, as schedulers give it.
    ok(run(
        &shards,
        &["--shard", "0/2", "--secret-seed-file", seed],
        &[],
    ));
    ok(run(
        &shards,
        &["--shard", "1/2"],
        &[(dlrm_bench::runner::shard::SECRET_ENV, "4242")],
    ));
    let dirs = run_dirs(&shards);
    assert_eq!(dirs.len(), 2, "{dirs:?}");
    for d in &dirs {
        let run: Value =
            serde_json::from_str(&std::fs::read_to_string(d.join("run.json")).unwrap()).unwrap();
        assert!(run["shard"]["count"] == 2, "{}", d.display());
        assert_eq!(
            run["secret_seed"],
            dlrm_bench::runner::shard::SECRET_WITH_MERGE
        );
        assert!(!d.join(".secret_seed").exists());
    }
    // An ended shard keeps no seed: its resume needs the scheduler's, and checks it.
    let resume =
        |env: &[(&str, &str)]| dlrm_bench(&["run", "--resume", dirs[1].to_str().unwrap()], env);
    let stderr = String::from_utf8_lossy(&resume(&[]).stderr).into_owned();
    assert!(
        stderr.contains("a shard that ended keeps no secret seed"),
        "{stderr}"
    );
    let wrong = resume(&[(dlrm_bench::runner::shard::SECRET_ENV, "1")]);
    let stderr = String::from_utf8_lossy(&wrong.stderr);
    assert!(stderr.contains("field `secret_seed_sha256`"), "{stderr}");
    let again = ok(resume(&[(dlrm_bench::runner::shard::SECRET_ENV, "4242")]));
    assert!(String::from_utf8_lossy(&again.stdout).contains("(0 new records)"));
    let merged = root.join("merged");
    let mut args = vec!["report", "--merge"];
    args.extend(dirs.iter().map(|d| d.to_str().unwrap()));
    args.extend([
        "--out",
        merged.to_str().unwrap(),
        "--secret-seed-file",
        seed,
    ]);
    ok(dlrm_bench(&args, &[]));

    let single = records(&run_dirs(&root.join("single"))[0]);
    let got = records(&merged);
    assert_eq!(content(&got), content(&single));
    // Field by field, bit for bit (checks' errors included), the timings aside.
    for (g, s) in untimed(&got).iter().zip(untimed(&single).iter()) {
        assert_eq!(g, s);
    }
    let references = got.iter().filter(|r| r["group"] == "reference").count();
    assert_eq!(
        references, 4,
        "one reference record per problem and ci shape"
    );
    // Every candidate is in exactly one shard.
    let mut per_shard: Vec<String> = dirs
        .iter()
        .flat_map(|d| records(d))
        .filter(|r| r["group"] != "reference")
        .map(|r| format!("{} {} {}", r["problem"], r["shape"], r["candidate"]))
        .collect();
    let n = per_shard.len();
    per_shard.sort();
    per_shard.dedup();
    assert_eq!(per_shard.len(), n, "a candidate in two shards");
    let run: Value =
        serde_json::from_str(&std::fs::read_to_string(merged.join("run.json")).unwrap()).unwrap();
    assert_eq!(run["secret_seed"], 4242);
    assert_eq!(run["merged_shards"].as_array().unwrap().len(), 2);
    for f in ["summary.md", "summary.csv", "report.html"] {
        assert!(merged.join(f).is_file(), "{f}");
    }

    // The same shard twice, or one alone, is refused, naming what is wrong.
    let twice = dlrm_bench(
        &[
            "report",
            "--merge",
            dirs[0].to_str().unwrap(),
            dirs[0].to_str().unwrap(),
            "--out",
            root.join("m2").to_str().unwrap(),
        ],
        &[],
    );
    let stderr = String::from_utf8_lossy(&twice.stderr);
    assert!(
        !twice.status.success() && stderr.contains("given twice"),
        "{stderr}"
    );
    let alone = dlrm_bench(
        &[
            "report",
            "--merge",
            dirs[1].to_str().unwrap(),
            "--out",
            root.join("m3").to_str().unwrap(),
        ],
        &[],
    );
    let stderr = String::from_utf8_lossy(&alone.stderr);
    assert!(
        stderr.contains("incomplete: shard 0/2 of 2 missing"),
        "{stderr}"
    );
    std::fs::remove_dir_all(&root).ok();
}

#[test]
fn a_shard_without_the_common_secret_seed_is_refused() {
    let root = tmp("shard-no-secret");
    let out = run(&root.join("r"), &["--shard", "0/2"], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("--secret-seed-file") && stderr.contains("DLRM_BENCH_SECRET_SEED"),
        "{stderr}"
    );
    let bad = run(
        &root.join("r"),
        &["--shard", "0/2"],
        &[(dlrm_bench::runner::shard::SECRET_ENV, "x1")],
    );
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(stderr.contains("DLRM_BENCH_SECRET_SEED: `x1`"), "{stderr}");
    std::fs::remove_dir_all(&root).ok();
}

#[test]
fn two_emulated_devices_give_the_records_of_one() {
    let root = tmp("devices");
    let env = [(dlrm_bench::runner::shard::SECRET_ENV, "77")];
    ok(run(&root.join("one"), &[], &env));
    ok(run(&root.join("two"), &["--devices", "0,1"], &env));
    let one = records(&run_dirs(&root.join("one"))[0]);
    let two_dir = &run_dirs(&root.join("two"))[0];
    let two = records(two_dir);
    assert_eq!(content(&two), content(&one));
    // Records say their device; both devices timed candidates, and each measured the
    // reference (one record of it per problem).
    assert!(one
        .iter()
        .filter(|r| r["group"] != "invalid")
        .all(|r| r["device"] == 0));
    let devices: std::collections::BTreeSet<String> =
        two.iter().map(|r| r["device"].to_string()).collect();
    assert_eq!(devices, ["0", "1"].map(String::from).into(), "{two:?}");
    let run: Value =
        serde_json::from_str(&std::fs::read_to_string(two_dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(run["devices"], serde_json::json!([0, 1]));
    std::fs::remove_dir_all(&root).ok();
}

#[test]
fn report_pools_the_shards_of_one_run_as_their_merge() {
    let root = tmp("shards-report");
    let env = [(dlrm_bench::runner::shard::SECRET_ENV, "4343")];
    let shards = root.join("shards");
    ok(run(&shards, &["--shard", "0/2"], &env));
    ok(run(&shards, &["--shard", "1/2"], &env));
    let dirs = run_dirs(&shards);
    assert_eq!(dirs.len(), 2, "{dirs:?}");
    // The split runs through a problem: both shards hold candidates of it and a record of its
    // reference (each measured it for its own candidates' pairing).
    let problems = |d: &Path, reference: bool| -> std::collections::BTreeSet<String> {
        records(d)
            .iter()
            .filter(|r| (r["group"] == "reference") == reference && r["group"] != "invalid")
            .map(|r| r["problem"].as_str().unwrap().to_string())
            .collect()
    };
    let shared: Vec<String> = problems(&dirs[0], false)
        .intersection(&problems(&dirs[1], false))
        .cloned()
        .collect();
    assert!(!shared.is_empty(), "no problem in both shards: {dirs:?}");
    assert!(shared.iter().all(|p| problems(&dirs[1], true).contains(p)));
    let merged = root.join("merged");
    let mut args = vec!["report", "--merge"];
    args.extend(dirs.iter().map(|d| d.to_str().unwrap()));
    args.extend(["--out", merged.to_str().unwrap()]);
    ok(dlrm_bench(&args, &[]));
    let want = records(&merged);
    // In either order, `report` over the shards holds the records their merge holds: every
    // candidate of every shard, and one reference per problem (the lowest shard's).
    for order in [[0, 1], [1, 0]] {
        let mut args = vec!["report", "--json"];
        args.extend(order.map(|i| dirs[i].to_str().unwrap()));
        let out = ok(dlrm_bench(&args, &[]));
        let pooled: Value = serde_json::from_slice(&out.stdout).unwrap();
        let got = pooled["records"].as_array().unwrap();
        assert_eq!(content(got), content(&want), "order {order:?}");
        let reference = |rs: &[Value], p: &str| -> Vec<Value> {
            rs.iter()
                .filter(|r| r["group"] == "reference" && r["problem"] == p)
                .map(|r| r["timing"].clone())
                .collect()
        };
        for p in &shared {
            assert_eq!(reference(got, p), reference(&want, p), "{p}");
        }
        let run: Value =
            serde_json::from_str(&std::fs::read_to_string(merged.join("run.json")).unwrap())
                .unwrap();
        assert_eq!(
            pooled["summary"]["reference"], run["metrics"]["reference"],
            "order {order:?}"
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("shards;"),
            "no warning for a whole run: {stderr}"
        );
    }
    // One shard alone still reports, and says which shard is missing.
    let out = ok(dlrm_bench(
        &["report", "--json", dirs[1].to_str().unwrap()],
        &[],
    ));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("1 of the run's 2 shards; shard(s) 0/2 missing"),
        "{stderr}"
    );
    std::fs::remove_dir_all(&root).ok();
}

/// Shards of two different runs are refused naming every field that differs, not the first.
#[test]
fn a_refused_merge_names_every_field_that_differs() {
    let root = tmp("shards-differ");
    let env = [(dlrm_bench::runner::shard::SECRET_ENV, "77")];
    ok(run(&root, &["--shard", "0/2"], &env));
    let out = root.to_str().unwrap();
    ok(dlrm_bench(
        &[
            "run",
            "--cpu",
            "--problem",
            "fm_interaction",
            "--candidates",
            "../candidates/examples",
            "--max-pairs",
            "5",
            "--shard",
            "1/2",
            "--out",
            out,
        ],
        &env,
    ));
    let dirs = run_dirs(&root);
    let mut args = vec!["report", "--merge"];
    args.extend(dirs.iter().map(|d| d.to_str().unwrap()));
    let merged = root.join("merged");
    args.extend(["--out", merged.to_str().unwrap()]);
    let refused = dlrm_bench(&args, &[]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    for field in ["field `problems`", "field `config.max_pairs`"] {
        assert!(stderr.contains(field), "{field}: {stderr}");
    }
    std::fs::remove_dir_all(&root).ok();
}
