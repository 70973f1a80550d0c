//! Tests of [`super`].
use super::*;
use std::ffi::OsString;
use std::time::{Duration, Instant};

/// A stand-in for `torch_peer.py --serve` (Python 3 stdlib only). It appends its pid to the
/// file given first (one line per start) and answers by the request's problem: `hang`
/// sleeps, `exit` exits without answering, `error` answers an error, `noise` writes a stray
/// line first, `last` answers and then exits; any other problem gets a record (appended to
/// `out`) holding the server's pid. With `linger` second, it sleeps at EOF.
const FAKE_SERVER: &str = r#"
import json, os, sys, time
with open(sys.argv[1], "a") as f:
    f.write(f"{os.getpid()}\n")
print("fake peer: serving", file=sys.stderr, flush=True)
for line in sys.stdin:
    req = json.loads(line)
    problem = req["problem"]
    if problem == "hang":
        time.sleep(600)
    if problem == "exit":
        sys.exit(3)
    if problem == "error":
        print(json.dumps({"ok": False, "error": "no such thing"}), flush=True)
        continue
    if problem == "noise":
        print("a stray line", flush=True)
    record = {"tool": "torch_peer", "problem": problem, "median_ms": 2.0, "pid": os.getpid(),
              "inputs": req["inputs"], "check": req["check"], "iters": req["iters"]}
    if req.get("out"):
        with open(req["out"], "a") as f:
            f.write(json.dumps(record) + "\n")
    print(json.dumps({"ok": True, "record": record}), flush=True)
    if problem == "last":
        sys.exit(0)
if len(sys.argv) > 2 and sys.argv[2] == "linger":
    time.sleep(600)
"#;

/// A scratch directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("dlrm-peer-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    /// How many servers have started (lines of the pid file).
    fn starts(&self) -> usize {
        std::fs::read_to_string(self.0.join("starts"))
            .unwrap_or_default()
            .lines()
            .count()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn python3_available() -> bool {
    let ok = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipping: python3 is not on PATH");
    }
    ok
}

/// A fake server in a scratch directory (`None`, after saying so, without python3).
fn fake_server(tag: &str, extra: &[&str]) -> Option<(Scratch, PeerServer)> {
    if !python3_available() {
        return None;
    }
    let scratch = Scratch::new(tag);
    let script = scratch.0.join("fake_peer.py");
    std::fs::write(&script, FAKE_SERVER).unwrap();
    let mut args: Vec<OsString> = vec![script.into(), scratch.0.join("starts").into()];
    args.extend(extra.iter().map(OsString::from));
    let mut server = PeerServer::program("torch", "python3", args);
    server.timeout_s = 20.0;
    server.shutdown_grace_s = 10.0;
    Some((scratch, server))
}

fn request<'a>(problem: &'a str, out: &'a Path) -> PeerRequest<'a> {
    PeerRequest {
        problem,
        shape: None,
        inputs: vec![PathBuf::from("set0.safetensors")],
        out,
        check: true,
        check_sets: None,
        iters: 3,
        warmup: 1,
        compile: false,
    }
}

#[test]
fn a_normal_answer_returns_its_record_and_the_peer_file_holds_it() {
    let Some((scratch, mut server)) = fake_server("normal", &[]) else {
        return;
    };
    let out = scratch.0.join("peer.jsonl");
    let record = server.request(&request("embedding_bag_sum", &out)).unwrap();
    assert_eq!(record["median_ms"], 2.0);
    assert_eq!(record["inputs"], serde_json::json!(["set0.safetensors"]));
    assert_eq!(record["check"], true);
    let second = server.request(&request("fm_interaction", &out)).unwrap();
    assert_eq!(second["pid"], record["pid"], "one server for both requests");
    assert_eq!(scratch.starts(), 1);

    let peers = load_peers(&peer_files(&[], &out));
    assert_eq!(peers.len(), 2);
    let mut reference = Record::new("fm_interaction", "reference", "reference", "reference");
    reference.timing = Some(crate::results::record::Timing {
        median_ms: 3.0,
        ..Default::default()
    });
    attach_peer(&mut reference, &peers);
    let peer = reference.pytorch.unwrap();
    assert_eq!(peer.median_ms, 2.0);
    assert_eq!(peer.reference_over_pytorch, 1.5);
    assert_eq!(peer.source, out.display().to_string());

    let ending = server.shutdown().unwrap();
    assert!(!ending.killed);
    assert!(ending.status.unwrap().success());
    assert!(server.shutdown().is_none(), "nothing left to end");
}

