//! `dlrm-bench check` on bad manifests (issue 13): every launch `run` refuses fails the check,
//! with a non-zero exit and a message naming the file and the field; a directory named several
//! times is checked once; two candidates with one problem and name fail, naming both files.
//! The candidates use the project's own kernels (`source = "gpu-kernels"`), so no NVRTC is
//! needed. Also the KernelBench intake on a machine without torch or a GPU (answers skipped,
//! saying why; bad answer files recorded as such) and the CPU tests of the evaluator's logic
//! (tools/test_kernelbench_eval.py) and of the workload profiler's attribution
//! (tools/test_kernel_classes.py), and the HTML report in headless Chromium, kept in this
//! binary to spare CI a link.
//! `dlrm-bench prompt`, the other subcommand that prepares candidates without a GPU,
//! is run here too.
use std::path::{Path, PathBuf};
use std::process::Output;

fn check(dirs: &[&Path]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_dlrm-bench"))
        .arg("check")
        .args(dirs)
        .output()
        .expect("the binary runs")
}

/// The tuned embedding_bag_sum candidate (`NAME` is its name).
const GOOD: &str = r#"
problem = "embedding_bag_sum"
name = "NAME"
source = "gpu-kernels"
[[launch]]
kernel = "embedding_bag_sum_warp_per_bag"
grid = ["ceil_div(B * 32, 256)", 1, 1]
block = [256, 1, 1]
shared_bytes = 0
args = ["weight", "indices", "offsets", "out", "B", "D"]
"#;

