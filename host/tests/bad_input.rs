//! Bad input and faults at the command line (issue 13): each is a clear error naming the flag
//! or the file, with a non-zero exit, before anything is measured or written; a `--resume`
//! runs on the backend and preset of the run it finishes or refuses, changing nothing; and a
//! run started from one directory resumes from another with its candidates.
use dlrm_bench::backend::Backend;
use dlrm_bench::evaluate::EvalConfig;
use dlrm_bench::results::record::Record;
use dlrm_bench::runner::RunOptions;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn dlrm_bench_in(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dlrm-bench"))
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("the binary runs")
}

fn dlrm_bench(args: &[&str]) -> Output {
    dlrm_bench_in(Path::new(env!("CARGO_MANIFEST_DIR")), args)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `args` fail with a non-zero exit and every one of `wanted` on stderr.
fn refused(args: &[&str], wanted: &[&str]) {
    let o = dlrm_bench(args);
    let err = stderr(&o);
    assert!(!o.status.success(), "{args:?} exited 0:\n{err}");
    for w in wanted {
        assert!(err.contains(w), "{args:?}: no `{w}` in:\n{err}");
    }
    assert!(!err.contains("panicked"), "{args:?}: {err}");
}

fn temp(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dlrm-bench-bad-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A corpus under `root/corpus` with the tuned `embedding_bag_sum` candidate (a Rust kernel,
/// run by the emulator) as `d_good`.
fn corpus(root: &Path) -> PathBuf {
    let dir = root.join("corpus");
    let tuned = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../candidates/tuned/embedding_bag_sum/candidate.toml");
    std::fs::create_dir_all(dir.join("d_good")).unwrap();
    std::fs::copy(tuned, dir.join("d_good/candidate.toml")).unwrap();
    dir
}

#[test]
fn out_of_bounds_options_are_errors_naming_the_flag() {
    let base = ["run", "--cpu", "--problem", "embedding_bag_sum"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        base.iter().chain(extra).copied().collect()
    };
    refused(
        &with(&["--win-threshold", "0.1"]),
        &["--win-threshold", "at least 1.0"],
    );
    refused(
        &with(&["--min-pairs", "9", "--max-pairs", "3"]),
        &["--min-pairs 9 is greater than --max-pairs 3"],
    );
    refused(&with(&["--rotation", "0"]), &["--rotation", "at least 1"]);
    refused(
        &with(&["--public-sets", "0"]),
        &["--public-sets", "at least 1"],
    );
    for t in ["0", "NaN", "-3", "1e308", "inf"] {
        let arg = format!("--timeout-s={t}");
        let arg: &'static str = Box::leak(arg.into_boxed_str());
        refused(&with(&[arg]), &["--timeout-s", "above 0 and at most 86400"]);
    }
    let huge = "18446744073709551615";
    refused(
        &with(&["--public-sets", huge]),
        &["--public-sets", "at most 64"],
    );
    refused(
        &with(&["--max-pairs", huge]),
        &["--max-pairs", "at most 100000"],
    );
    refused(
        &["stats", "--table-set", "criteo-kaggle", "--batch", huge],
        &["--batch", "at most 16777216"],
    );
    refused(
        &["gen", "fm_interaction", "--sets", huge],
        &["--sets", "at most 64"],
    );
    refused(
        &["gen", "fm_interaction", "--sets", "0"],
        &["--sets", "at least 1"],
    );
    refused(&["check"], &["required", "<DIRS>"]);
    refused(
        &["run", "--no-candidates", "--candidates", "x"],
        &["cannot be used with", "--candidates"],
    );
}

#[test]
fn resume_refuses_the_options_it_would_ignore() {
    for extra in [
        ["--problem", "embedding_bag_sum"],
        ["--candidates", "x"],
        ["--preset", "ci"],
        ["--seed", "1"],
    ] {
        let mut args = vec!["run", "--resume", "somewhere"];
        args.extend(extra);
        refused(&args, &["cannot be used with", extra[0]]);
    }
}

#[test]
fn candidate_roots_that_hold_no_candidate_are_errors_naming_them() {
    let root = temp("roots");
    let empty = root.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let file = root.join("file.toml");
    std::fs::write(&file, "x").unwrap();
    let out = root.join("results");
    for bad in [root.join("missing"), empty, file] {
        let bad = bad.to_str().unwrap();
        refused(
            &[
                "run",
                "--cpu",
                "--problem",
                "embedding_bag_sum",
                "--candidates",
                bad,
                "--out",
                out.to_str().unwrap(),
            ],
            &[&format!("--candidates {bad}")],
        );
    }
    assert!(!out.exists(), "nothing is written for a refused run");
    // An --out that is a file: the error names it.
    let corpus = corpus(&root);
    let plain = root.join("plain");
    std::fs::write(&plain, "x").unwrap();
    refused(
        &[
            "run",
            "--cpu",
            "--problem",
            "embedding_bag_sum",
            "--candidates",
            corpus.to_str().unwrap(),
            "--out",
            plain.to_str().unwrap(),
        ],
        &[&format!("--out {}", plain.display())],
    );
    std::fs::remove_dir_all(&root).ok();
}

/// A run directory as an emulator run of `embedding_bag_sum` leaves it while it runs, with
/// `run.json`'s device, kind and preset changed by `edit`.
fn fabricated_run(root: &Path, edit: impl Fn(&mut serde_json::Value)) -> PathBuf {
    let dir = root.join("results/20260101T000000Z-cpu-ci");
    std::fs::create_dir_all(&dir).unwrap();
    let corpus = corpus(root);
    let mut eval = EvalConfig::quick_ci(2026, 0);
    eval.preset = bench_problems::Preset::Ci;
    let opts = RunOptions {
        problems: vec!["embedding_bag_sum".into()],
        shapes: vec!["all".into()],
        candidate_roots: vec![corpus],
        preset: Some(bench_problems::Preset::Ci),
        force_cpu: true,
        require_gpu: false,
        out: root.join("results"),
        peer: vec![],
        eval: eval.clone(),
        timeout_s: 20.0,
        command_line: "dlrm-bench run --cpu".into(),
        workload: None,
        torch: false,
        torch_compile: false,
        input_cache: None,
        keep_inputs: false,
        kernelbench: vec![],
        answer_timeout_s: 600.0,
        unsandboxed: false,
        secret_seed_file: None,
        basis: dlrm_bench::report::metrics::Basis::Reference,
        wide: false,
        shard: None,
        devices: vec![],
        all_devices: false,
        given_secret: None,
    };
    let emulator = dlrm_bench::backend::emu::EmuBackend::new();
    let mut run_json = serde_json::json!({
        "run_id": "20260101T000000Z-cpu-ci",
        "started": "2026-01-01T00:00:00Z",
        "finished": null,
        "command": "dlrm-bench run --cpu",
        "git_commit": "abc",
        "backend": "CPU emulator",
        "ceilings": null,
        "public_seeds": [],
        "peer_files": [],
        "problems": [],
        "device": emulator.info(),
        "timings_are_gpu_timings": false,
        "config": eval,
        "secret_seed": "(written when the run ends)",
        "options": opts,
    });
    edit(&mut run_json);
    std::fs::write(
        dir.join("run.json"),
        serde_json::to_string_pretty(&run_json).unwrap(),
    )
    .unwrap();
    std::fs::write(dir.join(".secret_seed"), "77").unwrap();
    let reference = Record::new("embedding_bag_sum", "reference", "reference", "reference");
    let line = serde_json::to_string(&reference).unwrap() + "\n";
    std::fs::write(dir.join("results.jsonl"), line).unwrap();
    dir
}

#[test]
fn a_resume_of_a_result_set_another_run_holds_is_refused_naming_its_pid() {
    let root = temp("resume-held");
    let dir = fabricated_run(&root, |_| {});
    // Another run holds the set (this test, as a run would: the directory locked, its pid
    // written beside).
    let holder = std::fs::File::open(&dir).unwrap();
    holder.try_lock().unwrap();
    std::fs::write(dir.join("run.lock"), "4242").unwrap();
    let before = std::fs::read(dir.join("results.jsonl")).unwrap();
    refused(
        &["run", "--resume", dir.to_str().unwrap()],
        &["another dlrm-bench (pid 4242) is running on this result set"],
    );
    assert_eq!(std::fs::read(dir.join("results.jsonl")).unwrap(), before);
    drop(holder);
    std::fs::remove_dir_all(&root).ok();
}

#[test]
fn report_refuses_a_set_with_a_record_twice() {
    let root = temp("report-duplicate");
    let dir = fabricated_run(&root, |_| {});
    let file = dir.join("results.jsonl");
    let line = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, format!("{line}{line}")).unwrap();
    refused(
        &["report", dir.to_str().unwrap()],
        &[
            "records 1 and 2 are both `reference` of embedding_bag_sum",
            "appended to twice",
        ],
    );
    std::fs::remove_dir_all(&root).ok();
}

#[test]
fn a_resume_by_another_commit_is_refused_naming_both_and_changes_nothing() {
    let root = temp("resume-commit");
    // Made by commit `abc`: not this binary's.
    let dir = fabricated_run(&root, |_| {});
    let before = std::fs::read(dir.join("results.jsonl")).unwrap();
    refused(
        &["run", "--resume", dir.to_str().unwrap()],
        &["its records were made by commit abc, this binary is commit "],
    );
    assert_eq!(std::fs::read(dir.join("results.jsonl")).unwrap(), before);
    std::fs::remove_dir_all(&root).ok();
}

#[test]
fn a_resumed_run_json_with_an_option_out_of_range_is_refused_naming_the_field() {
    let root = temp("resume-bounds");
    let dir = fabricated_run(&root, |v| v["options"]["timeout_s"] = 1e308.into());
    let before = std::fs::read(dir.join("results.jsonl")).unwrap();
    refused(
        &["run", "--resume", dir.to_str().unwrap()],
        &["run.json: options: field `timeout_s` = 1", "at most 86400"],
    );
    assert_eq!(std::fs::read(dir.join("results.jsonl")).unwrap(), before);
    std::fs::remove_dir_all(&root).ok();
}

#[test]
fn report_refuses_to_pool_sets_of_different_backends_or_presets_unless_asked() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let gpu_full = repo.join("results/20261204T213806Z-gpu-full");
    let gpu_small = repo.join("results/20261204T213556Z-gpu-small");
    let root = temp("report-mixed");
    let emulator = fabricated_run(&root, |_| {});
    let (full, small, emu) = (
        gpu_full.to_str().unwrap(),
        gpu_small.to_str().unwrap(),
        emulator.to_str().unwrap(),
    );
    refused(
        &["report", full, emu],
        &[
            "different backends, devices or presets",
            "NVIDIA H200/full",
            "CPU emulator/ci",
            "--allow-mixed",
        ],
    );
    refused(
        &["report", full, small],
        &["NVIDIA H200/small", "--allow-mixed"],
    );
    refused(
        &[
            "project",
            full,
            emu,
            "--workload",
            "workloads/dlrm-dlrmv2-train-eager.toml",
        ],
        &["--allow-mixed"],
    );
    let out = dlrm_bench(&["report", full, emu, "--allow-mixed", "--csv"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        text.contains("@ NVIDIA H200/full") && text.contains("@ CPU emulator/ci"),
        "{text}"
    );
    std::fs::remove_dir_all(&root).ok();
}

#[test]
fn kernelbench_on_a_directory_of_badly_named_files_names_each() {
    let root = temp("kb-names");
    let dir = root.join("answers");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("foo.py"), "x").unwrap();
    std::fs::write(dir.join("99_bar.py"), "x").unwrap();
    refused(
        &["kernelbench", dir.to_str().unwrap(), "--cpu"],
        &[
            "no KernelBench answers in",
            "foo.py: `foo` is not a problem",
            "99_bar.py: `bar`",
        ],
    );
    std::fs::remove_dir_all(&root).ok();
}

#[test]
fn a_resume_on_another_backend_or_preset_is_refused_and_changes_nothing() {
    let gpu = |v: &mut serde_json::Value| {
        v["device"]["name"] = "NVIDIA H200".into();
        v["device"]["kind"] = "cuda".into();
        v["timings_are_gpu_timings"] = true.into();
        v["config"]["preset"] = "full".into();
        v["options"]["force_cpu"] = false.into();
        v["options"]["preset"] = serde_json::Value::Null;
    };
    let full = |v: &mut serde_json::Value| v["config"]["preset"] = "full".into();
    for (tag, edit, wanted) in [
        (
            "gpu",
            &gpu as &dyn Fn(&mut serde_json::Value),
            ["the GPU `NVIDIA H200` at preset `full`", "the CPU emulator"],
        ),
        ("preset", &full, ["at preset `full`", "at preset `ci`"]),
    ] {
        let root = temp(&format!("resume-{tag}"));
        let dir = fabricated_run(&root, edit);
        let files = ["run.json", "results.jsonl", ".secret_seed"];
        let before: Vec<Vec<u8>> = files
            .iter()
            .map(|f| std::fs::read(dir.join(f)).unwrap())
            .collect();
        let mut wanted = wanted.to_vec();
        wanted.push("cannot resume");
        refused(&["run", "--resume", dir.to_str().unwrap()], &wanted);
        for (f, b) in files.iter().zip(&before) {
            assert_eq!(
                &std::fs::read(dir.join(f)).unwrap(),
                b,
                "{tag}: {f} changed"
            );
        }
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), files.len(), "{tag}: {names:?}");
        std::fs::remove_dir_all(&root).ok();
    }
}