#[test]
fn eager_and_compiled_times_go_to_their_own_fields_and_a_compile_failure_says_why() {
    let scratch = Scratch::new("compile");
    let file = scratch.0.join("peer.jsonl");
    std::fs::write(
            &file,
            [
                r#"{"problem": "fm_interaction", "median_ms": 2.0}"#,
                r#"{"problem": "fm_interaction", "impl": "pytorch_compile", "median_ms": 0.5}"#,
                r#"{"problem": "kjt_permute", "impl": "pytorch_eager", "median_ms": 4.0}"#,
                r#"{"problem": "kjt_permute", "impl": "pytorch_compile", "error": "torch.compile failed: X"}"#,
            ]
            .join("\n"),
        )
        .unwrap();
    let peers = load_peers(std::slice::from_ref(&file));
    assert_eq!(peers.len(), 4);
    let reference = |problem: &str| {
        let mut r = Record::new(problem, "reference", "reference", "reference");
        r.timing = Some(crate::results::record::Timing {
            median_ms: 1.0,
            ..Default::default()
        });
        attach_peer(&mut r, &peers);
        r
    };
    let fm = reference("fm_interaction");
    assert_eq!(fm.pytorch.as_ref().unwrap().median_ms, 2.0);
    let compiled = fm.pytorch_compile.as_ref().unwrap();
    assert_eq!(
        (compiled.median_ms, compiled.reference_over_pytorch),
        (0.5, 2.0)
    );
    assert!(fm.pytorch_compile_error.is_none());
    let kjt = reference("kjt_permute");
    assert_eq!(kjt.pytorch.as_ref().unwrap().median_ms, 4.0);
    assert!(kjt.pytorch_compile.is_none());
    assert_eq!(
        kjt.pytorch_compile_error.as_deref(),
        Some("torch.compile failed: X")
    );
}

#[test]
fn run_peer_asks_for_the_rotation_files_and_counts_the_peer_phase() {
    let Some((scratch, mut server)) = fake_server("run-peer", &[]) else {
        return;
    };
    let problem = bench_problems::all_problems()[0];
    let eval = EvalConfig::quick_ci(1, 2);
    let cache = InputCache::new(&scratch.0, problem);
    let out = scratch.0.join("peer.jsonl");
    let phases = run_peer(&mut server, &eval, problem, &cache, &out, false);
    assert!(phases.0.get(&Phase::Peer).is_some_and(|&s| s > 0.0));
    let peers = load_peers(std::slice::from_ref(&out));
    assert_eq!(peers.len(), 1);
    assert_eq!(peers[0].problem, problem.name());
    let line: serde_json::Value =
        serde_json::from_str(std::fs::read_to_string(&out).unwrap().trim()).unwrap();
    let expected: Vec<String> = rotation_files(problem, &eval, &cache)
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    assert_eq!(line["inputs"], serde_json::json!(expected));
    assert_eq!(line["iters"], PEER_ITERS);
}

#[test]
fn an_error_answer_is_an_error_and_the_server_serves_on() {
    let Some((scratch, mut server)) = fake_server("error", &[]) else {
        return;
    };
    let out = scratch.0.join("peer.jsonl");
    let err = server.request(&request("error", &out)).unwrap_err();
    assert!(format!("{err:#}").contains("no such thing"), "{err:#}");
    assert!(server.request(&request("noise", &out)).is_ok());
    assert!(server.request(&request("kjt_permute", &out)).is_ok());
    assert_eq!(scratch.starts(), 1);
    assert_eq!(load_peers(std::slice::from_ref(&out)).len(), 2);
}

