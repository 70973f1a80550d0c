//! `sweep generate` and `sweep score` against a mock OpenAI-compatible server on 127.0.0.1:
//! answers extracted per format with their statuses, the cache (a re-run asks nothing twice),
//! retries and recorded failures, a sweep resumed after a kill, replayed responses, the API
//! key never written, and the scoring of the answers on the emulator.
use model_client::mock::{MockReply, MockServer};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const KEY: &str = "sk-mock-do-not-store-4242";

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dlrm-sweep-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dlrm-bench"));
    c.env("DLRM_SWEEP_TEST_KEY", KEY);
    c
}

fn generate(config: &Path, out: &Path, extra: &[&str]) -> Output {
    bin()
        .args(["sweep", "generate", "--config"])
        .arg(config)
        .arg("--out")
        .arg(out)
        .args(extra)
        .output()
        .unwrap()
}

fn answers(out: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(out.join("answers.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn model(name: &str, url: &str, format: &str, extra: &str) -> String {
    format!(
        "[[model]]\nname = \"{name}\"\nbase_url = \"{url}\"\nmodel = \"{name}-id\"\n\
         api_key_env = \"DLRM_SWEEP_TEST_KEY\"\nformat = \"{format}\"\nsamples = 2\n\
         problems = [1, \"kjt_permute\"]\ntimeout_s = 5\nmax_attempts = 2\n{extra}\n"
    )
}

const KB_ANSWER: &str =
    "Here it is:\n```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    pass\n```\n";

/// Problem 1 (its prompt says `embedding_bag_sum`) gets code; kjt_permute gets none, except
/// in the native format, where it gets two manifests.
fn replies(r: &model_client::mock::MockRequest) -> MockReply {
    let native = r.prompt.contains("candidate.toml");
    let bag = r.prompt.contains("embedding_bag_sum");
    match (native, bag) {
        (false, true) => MockReply::chat(KB_ANSWER),
        (false, false) => MockReply::chat("I would rather not."),
        (true, true) => MockReply::chat(
            "```toml\nname = \"m\"\nproblem = \"embedding_bag_sum\"\nsource = \"kernel.cu\"\n```\n\
             ```cuda\n__global__ void k() {}\n```",
        ),
        (true, false) => MockReply::chat("```toml\na = 1\n```\n```toml\na = 2\n```\n```cuda\n```"),
    }
}

#[test]
fn answers_are_extracted_with_their_statuses_and_a_rerun_asks_nothing() {
    let mock = MockServer::start(replies);
    let dir = scratch("basic");
    let cfg = dir.join("sweep.toml");
    let text = model("kb", &mock.base_url, "kernelbench", "")
        + &model("nat", &mock.base_url, "native", "");
    std::fs::write(&cfg, text).unwrap();
    let out = dir.join("sweep");
    let o = generate(&cfg, &out, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(mock.requests(), 8, "2 models x 2 problems x 2 samples");
    let a = answers(&out);
    let status = |m: &str, p: &str, s: u64| {
        a.iter()
            .find(|r| r["model"] == m && r["problem"] == p && r["sample"] == s)
            .map(|r| r["status"].as_str().unwrap().to_string())
            .unwrap()
    };
    assert_eq!(status("kb", "embedding_bag_sum", 1), "extracted");
    assert_eq!(status("kb", "kjt_permute", 0), "no_answer");
    assert_eq!(status("nat", "embedding_bag_sum", 0), "extracted");
    assert_eq!(status("nat", "kjt_permute", 1), "conflicting_blocks");
    let kb_file = out.join("answers/kb-s1/01_embedding_bag_sum.py");
    assert!(std::fs::read_to_string(kb_file)
        .unwrap()
        .contains("class ModelNew"));
    assert!(out
        .join("answers/nat-s0/embedding_bag_sum/candidate.toml")
        .is_file());
    assert!(out
        .join("answers/nat-s0/embedding_bag_sum/kernel.cu")
        .is_file());
    // Every request carried the key; nothing in the sweep's directory holds it.
    assert!(mock
        .seen()
        .iter()
        .all(|r| r.headers.get("authorization").map(String::as_str)
            == Some(&format!("Bearer {KEY}"))));
    assert_no_key(&out);
    // A re-run: all from the cache, the same answers.
    let o = generate(&cfg, &out, &[]);
    assert!(o.status.success());
    assert_eq!(mock.requests(), 8, "a re-run asked again");
    let b = answers(&out);
    assert!(b.iter().all(|r| r["cached"] == true));
    let strip = |v: &[serde_json::Value]| {
        v.iter()
            .map(|r| {
                (
                    r["model"].clone(),
                    r["problem"].clone(),
                    r["sample"].clone(),
                    r["status"].clone(),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(strip(&a), strip(&b));
    let _ = std::fs::remove_dir_all(&dir);
}

fn assert_no_key(dir: &Path) {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            stack.extend(std::fs::read_dir(&p).unwrap().flatten().map(|e| e.path()));
        } else {
            let bytes = std::fs::read(&p).unwrap();
            let text = String::from_utf8_lossy(&bytes);
            assert!(!text.contains(KEY), "{} holds the API key", p.display());
        }
    }
}

#[test]
fn failures_are_retried_recorded_and_asked_again_next_time() {
    // Problem 1: a 429 (Retry-After: 1) then an answer; kjt_permute: always 500.
    let mock = MockServer::start(|r| {
        if !r.prompt.contains("embedding_bag_sum") {
            return MockReply::status(500, "{\"error\":\"down\"}");
        }
        if r.nth == 0 {
            let mut m = MockReply::status(429, "{}");
            m.headers.push(("retry-after".into(), "1".into()));
            return m;
        }
        MockReply::chat(KB_ANSWER)
    });
    let dir = scratch("fail");
    let cfg = dir.join("sweep.toml");
    std::fs::write(
        &cfg,
        model("kb", &mock.base_url, "kernelbench", "samples = 1").replace("samples = 2\n", ""),
    )
    .unwrap();
    let out = dir.join("sweep");
    let o = generate(&cfg, &out, &[]);
    assert_eq!(o.status.code(), Some(1), "a failed request exits 1");
    let a = answers(&out);
    assert_eq!(a[0]["status"], "extracted");
    assert_eq!(a[0]["attempts"], 2);
    assert_eq!(a[1]["status"], "request_failed");
    assert_eq!(a[1]["message"], "HTTP 500");
    let failed = out
        .join("failed")
        .join(format!("{}.json", a[1]["key"].as_str().unwrap()));
    let kept: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(failed).unwrap()).unwrap();
    assert_eq!(
        (kept["attempts"].as_u64(), kept["raw"].as_str()),
        (Some(2), Some("{\"error\":\"down\"}"))
    );
    assert_eq!(mock.requests(), 4);
    // Again: the answer is cached, the failure asked again (twice more).
    let o = generate(&cfg, &out, &[]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(mock.requests(), 6);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_sweep_killed_midway_resumes_without_asking_twice() {
    let mock = MockServer::start(|_| {
        let mut m = MockReply::chat(KB_ANSWER);
        m.delay = Duration::from_millis(400);
        m
    });
    let dir = scratch("resume");
    let cfg = dir.join("sweep.toml");
    let text = model("kb", &mock.base_url, "kernelbench", "concurrency = 1")
        .replace("samples = 2", "samples = 4");
    std::fs::write(&cfg, text).unwrap();
    let out = dir.join("sweep");
    let mut child = bin()
        .args(["sweep", "generate", "--config"])
        .arg(&cfg)
        .arg("--out")
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while mock.requests() < 4 && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let before = mock.requests();
    assert!(before < 8, "the sweep ended before it was killed");
    let o = generate(&cfg, &out, &[]);
    assert!(o.status.success());
    let a = answers(&out);
    assert_eq!(a.len(), 8);
    assert!(a.iter().all(|r| r["status"] == "extracted"));
    // Only the one in flight when it was killed may have been asked twice.
    assert!(
        mock.requests() <= 9,
        "{} requests for 8 answers",
        mock.requests()
    );
    assert!(a.iter().filter(|r| r["cached"] == true).count() >= before - 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn replayed_responses_are_extracted_and_nothing_is_sent() {
    let mock = MockServer::start(|_| MockReply::status(500, "{}"));
    let dir = scratch("replay");
    let cfg = dir.join("sweep.toml");
    std::fs::write(&cfg, model("kb", &mock.base_url, "kernelbench", "")).unwrap();
    let responses = dir.join("responses.jsonl");
    let line = |p: serde_json::Value, s: u32, c: &str| {
        serde_json::json!({"model": "kb", "problem": p, "sample": s, "content": c,
                           "prompt_tokens": 100, "completion_tokens": 50})
        .to_string()
    };
    let text = [
        line(serde_json::json!(1), 0, KB_ANSWER),
        line(
            serde_json::json!("embedding_bag_sum"),
            1,
            "```python\nclass Model:\n    pass\n```",
        ),
        line(serde_json::json!("kjt_permute"), 0, "no code"),
    ]
    .join("\n");
    std::fs::write(&responses, text).unwrap();
    let out = dir.join("sweep");
    let o = generate(&cfg, &out, &["--responses", responses.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(mock.requests(), 0);
    let a = answers(&out);
    let statuses: Vec<&str> = a.iter().map(|r| r["status"].as_str().unwrap()).collect();
    assert_eq!(
        statuses,
        ["extracted", "wrong_class", "no_answer", "no_response"]
    );
    assert_eq!(a[0]["prompt_tokens"], 100);
    assert!(a[0]["replayed"] == true);
    // Run again from the sweep's own copy of its config (the demo's command): it stays whole.
    let kept = out.join("sweep.toml");
    let o = generate(&kept, &out, &["--responses", responses.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(std::fs::read_to_string(&kept)
        .unwrap()
        .contains("[[model]]"));
    // A live run never takes a replayed reply for the model's: it asks (here a 500).
    let o = generate(&cfg, &out, &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        mock.requests() >= 4,
        "replayed replies were reused as asked ones"
    );
    // A bad line is named with its file, line and field.
    std::fs::write(
        &responses,
        format!(
            "{}\n{{\"model\": \"kb\", \"problem\": 1}}",
            line(serde_json::json!(1), 0, "x")
        ),
    )
    .unwrap();
    let o = generate(&cfg, &out, &["--responses", responses.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("responses.jsonl:2"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_config_is_refused_naming_the_file_and_field() {
    let dir = scratch("config");
    let cfg = dir.join("sweep.toml");
    std::fs::write(
        &cfg,
        model(
            "kb",
            "http://127.0.0.1:9/v1",
            "kernelbench",
            "concurrency = 0",
        ),
    )
    .unwrap();
    let o = generate(&cfg, &dir.join("out"), &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "accepted");
    assert!(
        err.contains("sweep.toml") && err.contains("concurrency"),
        "{err}"
    );
    assert!(!dir.join("out").exists(), "a refused config leaves nothing");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn score_runs_the_extracted_answers_each_sample_its_own_group() {
    let dir = scratch("score");
    let cfg = dir.join("sweep.toml");
    let text =
        model("nat", "http://127.0.0.1:9/v1", "native", "").replace("[1, \"kjt_permute\"]", "[1]");
    std::fs::write(&cfg, text).unwrap();
    // A native answer (CUDA C++: skipped on the emulator, with its reason) and one that names
    // the project's own tuned kernel instead of shipping code: refused at extraction.
    let tuned = Path::new(env!("CARGO_MANIFEST_DIR")).join("../candidates/tuned/embedding_bag_sum");
    let manifest = std::fs::read_to_string(tuned.join("candidate.toml")).unwrap();
    let borrowed = format!("```toml\n{manifest}```\n```cuda\n// nothing\n```\n");
    let own = borrowed.replace("source = \"gpu-kernels\"", "source = \"kernel.cu\"");
    let responses = dir.join("responses.jsonl");
    let line = |s: u32, c: &str| {
        serde_json::json!({"model": "nat", "problem": 1, "sample": s, "content": c}).to_string()
    };
    std::fs::write(&responses, line(0, &own) + "\n" + &line(1, &borrowed)).unwrap();
    let out = dir.join("sweep");
    let o = generate(&cfg, &out, &["--responses", responses.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let a = answers(&out);
    assert_eq!(
        (a[0]["status"].as_str(), a[1]["status"].as_str()),
        (Some("extracted"), Some("foreign_source"))
    );
    let o = bin()
        .args(["sweep", "score"])
        .arg(&out)
        .args([
            "--cpu",
            "--public-sets",
            "1",
            "--secret-sets",
            "1",
            "--rotation",
            "1",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let runs: Vec<PathBuf> = std::fs::read_dir(out.join("results"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(runs.len(), 1, "one result set under the sweep");
    let records = std::fs::read_to_string(runs[0].join("results.jsonl")).unwrap();
    let recs: Vec<serde_json::Value> = records
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The reference at both ci shapes; the answer skipped at the first (so not run again).
    assert_eq!(
        recs.len(),
        3,
        "the references and the one answer: {records}"
    );
    assert!(recs.iter().all(|r| r["problem"] == "embedding_bag_sum"));
    let answer = recs
        .iter()
        .find(|r| r["group"] == "nat-s0")
        .expect("the answer's group");
    assert_eq!(answer["status"], "skipped", "{answer}");
    assert!(
        answer["message"].as_str().unwrap().contains("needs a GPU"),
        "{answer}"
    );
    // The report: two answers, one extracted, none correct (skipped on the emulator).
    let o = bin().args(["sweep", "report"]).arg(&out).output().unwrap();
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        table.contains("| nat | 2 | 2 | 1 | 0.0% | 0.000 | 0.000 | 0.0% (0/1) |"),
        "{table}"
    );
    for f in ["report.md", "report.json", "report.html"] {
        assert!(out.join(f).is_file(), "{f}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The committed demonstration sweep (tools/demo_sweep.py): its 72 replies extract to the
/// statuses its docstring promises, with answers written by several threads at once.
#[test]
fn the_demonstration_sweep_extracts_its_72_answers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sweeps/demo");
    let out = scratch("demo").join("sweep");
    let o = generate(
        &root.join("sweep.toml"),
        &out,
        &[
            "--responses",
            root.join("responses.jsonl").to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let a = answers(&out);
    assert_eq!(a.len(), 72);
    let count = |m: &str, s: &str| {
        a.iter()
            .filter(|r| r["model"] == m && r["status"] == s)
            .count()
    };
    assert_eq!(count("demo-native-strong", "extracted"), 24);
    assert_eq!(count("demo-native-cheater", "extracted"), 24);
    assert_eq!(count("demo-kernelbench", "extracted"), 13);
    assert_eq!(count("demo-kernelbench", "conflicting_blocks"), 6);
    assert_eq!(count("demo-kernelbench", "no_answer"), 5);
    let py = std::fs::read_dir(out.join("answers/demo-kernelbench-s0"))
        .unwrap()
        .count();
    let native = std::fs::read_dir(out.join("answers/demo-native-strong-s1"))
        .unwrap()
        .count();
    assert_eq!((py, native), (12, 12));
    let _ = std::fs::remove_dir_all(out.parent().unwrap());
}