#[test]
fn project_warns_that_emulator_timings_are_not_gpu_timings() {
    let root = temp("project");
    let dir = fabricated_run(&root, |_| {});
    let workload = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../workloads/dlrm-dot-mlperf-tables-train-h200.toml");
    let o = dlrm_bench(&[
        "project",
        dir.to_str().unwrap(),
        "--workload",
        workload.to_str().unwrap(),
    ]);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("ran on the CPU emulator") && err.contains("NOT GPU timings"),
        "{err}"
    );
    // And on stdout, beside the projection it qualifies.
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("ran on the CPU emulator") && out.contains("say nothing about a GPU"),
        "{out}"
    );
    std::fs::remove_dir_all(&root).ok();
}

fn records(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Issue 13: `--candidates corpus` was recorded relative, so a resume from another directory
/// found none, dropped them, and published the secret seed. Also: a candidate that kills its
/// worker with SIGSEGV is recorded with what it was running and what the signal means.
#[test]
fn a_run_resumes_from_another_directory_with_its_candidates() {
    let root = temp("cwd");
    let corpus = corpus(&root);
    // Writes through a null pointer: a segmentation fault of the worker on the emulator.
    std::fs::create_dir_all(corpus.join("b_crash")).unwrap();
    std::fs::write(
        corpus.join("b_crash/candidate.toml"),
        "problem = \"embedding_bag_sum\"\nname = \"crash\"\nsource = \"gpu-kernels\"\n\
         [[launch]]\nkernel = \"fault_write_address\"\ngrid = [1, 1, 1]\nblock = [32, 1, 1]\n\
         args = [\"0\", \"16\"]\n",
    )
    .unwrap();
    let run = dlrm_bench_in(
        &root,
        &[
            "run",
            "--cpu",
            "--problem",
            "embedding_bag_sum",
            "--public-sets",
            "1",
            "--secret-sets",
            "1",
            "--rotation",
            "1",
            "--min-pairs",
            "2",
            "--max-pairs",
            "2",
            "--timeout-s",
            "60",
            "--candidates",
            "corpus",
            "--out",
            "results",
        ],
    );
    assert!(run.status.success(), "{}", stderr(&run));
    let dir = std::fs::read_dir(root.join("results"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let recs = records(&dir);
    // The reference and the good candidate at both ci shapes; the crash at the first only
    // (a candidate that failed at one shape is not run at the next).
    assert_eq!(recs.len(), 5, "{recs:?}");
    let crash = recs
        .iter()
        .find(|r| r["origin"].as_str().unwrap().ends_with("b_crash"))
        .unwrap();
    let msg = crash["message"].as_str().unwrap();
    assert_eq!(crash["status"], "runtime_error");
    for want in [
        "b_crash of embedding_bag_sum",
        "signal 11 (SIGSEGV: segmentation fault",
    ] {
        assert!(msg.contains(want), "no `{want}` in: {msg}");
    }
    let run_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    let seed = run_json["secret_seed"]
        .as_u64()
        .expect("published at the end");
    let roots = &run_json["options"]["candidate_roots"];
    assert_eq!(
        roots[0].as_str().unwrap(),
        std::fs::canonicalize(&corpus).unwrap().to_str().unwrap()
    );

    // As if interrupted after the reference: one record, the seed in .secret_seed only.
    let first = std::fs::read_to_string(dir.join("results.jsonl")).unwrap();
    let first = first.lines().next().unwrap().to_string() + "\n";
    std::fs::write(dir.join("results.jsonl"), &first).unwrap();
    let mut interrupted = run_json.clone();
    interrupted["secret_seed"] = "(written when the run ends)".into();
    let interrupted = serde_json::to_string_pretty(&interrupted).unwrap();
    std::fs::write(dir.join("run.json"), &interrupted).unwrap();
    std::fs::write(dir.join(".secret_seed"), seed.to_string()).unwrap();

    // The candidates gone: refused, naming them; nothing published, nothing changed.
    let elsewhere = root.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::rename(&corpus, root.join("moved")).unwrap();
    let dir_arg = dir.to_str().unwrap();
    let gone = dlrm_bench_in(&elsewhere, &["run", "--resume", dir_arg]);
    assert!(!gone.status.success());
    assert!(
        stderr(&gone).contains(&format!("--candidates {}", corpus.display())),
        "{}",
        stderr(&gone)
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("run.json")).unwrap(),
        interrupted
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("results.jsonl")).unwrap(),
        first
    );

    // Back in place: the resume from elsewhere evaluates them and publishes the same seed.
    std::fs::rename(root.join("moved"), &corpus).unwrap();
    let resumed = dlrm_bench_in(&elsewhere, &["run", "--resume", dir_arg]);
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    let again = records(&dir);
    assert_eq!(again.len(), 5, "{again:?}");
    let good = again
        .iter()
        .find(|r| r["origin"].as_str().unwrap().ends_with("d_good"))
        .expect("the candidate is evaluated, not dropped");
    assert_eq!(good["status"], "correct", "{good}");
    let run_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(run_json["secret_seed"].as_u64(), Some(seed));
    assert!(!dir.join(".secret_seed").exists());
    std::fs::remove_dir_all(&root).ok();
}
