//! The README's Slurm recipe (`tools/slurm/submit.sh` and `shards.sbatch`) on a real one-node
//! Slurm started for the test (`tools/slurm/local_cluster.sh`: munged, slurmctld and slurmd on
//! localhost, state in a temporary directory), at `ci` on the CPU emulator: a 2-task array and
//! its dependent merge give the records of one unsharded run of the same seeds, field by field
//! (timings aside); a task that fails ends its merge rather than leave it pending, and its
//! retry alone, then the merge alone, give the same records; `sweep score` goes through the same
//! recipe. Where the daemons cannot start (no slurm-wlm or munge, not root) the trial is
//! reported as ignored, saying why.
mod common;
use common::untimed;
use libtest_mimic::{Arguments, Trial};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn slurm_tool(name: &str) -> PathBuf {
    repo().join("tools/slurm").join(name)
}

fn main() {
    let args = Arguments::from_args();
    let dir = std::env::temp_dir().join(format!("dlrm-bench-slurm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let started = Command::new("bash")
        .arg(slurm_tool("local_cluster.sh"))
        .args(["start", dir.to_str().unwrap()])
        // Ports of this test's own, apart from a cluster the machine may run.
        .env(
            "SLURM_PORT",
            (17000 + std::process::id() % 2000 * 2).to_string(),
        )
        .output()
        .expect("bash runs");
    let why = (!started.status.success()).then(|| {
        String::from_utf8_lossy(&started.stderr)
            .lines()
            .next()
            .unwrap_or("")
            .to_string()
    });
    if let Some(why) = &why {
        eprintln!("SKIPPED the Slurm trials: the local cluster did not start: {why}");
    }
    let conf = dir.join("slurm.conf");
    let trials = vec![
        Trial::test("the_recipe_shards_fails_retries_and_merges", {
            let (dir, conf) = (dir.clone(), conf.clone());
            move || {
                the_recipe_shards_fails_retries_and_merges(&dir, &conf);
                Ok(())
            }
        })
        .with_ignored_flag(why.is_some()),
        Trial::test("sweep_scoring_goes_through_the_same_recipe", {
            let (dir, conf) = (dir.clone(), conf.clone());
            move || {
                sweep_scoring_goes_through_the_same_recipe(&dir, &conf);
                Ok(())
            }
        })
        .with_ignored_flag(why.is_some()),
    ];
    let mut trials = trials;
    trials.push(Trial::test(
        "the_guide_gives_the_scripts_this_test_runs",
        || {
            the_guide_gives_the_scripts_this_test_runs();
            Ok(())
        },
    ));
    let conclusion = libtest_mimic::run(&args, trials);
    let _ = Command::new("bash")
        .arg(slurm_tool("local_cluster.sh"))
        .args(["stop", dir.to_str().unwrap()])
        .output();
    if conclusion.num_failed == 0 {
        let _ = std::fs::remove_dir_all(&dir);
    }
    conclusion.exit();
}

/// A command run from the repository's root, talking to the test's cluster.
fn cmd(conf: &Path, program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new(program);
    // The jobs' output beside the cluster's state, not in the repository (sbatch's default).
    let out = conf.with_file_name("slurm-%j.out");
    c.current_dir(repo())
        .env("SLURM_CONF", conf)
        .env("SBATCH_OUTPUT", &out)
        .env("SBATCH_ERROR", &out)
        .env("DLRM_BENCH", env!("CARGO_BIN_EXE_dlrm-bench"))
        .env_remove(dlrm_bench::runner::shard::SECRET_ENV);
    c
}

fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "exit {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What `scontrol` says of job `id`'s field `field` (`JobState`), for every task of an array.
fn job_field(conf: &Path, id: &str, field: &str) -> Vec<String> {
    let out = cmd(conf, "scontrol")
        .args(["show", "job", id])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|w| w.strip_prefix(&format!("{field}=")))
        .map(str::to_string)
        .collect()
}

/// Waits until no job of `ids` is pending or running (at most 240 s).
fn wait_for(conf: &Path, ids: &[&str]) {
    let clock = Instant::now();
    loop {
        let out = cmd(conf, "squeue")
            .args(["-h", "-o", "%i %T", "-j", &ids.join(",")])
            .output()
            .unwrap();
        let queued = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if queued.is_empty() {
            return;
        }
        assert!(
            clock.elapsed() < Duration::from_secs(240),
            "still queued after 240 s: {queued}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// `tools/slurm/submit.sh [--merge-only] COUNT OUT MERGED ARGS...`: the job ids it printed.
fn submit(conf: &Path, env: &[(&str, &str)], head: &[&str], args: &[&str]) -> Vec<String> {
    let mut c = cmd(conf, "bash");
    c.arg(slurm_tool("submit.sh")).args(head).args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    ok(c.output().unwrap())
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

fn records(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("results.jsonl"))
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The one run directory under `out`.
fn only_run(out: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

/// `ARGS` at `ci` on the emulator, unsharded, into `out`, with the secret file `secret`.
fn unsharded(conf: &Path, args: &[&str], out: &Path, secret: &Path) -> Vec<Value> {
    ok(cmd(conf, env!("CARGO_BIN_EXE_dlrm-bench"))
        .args(args)
        .args(["--out", out.to_str().unwrap()])
        .args(["--secret-seed-file", secret.to_str().unwrap()])
        .output()
        .unwrap());
    records(&only_run(out))
}

const RUN: [&str; 12] = [
    "run",
    "--cpu",
    "--preset",
    "ci",
    "--problem",
    "1,7",
    "--candidates",
    "candidates/examples",
    "--candidates",
    "candidates/tuned",
    "--max-pairs",
    "4",
];

fn the_recipe_shards_fails_retries_and_merges(dir: &Path, conf: &Path) {
    let root = dir.join("recipe");
    std::fs::create_dir_all(&root).unwrap();
    let secret = root.join("secret");
    std::fs::write(&secret, "5151\n").unwrap();
    let single = untimed(&unsharded(conf, &RUN, &root.join("single"), &secret));
    let env = [("DLRM_BENCH_SECRET_FILE", secret.to_str().unwrap())];
    let (out, merged) = (root.join("shards"), root.join("merged"));
    let (o, m) = (out.to_str().unwrap(), merged.to_str().unwrap());

    let ids = submit(conf, &env, &["2", o, m], &RUN);
    assert_eq!(ids.len(), 2, "{ids:?}");
    wait_for(conf, &[&ids[0], &ids[1]]);
    assert_eq!(job_field(conf, &ids[1], "JobState"), ["COMPLETED"]);
    assert_eq!(untimed(&records(&merged)), single);
    // A second submission into the same OUT is refused: its tasks would resume these shards.
    let mut again = cmd(conf, "bash");
    again
        .arg(slurm_tool("submit.sh"))
        .args(["2", o, m])
        .args(RUN);
    let refused = again.env(env[0].0, env[0].1).output().unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("holds shards already"));

    // Task 1 fails before it starts (a node lost, say): the merge is ended, not left pending.
    let (out, merged) = (root.join("shards-2"), root.join("merged-2"));
    let (o, m) = (out.to_str().unwrap(), merged.to_str().unwrap());
    let failing = root.join("fails-once.sh");
    std::fs::write(
        &failing,
        format!(
            "#!/bin/bash\nif [[ $SLURM_ARRAY_TASK_ID == 1 && ! -e {flag} ]]; then touch {flag}; \
             exit 3; fi\nexec {bin} \"$@\"\n",
            flag = root.join("failed-once").display(),
            bin = env!("CARGO_BIN_EXE_dlrm-bench"),
        ),
    )
    .unwrap();
    let failing = failing.to_str().unwrap();
    let mut c = cmd(conf, "chmod");
    ok(c.args(["+x", failing]).output().unwrap());
    let env2 = [env[0], ("DLRM_BENCH", failing)];
    let ids = submit(conf, &env2, &["2", o, m], &RUN);
    wait_for(conf, &[&ids[0], &ids[1]]);
    let states = job_field(conf, &ids[0], "JobState");
    assert!(states.contains(&"FAILED".to_string()), "{states:?}");
    assert_eq!(job_field(conf, &ids[1], "JobState"), ["CANCELLED"]);
    assert!(!merged.exists());
    // The failed task again, alone, with the count written out; then the merge alone.
    let retry = ok(cmd(conf, "sbatch")
        .env("DLRM_BENCH", failing)
        .env(env[0].0, env[0].1)
        .args(["--parsable", "--array=1"])
        .arg(slurm_tool("shards.sbatch"))
        .args(["2", o])
        .args(RUN)
        .output()
        .unwrap());
    wait_for(conf, &[retry.trim()]);
    let ids = submit(conf, &env, &["--merge-only", "2", o, m], &[]);
    wait_for(conf, &[&ids[0]]);
    assert_eq!(job_field(conf, &ids[0], "JobState"), ["COMPLETED"]);
    assert_eq!(untimed(&records(&merged)), single);
    // A resubmitted task that finds its shard's directory resumes it (nothing is redone, and
    // no second directory is made for the shard).
    let again = ok(cmd(conf, "sbatch")
        .env(env[0].0, env[0].1)
        .args(["--parsable", "--array=0"])
        .arg(slurm_tool("shards.sbatch"))
        .args(["2", o])
        .args(RUN)
        .output()
        .unwrap());
    wait_for(conf, &[again.trim()]);
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 2);
}

fn sweep_scoring_goes_through_the_same_recipe(dir: &Path, conf: &Path) {
    let root = dir.join("sweep");
    std::fs::create_dir_all(&root).unwrap();
    let secret = root.join("secret");
    std::fs::write(&secret, "6262\n").unwrap();
    let score = [
        "sweep",
        "score",
        "sweeps/demo",
        "--cpu",
        "--preset",
        "ci",
        "--problem",
        "1,10",
        "--max-pairs",
        "4",
    ];
    let single = unsharded(conf, &score, &root.join("single"), &secret);
    assert!(
        single.iter().any(|r| r["group"]
            .as_str()
            .unwrap()
            .starts_with("demo-native-strong")),
        "the sweep's answers are scored"
    );
    let env = [("DLRM_BENCH_SECRET_FILE", secret.to_str().unwrap())];
    let (out, merged) = (root.join("shards"), root.join("merged"));
    let ids = submit(
        conf,
        &env,
        &["2", out.to_str().unwrap(), merged.to_str().unwrap()],
        &score,
    );
    wait_for(conf, &[&ids[0], &ids[1]]);
    assert_eq!(job_field(conf, &ids[1], "JobState"), ["COMPLETED"]);
    assert_eq!(untimed(&records(&merged)), untimed(&single));
}

/// The guide's recipe (docs/guide/clusters.md) is these scripts, not a copy of them that could drift.
fn the_guide_gives_the_scripts_this_test_runs() {
    let readme = std::fs::read_to_string(repo().join("docs/guide/clusters.md")).unwrap();
    for line in [
        "tools/slurm/submit.sh 8 results/sweep-1 results/sweep-1-merged run --preset full",
        "sbatch --array=3 tools/slurm/shards.sbatch 8 results/sweep-1 run --preset full",
        "tools/slurm/submit.sh --merge-only 8 results/sweep-1 results/sweep-1-merged",
    ] {
        assert!(
            readme.contains(line),
            "docs/guide/clusters.md lacks `{line}`"
        );
    }
    assert!(
        !readme.contains("#SBATCH"),
        "docs/guide/clusters.md holds a batch script of its own: point to tools/slurm/ instead"
    );
}
