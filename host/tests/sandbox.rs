//! The sandbox of untrusted answers (`toolchain::sandbox`, `kernelbench::run_evaluator`) tried
//! as an answer would: a socket, writes outside its directory (the repository, `/dev/shm`),
//! links planted where the harness reads, a fork bomb, and the resource limits. A custom harness
//! (libtest-mimic): where bubblewrap does not work, its trials are reported as ignored, saying
//! why, never as passed; the limits trial runs everywhere.
use dlrm_bench::kernelbench::{run_evaluator, Outcome};
use dlrm_bench::toolchain::sandbox::{Isolation, Limits, Sandbox, UID_BASE};
use libtest_mimic::{Arguments, Trial};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

fn main() {
    let args = Arguments::from_args();
    let found = Sandbox::detect(Limits::default()).isolation;
    let no_bwrap = found != Isolation::Bubblewrap;
    let bwrap_trials = [
        "bubblewrap_allows_no_network_no_write_outside_and_a_bounded_process_count",
        "an_answer_that_reaches_out_fails_naming_what_it_tried",
    ];
    if no_bwrap {
        for name in bwrap_trials {
            eprintln!("SKIPPED {name}: bwrap does not work here (found {found:?}; .ci/run installs bubblewrap)");
        }
    }
    let trials = vec![
        Trial::test(bwrap_trials[0], || {
            bubblewrap_allows_no_network_no_write_outside_and_a_bounded_process_count();
            Ok(())
        })
        .with_ignored_flag(no_bwrap),
        Trial::test(bwrap_trials[1], || {
            an_answer_that_reaches_out_fails_naming_what_it_tried();
            Ok(())
        })
        .with_ignored_flag(no_bwrap),
        Trial::test("the_limits_hold_without_namespaces", || {
            the_limits_hold_without_namespaces();
            Ok(())
        }),
    ];
    libtest_mimic::run(&args, trials).exit();
}