fn root(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dlrm-bench-check-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Writes `GOOD` named `name`, with `from` replaced by `to`, into `dir`.
fn candidate(dir: &Path, name: &str, from: &str, to: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let text = GOOD.replace("NAME", name).replace(from, to);
    std::fs::write(dir.join("candidate.toml"), text).unwrap();
    dir.to_path_buf()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn a_good_candidate_passes() {
    let r = root("good");
    let dir = candidate(&r.join("a"), "a", "", "");
    let o = check(&[&dir]);
    assert!(o.status.success(), "{}", stdout(&o));
    assert!(stdout(&o).contains("ok   "), "{}", stdout(&o));
    std::fs::remove_dir_all(&r).unwrap();
}

fn launches_run_refuses_fail_the_check() {
    let r = root("launch");
    let grid = "\"ceil_div(B * 32, 256)\", 1, 1";
    let cases = [
        (grid, "0, 1, 1", "launch[0].grid[0] = 0"),
        (grid, "\"0 - B\", 1, 1", "launch[0].grid[0] = -"),
        ("[256, 1, 1]", "[2048, 1, 1]", "launch[0].block[0] = 2048"),
        ("[256, 1, 1]", "[256, 8, 1]", "2048 threads per block"),
        (
            "shared_bytes = 0",
            "shared_bytes = 10485760",
            "shared_bytes = 10485760",
        ),
        // Issue 13: a fourth value was silently dropped.
        (
            "[256, 1, 1]",
            "[256, 1, 1, 4]",
            "field `launch[0].block`: 4 values",
        ),
    ];
    for (k, (from, to, want)) in cases.iter().enumerate() {
        let dir = candidate(&r.join(format!("c{k}")), "c", from, to);
        let o = check(&[&dir]);
        let out = stdout(&o);
        let file = format!("{}/candidate.toml", dir.display());
        assert!(!o.status.success(), "case {k}: {out}");
        assert!(
            out.contains("FAIL") && out.contains(&file),
            "case {k}: {out}"
        );
        assert!(out.contains(want), "case {k}: expected `{want}` in {out}");
    }
    std::fs::remove_dir_all(&r).unwrap();
}

fn bad_names_and_statuses_fail_naming_the_field() {
    let r = root("names");
    let scratch = "[[scratch]]\nname = \"out\"\nbytes = 8\n[[launch]]";
    let cases = [
        (
            "[[launch]]",
            scratch,
            "field `scratch[0].name`: `out` is already the name of a tensor",
        ),
        ("name = \"n\"", "name = \"a|b\"", "field `name`"),
        (
            "name = \"n\"",
            "name = \"\"",
            "field `name`: must not be empty",
        ),
        ("kernel = \"", "kernel = \"x/", "field `launch[0].kernel`"),
        (
            "source",
            "expect = \"banana\"\nsource",
            "field `expect`: `banana` is not a status",
        ),
    ];
    for (k, (from, to, want)) in cases.iter().enumerate() {
        let dir = candidate(&r.join(format!("c{k}")), "n", from, to);
        let o = check(&[&dir]);
        let out = stdout(&o);
        assert!(!o.status.success(), "case {k}: {out}");
        let file = format!("{}/candidate.toml", dir.display());
        assert!(
            out.contains(&file) && out.contains(want),
            "case {k}: expected `{want}` in {out}"
        );
    }
    std::fs::remove_dir_all(&r).unwrap();
}

fn a_directory_given_thrice_is_checked_once_and_a_second_name_is_told_apart() {
    let r = root("dups");
    let a = candidate(&r.join("a"), "same", "", "");
    let again = r.join("b/../a");
    std::fs::create_dir_all(r.join("b")).unwrap();
    let o = check(&[&a, &again, &a]);
    let out = stdout(&o);
    assert!(o.status.success(), "{out}");
    assert_eq!(out.matches("ok   ").count(), 1, "{out}");

    // A second directory of the same group, problem and name: both are checked, the later one
    // told apart by its directory, with a note naming both files.
    let b = candidate(&r.join("b"), "same", "", "");
    let o = check(&[&a, &b]);
    let out = stdout(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{out}{err}");
    assert_eq!(out.matches("ok   ").count(), 2, "{out}");
    let (fa, fb) = (a.join("candidate.toml"), b.join("candidate.toml"));
    assert!(
        err.contains(&fa.display().to_string())
            && err.contains(&fb.display().to_string())
            && err.contains(&format!("reported as `same ({})`", b.display())),
        "{err}"
    );
    std::fs::remove_dir_all(&r).unwrap();
}

fn kernelbench_evaluator_logic_passes_its_cpu_tests() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = match std::process::Command::new("python3")
        .args([
            "-m",
            "unittest",
            "discover",
            "-s",
            "tools",
            "-p",
            "test_*.py",
        ])
        .current_dir(&repo)
        .output()
    {
        Ok(out) => out,
        Err(e) => panic!("python3: {e}"),
    };
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("OK"), "{text}");
    // unittest's skips (tests that need torch or pyflakes) are reported as skips.
    if let Some(n) = text.split("skipped=").nth(1) {
        let n: String = n.chars().take_while(char::is_ascii_digit).collect();
        eprintln!(
            "SKIPPED {n} of the tools' Python tests (no torch or pyflakes here; the torch \
             ones run on the GPU host: `tools/gpu_session.sh pytests`)"
        );
    }
}

/// `dlrm-bench kernelbench ANSWERS --cpu` (quick timing) into `out`: its records, in order.
fn kernelbench_on_cpu(answers: &Path, out: &Path) -> Vec<serde_json::Value> {
    kernelbench_on_cpu_with(answers, out, &[])
}

/// [`kernelbench_on_cpu`] with `problems` named (`--problem`; none: the answers' own).
fn kernelbench_on_cpu_with(
    answers: &Path,
    out: &Path,
    problems: &[&str],
) -> Vec<serde_json::Value> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_dlrm-bench"))
        .args([
            "kernelbench",
            "--cpu",
            "--budget-s",
            "1",
            "--max-pairs",
            "2",
        ])
        .args(problems.iter().flat_map(|p| ["--problem", p]))
        .arg(answers)
        .arg("--out")
        .arg(out)
        .current_dir(&repo)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{err}");
    let dir = std::fs::read_dir(out)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::read_to_string(dir.join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Each record's "group problem", in the order of `records`.
fn group_and_problem(records: &[serde_json::Value]) -> Vec<String> {
    records
        .iter()
        .map(|r| {
            format!(
                "{} {}",
                r["group"].as_str().unwrap(),
                r["problem"].as_str().unwrap()
            )
        })
        .collect()
}

fn kernelbench_answers_without_torch_are_skipped_and_bad_files_recorded() {
    let dir = root("kernelbench");
    let answers = dir.join("model_a");
    std::fs::create_dir_all(&answers).unwrap();
    std::fs::write(
        answers.join("01_embedding_bag_sum.py"),
        "class ModelNew: pass\n",
    )
    .unwrap();
    std::fs::write(answers.join("05_embedding_bag_sum.py"), "").unwrap();
    let records = kernelbench_on_cpu(&answers, &dir.join("results"));
    let by = |status: &str| {
        records
            .iter()
            .filter(|r| r["status"] == status)
            .collect::<Vec<_>>()
    };
    // The bad name is recorded, the good answer skipped (no torch, no GPU), and only
    // embedding_bag_sum ran: its reference is correct.
    let invalid = by("invalid_manifest");
    assert_eq!(invalid.len(), 1, "{records:?}");
    assert!(invalid[0]["message"]
        .as_str()
        .unwrap()
        .contains("number 5 does not match problem 1"));
    let skipped = by("skipped");
    assert_eq!(skipped.len(), 1, "{records:?}");
    assert_eq!(skipped[0]["group"], "model_a");
    assert!(skipped[0]["origin"]
        .as_str()
        .unwrap()
        .starts_with("kernelbench:"));
    assert!(skipped[0]["message"]
        .as_str()
        .unwrap()
        .contains("need python3 with torch and a CUDA GPU"));
    let references: Vec<_> = records
        .iter()
        .filter(|r| r["group"] == "reference")
        .collect();
    assert_eq!(references.len(), 1);
    assert_eq!(references[0]["problem"], "embedding_bag_sum");
    assert_eq!(references[0]["status"], "correct");
    std::fs::remove_dir_all(&dir).ok();
}

/// A problem's KernelBench answers wait for the references of the next two problems (their
/// builds get that time; `runner::units::ANSWER_LAG`), and every answer and reference is there.
fn a_problems_answers_come_after_the_next_two_references() {
    let dir = root("answer-lag");
    let answers = dir.join("model_a");
    std::fs::create_dir_all(&answers).unwrap();
    for file in [
        "09_unique_indices.py",
        "10_dot_interaction.py",
        "11_dot_interaction_backward.py",
        "12_fm_interaction.py",
    ] {
        std::fs::write(answers.join(file), "class ModelNew: pass\n").unwrap();
    }
    let order = group_and_problem(&kernelbench_on_cpu(&answers, &dir.join("results")));
    let expected = [
        "reference unique_indices",
        "reference dot_interaction",
        "reference dot_interaction_backward",
        "model_a unique_indices",
        "reference fm_interaction",
        "model_a dot_interaction",
        "model_a dot_interaction_backward",
        "model_a fm_interaction",
    ];
    assert_eq!(order, expected);
    // Units without answers count: one problem's answers among four problems come after the
    // next two references, not after every other.
    let only = dir.join("only_one");
    std::fs::create_dir_all(&only).unwrap();
    std::fs::write(only.join("09_unique_indices.py"), "class ModelNew: pass\n").unwrap();
    let problems = [
        "unique_indices",
        "dot_interaction",
        "dot_interaction_backward",
        "fm_interaction",
    ];
    let order = group_and_problem(&kernelbench_on_cpu_with(
        &only,
        &dir.join("results-one"),
        &problems,
    ));
    let expected = [
        "reference unique_indices",
        "reference dot_interaction",
        "reference dot_interaction_backward",
        "only_one unique_indices",
        "reference fm_interaction",
    ];
    assert_eq!(order, expected);
    std::fs::remove_dir_all(&dir).ok();
}

fn prompt_prints_the_kernelbench_prompt_from_any_directory() {
    let elsewhere = std::env::temp_dir();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_dlrm-bench"))
        .current_dir(&elsewhere)
        .args(["prompt", "1", "--format", "kernelbench"])
        .output()
        .expect("the binary runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = stdout(&o);
    let model = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../bench-problems/kernelbench/01_embedding_bag_sum.py"),
    )
    .unwrap();
    assert!(text.contains(&model), "the Model file, verbatim");
    assert!(text.contains("class ModelNew(nn.Module):") && text.contains("load_inline("));
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_dlrm-bench"))
        .args(["prompt", "99", "--format", "native"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown problem `99`"));
}

/// A Chromium (or Chrome) binary on PATH, or the one `$CHROMIUM` names.
fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CHROMIUM").map(PathBuf::from) {
        return p.is_file().then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome", "chrome"]
        .iter()
        .flat_map(|n| std::env::split_paths(&path).map(move |d| d.join(n)))
        .find(|p| p.is_file())
}

/// The value of attribute `name` in the opening tag `tag`.
fn attribute<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    tag[start..].split('"').next()
}

/// `report --html` on the committed H200 set, loaded in headless Chromium: the DOM after
/// load says the page's check ran (so its script ran) with no script error, and every plot
/// there has as many circles as it has data points.
fn the_html_report_renders_whole_in_headless_chromium(browser: &Path) {
    let dir = root("html");
    std::fs::create_dir_all(&dir).unwrap();
    let set =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../results/20261201T193405Z-gpu-full");
    let html = dir.join("report.html");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_dlrm-bench"))
        .arg("report")
        .arg(&set)
        .arg("--html")
        .arg(&html)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = std::process::Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", html.display()))
        .output()
        .unwrap();
    let (dom, log) = (stdout(&o), String::from_utf8_lossy(&o.stderr).into_owned());
    assert!(o.status.success(), "{log}");
    assert!(!log.contains("Uncaught"), "a script error: {log}");
    assert!(!dom.contains("data-script-errors=\""), "{dom}");
    assert!(
        dom.contains("data-check=\"ok\""),
        "the page's own check: {dom}"
    );
    let figures: Vec<&str> = dom.split("<figure ").skip(1).collect();
    // Speedups, roofline, floor share, and six of the input statistics: four pooling
    // histograms, tbe_forward_fp16's tables, block_bucketize's ids per rank.
    assert_eq!(figures.len(), 9, "plots in {}", html.display());
    for f in figures {
        let tag = &f[..f.find('>').unwrap()];
        let body = &f[..f.find("</figure>").unwrap()];
        let id = attribute(tag, "id").unwrap_or("?");
        let points: usize = attribute(tag, "data-points").unwrap().parse().unwrap();
        assert!(points > 0, "{id} has no data");
        assert_eq!(
            attribute(tag, "data-marks"),
            Some(&*points.to_string()),
            "{id}"
        );
        assert_eq!(body.matches("<circle").count(), points, "{id} in the DOM");
    }
    std::fs::remove_dir_all(&dir).ok();
}

fn workload_profiler_attribution_passes_its_cpu_tests() {
    // tools/test_kernel_classes.py on its own (the discovery above runs it too): the name rules
    // on the fixture kernel lists, the trace attribution, the TOML/CSV and the torch-free parts
    // of tools/profile_workload.py.
    let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools");
    let out = match std::process::Command::new("python3")
        .args(["-m", "unittest", "-v", "test_kernel_classes"])
        .current_dir(&tools)
        .output()
    {
        Ok(out) => out,
        Err(e) => panic!("python3: {e}"),
    };
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    for name in [
        "test_every_fixture_kernel_gets_its_class",
        "test_regions_backward_optimizer_and_names",
        "test_compiles_and_imports_without_torch",
    ] {
        assert!(
            text.contains(&format!("{name} ")),
            "{name} did not run: {text}"
        );
    }
    assert!(text.contains("OK"), "{text}");
}

/// `check` compiles a Triton candidate where Triton is installed (no GPU needed): the example
/// passes, saying what Triton made of it; a kernel Triton refuses (a block that is not a power
/// of two) fails with Triton's message, naming the file.
fn check_compiles_triton_candidates() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../candidates/examples/fm_interaction/triton_fused");
    let o = check(&[&example]);
    let out = stdout(&o);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains("compiled by Triton") && out.contains("kernel fm_triton"),
        "{out}"
    );
    let r = root("triton-bad");
    std::fs::create_dir_all(&r).unwrap();
    for name in ["candidate.toml", "kernel.py"] {
        std::fs::copy(example.join(name), r.join(name)).unwrap();
    }
    let kernel = std::fs::read_to_string(r.join("kernel.py")).unwrap();
    let bad = kernel.replace("tl.arange(0, BLOCK_B)", "tl.arange(0, 3)");
    assert_ne!(
        bad, kernel,
        "the example's kernel changed: update this test"
    );
    std::fs::write(r.join("kernel.py"), bad).unwrap();
    let o = check(&[&r]);
    let all = format!("{}{}", stdout(&o), String::from_utf8_lossy(&o.stderr));
    assert!(!o.status.success(), "{all}");
    assert!(
        all.contains("Triton did not compile it") && all.contains("kernel.py"),
        "{all}"
    );
    std::fs::remove_dir_all(&r).unwrap();
}

