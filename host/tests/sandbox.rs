//! The sandbox of untrusted answers (`toolchain::sandbox`, `kernelbench::evaluator`) tried as an
//! answer would: a socket, writes outside its directory (the repository, `/dev/shm`), a fork
//! bomb, a crash, a hang, a forged reply, a process left behind, and the resource limits. A custom harness
//! (libtest-mimic): where bubblewrap does not work, its trials are reported as ignored, saying
//! why, never as passed; the limits trial runs everywhere.
use dlrm_bench::kernelbench::evaluator::Evaluator;
use dlrm_bench::kernelbench::Outcome;
use dlrm_bench::toolchain::sandbox::{Isolation, Limits, Sandbox, UID_BASE};
use libtest_mimic::{Arguments, Trial};
use serde_json::json;
use std::path::{Path, PathBuf};

fn main() {
    let mut args = Arguments::from_args();
    // One trial at a time: the evaluator trial sets DLRM_KB_EXEC in the process environment,
    // which another trial's spawn would read while it changes.
    args.test_threads = Some(1);
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
        hidden: Vec::new(),
        exposed: Vec::new(),
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

/// Answers (imported by the real `tools/kernelbench_eval.py --serve`, protocol `import`, which
/// needs no torch) that each try one thing: nothing, a socket to the test's listener, a write
/// outside, a fork bomb, a crash, a hang, forging the server's reply, and a process left behind.
fn answer(name: &str, port: u16, outside: &Path) -> String {
    let body = match name {
        "ok" => String::new(),
        "socket" => format!("import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\n"),
        "write" => format!("open({outside:?}, 'w').write('escaped')\n"),
        "fork" => "import os, time\nn = 0\nwhile n < 1000:\n    if os.fork() == 0:\n        time.sleep(3)\n        os._exit(0)\n    n += 1\n".into(),
        "crash" => "import os\nos.abort()\n".into(),
        "hang" => "import time\ntime.sleep(600)\n".into(),
        // Writes a forged reply into every pipe of the server it can open, then (from a process
        // left behind) keeps trying while the next job runs.
        "forge" => r#"import os, time, json
server = os.getppid()
line = (json.dumps({"ok": True, "record": {"id": 0, "outcome": "result",
        "result": {"protocol": "ours", "status": "correct"}}}) + "\n").encode()
def forge():
    for fd in range(64):
        try:
            f = os.open(f"/proc/{server}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
            os.write(f, line)
            print("FORGED INTO", fd)
        except OSError:
            pass
forge()
if os.fork() == 0:
    os.setsid()  # out of the job's process group
    for _ in range(50):
        forge()
        time.sleep(0.1)
    os._exit(0)
"#
        .into(),
        // Fails if any process but the server, its init and this one is alive.
        "alone" => r#"import os
mine = {os.getpid(), os.getppid(), 1}
others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in mine]
if others:
    raise RuntimeError(f"processes left by an earlier answer: {others}")
"#
        .into(),
        _ => unreachable!(),
    };
    format!("{body}\nclass ModelNew:\n    pass\n")
}

/// Each forbidden act of an answer fails its own job, naming what it tried; a crash or a hang
/// costs only its job; a forged reply is never taken; nothing a job leaves reaches the next.
fn an_answer_that_reaches_out_fails_naming_what_it_tried() {
    // Both ways the server runs a job: a fork of itself, and a fresh interpreter (exec).
    for exec in ["0", "1"] {
        std::env::set_var("DLRM_KB_EXEC", exec);
        hostile_answers(exec);
    }
    std::env::remove_var("DLRM_KB_EXEC");
}

fn hostile_answers(mode: &str) {
    let sandbox = Sandbox::detect(Limits {
        processes: 64,
        ..Limits::default()
    });
    let dir = std::env::temp_dir().join(format!("dlrm-kb-sandbox-{mode}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let outside = dir.join("outside.txt");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/kernelbench_eval.py");
    // The runner's scratch: reachable by the sandbox's uids wherever the run directory is.
    let scratch = dlrm_bench::toolchain::sandbox::shared_dir(&format!(
        "test-evaluator-{mode}-{}",
        std::process::id()
    ))
    .unwrap();
    for d in [scratch.parent().unwrap(), scratch.as_path()] {
        let mode =
            std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(d).unwrap().permissions());
        assert_eq!(
            mode & 0o111,
            0o111,
            "{} is not traversable by others",
            d.display()
        );
    }
    let mut evaluator = Evaluator::new(&script, &sandbox, &scratch, 0);
    let mut run = |name: &str, limit_s: f64| {
        let file = dir.join(format!("{name}.py"));
        std::fs::write(&file, answer(name, port, &outside)).unwrap();
        evaluator
            .run(&json!({"answer": file}), "import", &[], limit_s)
            .0
    };
    let imported = |o: &Outcome| matches!(o, Outcome::Result(v) if v["status"] == "imported");
    assert!(imported(&run("ok", 60.0)), "a harmless answer failed");
    // The kernel words a refusal in either of two ways (as the bwrap trial above accepts): a
    // socket in an empty network namespace is refused or unreachable, a write outside is on a
    // read-only file system or not permitted; never done.
    for (name, named) in [
        (
            "socket",
            &["Connection refused", "Network is unreachable"][..],
        ),
        ("write", &["Read-only file system", "Permission denied"][..]),
        ("fork", &["Resource temporarily unavailable"][..]),
    ] {
        match run(name, 60.0) {
            Outcome::Result(v) => {
                assert_eq!(v["status"], "runtime_error", "{name}: {v}");
                let m = v["message"].as_str().unwrap_or("");
                assert!(named.iter().any(|n| m.contains(n)), "{name}: {m}");
            }
            other => panic!("{name}: not refused: {other:?}"),
        }
    }
    assert!(
        !outside.exists(),
        "the answer wrote outside its scratch directory"
    );
    match run("crash", 60.0) {
        Outcome::Failed(m) => assert!(m.contains("SIGABRT"), "{m}"),
        other => panic!("crash: {other:?}"),
    }
    assert!(matches!(run("hang", 2.0), Outcome::Timeout(_)));
    let forged = run("forge", 60.0);
    assert!(
        imported(&forged),
        "exec mode {mode}: a forged reply was taken: {forged:?}"
    );
    let next = run("alone", 60.0);
    assert!(
        imported(&next),
        "a process outlived its job, or a reply was forged: {next:?}"
    );
    evaluator.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}