#[test]
fn a_hanging_server_is_killed_at_the_limit_and_the_next_request_starts_a_fresh_one() {
    let Some((scratch, mut server)) = fake_server("hang", &[]) else {
        return;
    };
    let out = scratch.0.join("peer.jsonl");
    // The server up first (its start may take seconds on a loaded machine), then the limit.
    server.timeout_s = 60.0;
    server.request(&request("kjt_permute", &out)).unwrap();
    assert_eq!(scratch.starts(), 1);
    server.timeout_s = 1.0;
    let started = Instant::now();
    let err = server.request(&request("hang", &out)).unwrap_err();
    assert!(format!("{err:#}").contains("ran past 1 s"), "{err:#}");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(!server.is_held());
    server.timeout_s = 60.0;
    let record = server.request(&request("kjt_permute", &out)).unwrap();
    assert_eq!(scratch.starts(), 2);
    assert_eq!(record["problem"], "kjt_permute");
}

#[test]
fn a_server_that_exits_is_restarted() {
    let Some((scratch, mut server)) = fake_server("exit", &[]) else {
        return;
    };
    let out = scratch.0.join("peer.jsonl");
    let err = server.request(&request("exit", &out)).unwrap_err();
    assert!(format!("{err:#}").contains("exited"), "{err:#}");
    assert!(server.request(&request("last", &out)).is_ok());
    assert_eq!(scratch.starts(), 2);
    // `last` exits after its answer: once it is gone, the next request starts another.
    let idle_since = Instant::now();
    while !server.has_exited() {
        assert!(
            idle_since.elapsed() < Duration::from_secs(10),
            "it did not exit"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(server.request(&request("fm_interaction", &out)).is_ok());
    assert_eq!(scratch.starts(), 3);
}

#[test]
fn a_server_lingering_after_its_input_closes_is_killed() {
    let Some((scratch, mut server)) = fake_server("linger", &["linger"]) else {
        return;
    };
    server.shutdown_grace_s = 0.3;
    assert!(server
        .request(&request("fm_interaction", &scratch.0.join("p")))
        .is_ok());
    let started = Instant::now();
    assert!(server.shutdown().unwrap().killed);
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_server_that_cannot_start_is_an_error() {
    let mut server = PeerServer::program("torch", "/nonexistent/dlrm-bench-peer", ["--serve"]);
    let err = server
        .request(&request("fm_interaction", Path::new("p")))
        .unwrap_err();
    assert!(format!("{err:#}").contains("starting"), "{err:#}");
}

/// The real script's --serve mode, with or without torch: bad requests are error answers
/// on stdout (nothing else there), the same server answers them all, EOF ends it with 0.
#[test]
fn the_real_server_answers_bad_requests_with_errors_and_ends_at_eof() {
    if !python3_available() {
        return;
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut server = PeerServer::program(
        "torch",
        "python3",
        [repo.join(TORCH_PEER).into_os_string(), "--serve".into()],
    );
    server.timeout_s = 120.0;
    let out = std::env::temp_dir().join("dlrm-peer-real-never-written.jsonl");
    let err = server
        .request(&request("no_such_problem", &out))
        .unwrap_err();
    assert!(format!("{err:#}").contains("unknown problem"), "{err:#}");
    let mut missing = request("fm_interaction", &out);
    missing.inputs = vec![PathBuf::from("/nonexistent/set0.safetensors")];
    let err = server.request(&missing).unwrap_err();
    assert!(
        format!("{err:#}").contains("input file not found"),
        "{err:#}"
    );
    let ending = server.shutdown().unwrap();
    assert!(!ending.killed);
    assert!(ending.status.unwrap().success());
    assert!(!out.exists());
}

#[test]
fn the_script_shows_its_help_without_torch() {
    if !python3_available() {
        return;
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let help = Command::new("python3")
        .arg(repo.join(TORCH_PEER))
        .arg("--help")
        .output()
        .unwrap();
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("--serve"));
}