/// A Triton candidate's module-level Python runs while it compiles: under bubblewrap it sees
/// neither what the orchestrator hides (`DLRM_BENCH_SANDBOX_HIDE`: here a cache directory and
/// a secret-seed file) nor `/dev/shm`, nor the suite's own environment, writes nothing outside
/// its scratch directory, and holds no capability. The probe reports what it could do by
/// failing the import with a message, which `check` shows.
fn a_triton_candidates_python_is_confined_while_it_compiles() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../candidates/examples/fm_interaction/triton_fused");
    let r = root("triton-probe");
    let (cand, cache, outside) = (r.join("cand"), r.join("cache"), r.join("planted"));
    let seed = r.join("seed");
    std::fs::create_dir_all(&cand).unwrap();
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::write(cache.join("secret-set.bin"), b"sets and oracles").unwrap();
    std::fs::write(&seed, b"12345").unwrap();
    // A file in /dev/shm (the default input cache's home) the probe must not see.
    let shm_file = PathBuf::from(format!(
        "/dev/shm/dlrm-check-visible-{}",
        std::process::id()
    ));
    std::fs::write(&shm_file, b"x").unwrap();
    std::fs::copy(example.join("candidate.toml"), cand.join("candidate.toml")).unwrap();
    let probe = format!(
        "import os\n\
         def _can_write(p):\n    try:\n        open(p, 'w').write('x')\n        return True\n    except OSError:\n        return False\n\
         def _read(p):\n    try:\n        return len(open(p).read())\n    except OSError:\n        return -1\n\
         _caps = [l.split()[1] for l in open('/proc/self/status') if l.startswith('CapEff')][0]\n\
         _env = any(k.startswith('DLRM_BENCH_') for k in os.environ)\n\
         raise RuntimeError(f'PROBE seen={{os.path.exists({secret:?})}} \
         wrote={{_can_write({outside:?})}} shm_written={{_can_write(\"/dev/shm/dlrm-probe\")}} \
         shm_listed={{os.path.exists({shm_file:?})}} seed_read={{_read({seed:?}) > 0}} \
         caps={{_caps}} own_env={{_env}}')\n",
        secret = cache.join("secret-set.bin").display().to_string(),
        outside = outside.display().to_string(),
        shm_file = shm_file.display().to_string(),
        seed = seed.display().to_string(),
    );
    let kernel = std::fs::read_to_string(example.join("kernel.py")).unwrap();
    std::fs::write(cand.join("kernel.py"), format!("{probe}{kernel}")).unwrap();
    let hide = std::env::join_paths([&cache, &seed]).unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_dlrm-bench"))
        .arg("check")
        .arg(&cand)
        .env("DLRM_BENCH_SANDBOX_HIDE", hide)
        .output()
        .unwrap();
    let all = format!("{}{}", stdout(&o), String::from_utf8_lossy(&o.stderr));
    assert!(!o.status.success(), "{all}");
    assert!(
        all.contains(
            "PROBE seen=False wrote=False shm_written=False shm_listed=False seed_read=False \
             caps=0000000000000000 own_env=False"
        ),
        "the probe ran and was confined: {all}"
    );
    assert!(!outside.exists() && !Path::new("/dev/shm/dlrm-probe").exists());
    std::fs::remove_dir_all(&r).unwrap();
    std::fs::remove_file(&shm_file).unwrap();
}