/// A scratch directory under a fresh parent, and the parent (writable outside the sandbox).
fn dirs(name: &str) -> (PathBuf, PathBuf) {
    let parent = std::env::temp_dir().join(format!("dlrm-sandbox-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&parent);
    std::fs::create_dir_all(&parent).unwrap();
    let scratch = parent.join("scratch");
    (parent, scratch)
}

/// Runs a Python program in `s`: (exit success, stdout + stderr).
fn python(s: &Sandbox, scratch: &Path, code: &str) -> (bool, String) {
    let out = s
        .command(scratch, "python3", ["-c", code])
        .unwrap()
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

const TRY_ALL: &str = r#"
import os, socket, sys
what = sys.argv[1] if len(sys.argv) > 1 else ""
"#;

fn bubblewrap_allows_no_network_no_write_outside_and_a_bounded_process_count() {
    let s = Sandbox::detect(Limits {
        processes: 64,
        ..Limits::default()
    });
    let (parent, scratch) = dirs("bwrap");
    // A listener of the test's own: the sandbox cannot reach it.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (ok, text) = python(
        &s,
        &scratch,
        &format!(
            "{TRY_ALL}import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)"
        ),
    );
    assert!(!ok, "connected out of the sandbox: {text}");
    assert!(
        text.contains("Connection refused") || text.contains("unreachable"),
        "{text}"
    );
    let outside = parent.join("outside.txt");
    let (ok, text) = python(
        &s,
        &scratch,
        &format!("open({:?}, 'w').write('x')", outside),
    );
    assert!(
        !ok && !outside.exists(),
        "wrote outside its scratch (exited ok: {ok}, the file is there: {}): {text}",
        outside.exists()
    );
    assert!(
        text.contains("Read-only file system") || text.contains("Permission denied"),
        "{text}"
    );
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let (ok, _) = python(&s, &scratch, &format!("open({:?}, 'a').write('#')", repo));
    assert!(!ok, "the repository is writable from the sandbox");
    if Path::new("/dev/shm").is_dir() {
        let shm = format!("/dev/shm/dlrm-sandbox-{}", std::process::id());
        let (ok, _) = python(&s, &scratch, &format!("open({shm:?}, 'w').write('x')"));
        assert!(
            !ok && !Path::new(&shm).exists(),
            "/dev/shm (the input cache) is writable"
        );
    }
    let (ok, text) = python(&s, &scratch, "import os; print(os.listdir('/run'))");
    assert!(
        ok && text.trim() == "[]",
        "daemons' sockets under /run are visible: {text}"
    );
    let (ok, text) = python(&s, &scratch, "open('inside.txt', 'w').write('x')");
    assert!(ok && scratch.join("inside.txt").is_file(), "{text}");
    assert_forks_are_bounded(&s, &scratch);
    let _ = std::fs::remove_dir_all(&parent);
}

/// A fork bomb (capped at 1000 children, so a broken limit fails the test rather than the
/// machine) meets the process limit.
fn assert_forks_are_bounded(s: &Sandbox, scratch: &Path) {
    let bomb = "import os, time\nn = 0\ntry:\n    while n < 1000:\n        if os.fork() == 0:\n            time.sleep(3)\n            os._exit(0)\n        n += 1\nexcept OSError as e:\n    print('stopped after', n, e)\n    raise\n";
    let (ok, text) = python(s, scratch, bomb);
    assert!(!ok, "1000 processes forked: {text}");
    assert!(text.contains("Resource temporarily unavailable"), "{text}");
}

fn the_limits_hold_without_namespaces() {
    let limits = Limits {
        cpu_s: 1,
        processes: 64,
        file_bytes: 1 << 20,
        ..Limits::default()
    };
    let s = Sandbox {
        isolation: Isolation::LimitsOnly,
        limits,
    };
    let (parent, scratch) = dirs("limits");
    std::env::set_var("DLRM_SANDBOX_TEST_API_KEY", "sk-never-inside");
    let (_, text) = python(&s, &scratch, "import os; print(sorted(os.environ))");
    assert!(!text.contains("DLRM_SANDBOX_TEST_API_KEY"), "{text}");
    assert!(text.contains("'PATH'"), "{text}");
    let started = std::time::Instant::now();
    let (ok, _) = python(&s, &scratch, "while True: pass");
    assert!(
        !ok && started.elapsed().as_secs() < 20,
        "a busy loop outlived 1 s of CPU"
    );
    let (ok, text) = python(&s, &scratch, "open('big', 'wb').write(b'x' * (2 << 20))");
    assert!(!ok, "wrote past the file size limit: {text}");
    if unsafe { libc::geteuid() } == 0 {
        // As root the process took a uid of its own, whose processes the limit counts.
        assert_forks_are_bounded(&s, &scratch);
        let (_, text) = python(&s, &scratch, "import os; print('uid', os.getuid())");
        let uid: u32 = text.trim().trim_start_matches("uid ").parse().unwrap();
        assert!(uid >= UID_BASE, "{text}");
    }
    let _ = std::fs::remove_dir_all(&parent);
}

/// A stand-in for tools/kernelbench_eval.py (no torch needed): it does what the request's
/// `action` says — nothing, open a socket to `port`, write `path`, or fork without end —
/// then writes its result.
const STAND_IN: &str = r#"
import json, os, socket, sys
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
req = json.load(open(args["--request"]))
act = req["action"]
if act == "socket":
    socket.create_connection(("127.0.0.1", req["port"]), timeout=2)
elif act == "write":
    open(req["path"], "w").write("escaped")
elif act == "plant":
    import glob
    here = os.path.dirname(args["--request"])
    for log in glob.glob(os.path.join(here, "log-*.txt")):
        os.remove(log)
        os.symlink(req["secret"], log)
    os.symlink(req["secret"], args["--out"])
    sys.exit(1)
elif act == "fork":
    n = 0
    while n < 1000:
        if os.fork() == 0:
            import time; time.sleep(3); os._exit(0)
        n += 1
json.dump({"ok": True, "result": {"action": act}}, open(args["--out"], "w"))
"#;

/// Each forbidden act of an answer fails its evaluation, naming what it tried; a harmless
/// one passes.
fn an_answer_that_reaches_out_fails_naming_what_it_tried() {
    let sandbox = Sandbox::detect(Limits {
        processes: 64,
        ..Limits::default()
    });
    let dir = std::env::temp_dir().join(format!("dlrm-kb-sandbox-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("stand_in.py");
    std::fs::write(&script, STAND_IN).unwrap();
    let script = script.to_str().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let outside = dir.join("outside.txt");
    let run =
        |req: Value| run_evaluator(script, &req, "ours", &dir.join("scratch"), 60.0, &sandbox);
    assert!(matches!(run(json!({"action": "none"})), Outcome::Result(_)));
    let cases = [
        (
            json!({"action": "socket", "port": port}),
            "Connection refused",
        ),
        (
            json!({"action": "write", "path": outside}),
            "Read-only file system",
        ),
        (
            json!({"action": "fork"}),
            "Resource temporarily unavailable",
        ),
    ];
    for (req, named) in cases {
        match run(req.clone()) {
            Outcome::Failed(m) => assert!(m.contains(named), "{req}: {m}"),
            other => panic!("{req}: not refused: {other:?}"),
        }
    }
    assert!(
        !outside.exists(),
        "the answer wrote outside its scratch directory"
    );
    // Links left where the harness reads its log and result lead nowhere.
    let secret = dir.join("secret.txt");
    std::fs::write(&secret, "{\"ok\": true, \"result\": \"SECRET-CONTENT\"}").unwrap();
    match run(json!({"action": "plant", "secret": secret})) {
        Outcome::Failed(m) => assert!(!m.contains("SECRET-CONTENT"), "{m}"),
        other => panic!("a planted link was followed: {other:?}"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}