/// Each trial; those whose tool is missing (python3, Chromium) are reported as ignored, saying
/// why on stderr.
fn main() {
    let args = libtest_mimic::Arguments::from_args();
    let no_python = std::process::Command::new("python3")
        .arg("--version")
        .output()
        .err()
        .map(|e| format!("python3 is not here ({e})"));
    let browser = chromium();
    let no_browser = browser
        .is_none()
        .then(|| "no chromium on PATH (apt-get install chromium, or set CHROMIUM)".to_string());
    let no_triton = no_python.clone().or_else(|| {
        let ok = std::process::Command::new("python3")
            .args(["-c", "import triton"])
            .output()
            .is_ok_and(|o| o.status.success());
        (!ok).then(|| "Triton is not installed (python3 -m pip install triton)".to_string())
    });
    let no_bwrap = || {
        let found = dlrm_bench::toolchain::sandbox::detected().isolation;
        (found != dlrm_bench::toolchain::sandbox::Isolation::Bubblewrap)
            .then(|| format!("bubblewrap does not work here (found {found:?})"))
    };
    let mut trials = vec![
        trial("a_good_candidate_passes", a_good_candidate_passes, None),
        trial(
            "check_compiles_triton_candidates",
            check_compiles_triton_candidates,
            no_triton.clone(),
        ),
        trial(
            "a_triton_candidates_python_is_confined_while_it_compiles",
            a_triton_candidates_python_is_confined_while_it_compiles,
            no_triton.clone().or_else(no_bwrap),
        ),
        trial(
            "launches_run_refuses_fail_the_check",
            launches_run_refuses_fail_the_check,
            None,
        ),
        trial(
            "bad_names_and_statuses_fail_naming_the_field",
            bad_names_and_statuses_fail_naming_the_field,
            None,
        ),
        trial(
            "a_directory_given_thrice_is_checked_once_and_a_second_name_is_told_apart",
            a_directory_given_thrice_is_checked_once_and_a_second_name_is_told_apart,
            None,
        ),
        trial(
            "kernelbench_evaluator_logic_passes_its_cpu_tests",
            kernelbench_evaluator_logic_passes_its_cpu_tests,
            no_python.clone(),
        ),
        trial(
            "kernelbench_answers_without_torch_are_skipped_and_bad_files_recorded",
            kernelbench_answers_without_torch_are_skipped_and_bad_files_recorded,
            None,
        ),
        trial(
            "a_problems_answers_come_after_the_next_two_references",
            a_problems_answers_come_after_the_next_two_references,
            None,
        ),
        trial(
            "prompt_prints_the_kernelbench_prompt_from_any_directory",
            prompt_prints_the_kernelbench_prompt_from_any_directory,
            None,
        ),
        trial(
            "workload_profiler_attribution_passes_its_cpu_tests",
            workload_profiler_attribution_passes_its_cpu_tests,
            no_python.clone(),
        ),
    ];
    trials.push(trial(
        "the_html_report_renders_whole_in_headless_chromium",
        move || {
            the_html_report_renders_whole_in_headless_chromium(
                browser.as_deref().expect("not ignored"),
            )
        },
        no_browser,
    ));
    libtest_mimic::run(&args, trials).exit();
}

/// A trial running `f`, ignored when `missing` says what it lacks.
fn trial(
    name: &'static str,
    f: impl FnOnce() + Send + 'static,
    missing: Option<String>,
) -> libtest_mimic::Trial {
    if let Some(why) = &missing {
        eprintln!("SKIPPED {name}: {why}");
    }
    libtest_mimic::Trial::test(name, move || {
        f();
        Ok(())
    })
    .with_ignored_flag(missing.is_some())
}
