//! PyTorch eager beside the references (`run --torch`). One `tools/torch_peer.py --serve`
//! process ([`PeerServer`]) serves the whole run: it imports torch and initialises CUDA once,
//! then times eager on each problem's input files ([`run_peer`], one JSON request and one JSON
//! answer per problem, under a time limit). A server that hangs or dies is killed and the next
//! problem starts a fresh one; any failure is a warning and leaves that problem without a peer.
//! The timings come back through JSONL files ([`load_peers`]) and sit beside each reference
//! record ([`attach_peer`]).
use crate::evaluate::{rotation_files, EvalConfig, InputCache};
use crate::results::record::{PeerTime, Record};
use crate::runner::activity::{Phase, PhaseTimes};
use bench_problems::Problem;
use serde::Serialize;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// The peer's script, relative to the working directory (the repository root).
pub const TORCH_PEER: &str = "tools/torch_peer.py";
/// Seconds PyTorch's peer may take on one problem.
pub const PEER_TIMEOUT_S: f64 = 900.0;
/// Seconds the server may take to exit once its stdin is closed, before it is killed.
const SHUTDOWN_GRACE_S: f64 = 5.0;
/// Timed calls and warm-up calls of one peer request (the script's defaults).
const PEER_ITERS: u32 = 50;
const PEER_WARMUP: u32 = 5;

/// The `impl` of an eager record (also of a record that names none: older files).
pub const EAGER: &str = "pytorch_eager";
/// The `impl` of a `torch.compile` record.
pub const COMPILE: &str = "pytorch_compile";

/// One problem's PyTorch median, from a peer file.
#[derive(Clone, Debug, PartialEq)]
pub struct PeerMedian {
    pub problem: String,
    /// [`EAGER`] or [`COMPILE`].
    pub implementation: String,
    /// NaN when `error` is set.
    pub median_ms: f64,
    /// Why there is no time (the Model failed to compile).
    pub error: Option<String>,
    /// The file it was read from.
    pub source: String,
}

/// The peer files of a `--torch` run: those given with `--peer`, then the run's own.
pub fn peer_files(given: &[PathBuf], own: &Path) -> Vec<PathBuf> {
    given.iter().cloned().chain([own.to_path_buf()]).collect()
}

/// Whether `python3` can import torch (so `--torch` can run the peer).
pub fn torch_available() -> bool {
    Command::new("python3")
        .args(["-c", "import torch, safetensors"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// PyTorch peer timings by problem, from `tools/torch_peer.py` JSONL files (in file order: the
/// last line of a problem wins). A bad line or an unreadable file is a warning naming it.
pub fn load_peers(files: &[PathBuf]) -> Vec<PeerMedian> {
    let mut out = Vec::new();
    for f in files {
        let text = match std::fs::read_to_string(f) {
            Ok(text) => text,
            Err(e) => {
                eprintln!("warning: cannot read peer file {}: {e}", f.display());
                continue;
            }
        };
        for (i, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            match serde_json::from_str::<serde_json::Value>(line) {
                Ok(v) => {
                    let implementation = v["impl"].as_str().unwrap_or(EAGER).to_string();
                    let error = v["error"].as_str().map(str::to_string);
                    match (v["problem"].as_str(), v["median_ms"].as_f64(), error) {
                        (Some(p), Some(ms), None) => out.push(PeerMedian {
                            problem: p.to_string(),
                            implementation,
                            median_ms: ms,
                            error: None,
                            source: f.display().to_string(),
                        }),
                        (Some(p), _, Some(e)) => out.push(PeerMedian {
                            problem: p.to_string(),
                            implementation,
                            median_ms: f64::NAN,
                            error: Some(e),
                            source: f.display().to_string(),
                        }),
                        _ => eprintln!(
                            "warning: {}:{}: no `problem` or `median_ms`",
                            f.display(),
                            i + 1
                        ),
                    }
                }
                Err(e) => eprintln!("warning: {}:{}: {e}", f.display(), i + 1),
            }
        }
    }
    out
}

/// Puts the last of `peers` for the reference's problem beside its timing: eager's as
/// `pytorch`, `torch.compile`'s as `pytorch_compile` (or, when the Model did not compile, why
/// as `pytorch_compile_error`).
pub fn attach_peer(reference: &mut Record, peers: &[PeerMedian]) {
    let Some(t) = &reference.timing else {
        return;
    };
    let last = |implementation: &str| {
        peers
            .iter()
            .rev()
            .find(|p| p.problem == reference.problem && p.implementation == implementation)
    };
    let time = |peer: &PeerMedian| PeerTime {
        median_ms: peer.median_ms,
        reference_over_pytorch: t.median_ms / peer.median_ms,
        source: peer.source.clone(),
    };
    let eager = last(EAGER).filter(|p| p.error.is_none()).map(time);
    let compile = last(COMPILE);
    let compile_time = compile.filter(|p| p.error.is_none()).map(time);
    let compile_error = compile.and_then(|p| p.error.clone());
    if eager.is_some() {
        reference.pytorch = eager;
    }
    if compile.is_some() {
        reference.pytorch_compile = compile_time;
        reference.pytorch_compile_error = compile_error;
    }
}

/// PyTorch's peer on one problem (`run --torch`): the server times eager, then with `compile`
/// the `torch.compile`d Model, on the cache files of the sets the timing rotates among (the
/// problem's first worker has just stored them and waits), appending each record to
/// `peer_file`. A failure is a warning (the run goes on without that yardstick for this
/// problem). Returns the seconds it took ([`Phase::Peer`]).
pub fn run_peer(
    server: &mut PeerServer,
    eval: &EvalConfig,
    problem: &'static dyn Problem,
    cache: &InputCache,
    peer_file: &Path,
    compile: bool,
) -> PhaseTimes {
    let mut phases = PhaseTimes::default();
    for compile in [false, true].into_iter().take(1 + usize::from(compile)) {
        let request = PeerRequest {
            problem: problem.name(),
            inputs: rotation_files(problem, eval, cache),
            out: peer_file,
            check: true,
            iters: PEER_ITERS,
            warmup: PEER_WARMUP,
            compile,
        };
        let what = if compile { "torch.compile" } else { "eager" };
        if let Err(e) = phases.time(Phase::Peer, || server.request(&request)) {
            eprintln!("warning: {}: no PyTorch {what} peer: {e:#}", problem.name());
        }
    }
    phases
}

/// One request to the server: one line of JSON (`tools/torch_peer.py`'s docstring).
#[derive(Debug, Serialize)]
pub struct PeerRequest<'a> {
    pub problem: &'a str,
    pub inputs: Vec<PathBuf>,
    pub out: &'a Path,
    pub check: bool,
    pub iters: u32,
    pub warmup: u32,
    /// Time the Model under `torch.compile` instead of eager.
    pub compile: bool,
}

/// A `torch_peer.py --serve` process, started at the first request and kept for the next ones;
/// one that timed out or died is replaced at the next request. Closing it ([`Self::shutdown`],
/// or dropping it) ends the process.
pub struct PeerServer {
    program: OsString,
    args: Vec<OsString>,
    /// Seconds one request may take before the server is killed.
    pub timeout_s: f64,
    /// Seconds the server may take to exit at [`Self::shutdown`] before it is killed.
    pub shutdown_grace_s: f64,
    process: Option<ServerProcess>,
}

/// A running server: its process, its stdin, and its stdout's lines.
struct ServerProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Lines of stdout, read on a thread; disconnected once stdout closes.
    lines: Receiver<String>,
}

/// What came of one request.
enum Answer {
    Record(serde_json::Value),
    Error(String),
    TimedOut,
    Exited,
}

impl PeerServer {
    /// The run's server: `python3 tools/torch_peer.py --serve`.
    pub fn torch() -> Self {
        Self::new("python3", [TORCH_PEER, "--serve"])
    }

    /// A server run as `program args...` (tests give a fake one). Nothing starts until the
    /// first request.
    pub fn new(
        program: impl Into<OsString>,
        args: impl IntoIterator<Item = impl Into<OsString>>,
    ) -> Self {
        PeerServer {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            timeout_s: PEER_TIMEOUT_S,
            shutdown_grace_s: SHUTDOWN_GRACE_S,
            process: None,
        }
    }

    /// The command line, for messages.
    fn command_line(&self) -> String {
        std::iter::once(&self.program)
            .chain(&self.args)
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Sends `request` and waits for its answer: the record, or why there is none (an error
    /// answer, which keeps the server; a timeout or a dead server, which ends it).
    pub fn request(&mut self, request: &PeerRequest) -> anyhow::Result<serde_json::Value> {
        let line = serde_json::to_string(request)?;
        let timeout = Duration::from_secs_f64(self.timeout_s.max(0.0));
        let command = self.command_line();
        let process = self.running()?;
        let sent = process
            .stdin
            .as_mut()
            .map(|stdin| writeln!(stdin, "{line}").and_then(|()| stdin.flush()));
        let answer = match sent {
            Some(Ok(())) => process.answer(timeout),
            _ => Answer::Exited,
        };
        match answer {
            Answer::Record(record) => Ok(record),
            Answer::Error(message) => {
                anyhow::bail!("`{command}` answered with an error: {message}")
            }
            Answer::TimedOut => {
                self.end(Duration::ZERO);
                anyhow::bail!(
                    "`{command}` ran past {:.0} s on this request and was killed (the next \
                     problem starts a fresh one)",
                    self.timeout_s
                )
            }
            Answer::Exited => {
                let ending = self.end(Duration::from_secs_f64(self.shutdown_grace_s.max(0.0)));
                anyhow::bail!(
                    "`{command}` exited ({}) without answering (the next problem starts a fresh \
                     one)",
                    describe(ending.and_then(|e| e.status))
                )
            }
        }
    }

    /// The server, started now if there is none or the last one has exited.
    fn running(&mut self) -> anyhow::Result<&mut ServerProcess> {
        if let Some(p) = self.process.as_mut() {
            if let Ok(Some(status)) = p.child.try_wait() {
                eprintln!(
                    "warning: the PyTorch peer server had exited ({status}); starting a fresh one"
                );
                self.process = None;
            }
        }
        if self.process.is_none() {
            self.process = Some(self.spawn()?);
        }
        self.process
            .as_mut()
            .ok_or_else(|| anyhow::anyhow!("the PyTorch peer server did not start"))
    }

    fn spawn(&self) -> anyhow::Result<ServerProcess> {
        eprintln!("PyTorch peer: starting `{}`", self.command_line());
        let mut child = Command::new(&self.program)
            .args(&self.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| anyhow::anyhow!("starting `{}`: {e}", self.command_line()))?;
        let (stdin, stdout, stderr) =
            match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
                (Some(i), Some(o), Some(e)) => (i, o, e),
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    anyhow::bail!("`{}`: its pipes were not opened", self.command_line());
                }
            };
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("  [torch] {line}");
            }
        });
        Ok(ServerProcess {
            child,
            stdin: Some(stdin),
            lines,
        })
    }

    /// Closes the server's stdin, gives it `grace` to exit and kills it after that. Nothing
    /// when no server runs.
    fn end(&mut self, grace: Duration) -> Option<Ending> {
        let mut process = self.process.take()?;
        drop(process.stdin.take());
        let started = Instant::now();
        loop {
            match process.child.try_wait() {
                Ok(Some(status)) => {
                    return Some(Ending {
                        status: Some(status),
                        killed: false,
                    })
                }
                Ok(None) if started.elapsed() < grace => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                _ => {
                    let _ = process.child.kill();
                    return Some(Ending {
                        status: process.child.wait().ok(),
                        killed: true,
                    });
                }
            }
        }
    }

    /// Ends the server at the end of a run: closes its stdin and waits for it to exit, killing
    /// it if it lingers past `shutdown_grace_s`; a kill or a failed exit is a warning. Nothing
    /// when no server runs.
    pub fn shutdown(&mut self) -> Option<Ending> {
        let ending = self.end(Duration::from_secs_f64(self.shutdown_grace_s.max(0.0)))?;
        if ending.killed {
            eprintln!(
                "warning: the PyTorch peer server was still running {:.0} s after its input \
                 closed and was killed",
                self.shutdown_grace_s
            );
        } else if !ending.status.is_some_and(|s| s.success()) {
            eprintln!(
                "warning: the PyTorch peer server ended with {}",
                describe(ending.status)
            );
        }
        Some(ending)
    }
}

/// How a server ended.
#[derive(Clone, Copy, Debug)]
pub struct Ending {
    /// Its exit status, when it could be had.
    pub status: Option<ExitStatus>,
    /// Whether it had to be killed.
    pub killed: bool,
}

impl Drop for PeerServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl ServerProcess {
    /// Waits up to `timeout` for the answer line; other lines on stdout (which should carry
    /// answers only) are shown as the server's.
    fn answer(&mut self, timeout: Duration) -> Answer {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => match parse_answer(&line) {
                    Some(answer) => return answer,
                    None => eprintln!("  [torch] (stdout) {line}"),
                },
                Err(RecvTimeoutError::Timeout) => return Answer::TimedOut,
                Err(RecvTimeoutError::Disconnected) => return Answer::Exited,
            }
        }
    }
}

/// An answer line: `{"ok": true, "record": {...}}` or `{"ok": false, "error": "..."}`; `None`
/// for any other line. An `ok` answer without an object `record` is an error.
fn parse_answer(line: &str) -> Option<Answer> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    match v.get("ok")?.as_bool()? {
        true => Some(match v.get("record") {
            Some(record) if record.is_object() => Answer::Record(record.clone()),
            _ => Answer::Error("the answer has no `record` object".into()),
        }),
        false => Some(Answer::Error(
            v.get("error")
                .and_then(|e| e.as_str())
                .unwrap_or("(the answer has no `error` text)")
                .to_string(),
        )),
    }
}

fn describe(status: Option<ExitStatus>) -> String {
    status.map_or_else(|| "status unknown".into(), |s| s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let mut server = PeerServer::new("python3", args);
        server.timeout_s = 20.0;
        server.shutdown_grace_s = 10.0;
        Some((scratch, server))
    }

    fn request<'a>(problem: &'a str, out: &'a Path) -> PeerRequest<'a> {
        PeerRequest {
            problem,
            inputs: vec![PathBuf::from("set0.safetensors")],
            out,
            check: true,
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
        assert!(server.process.is_none());
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
        while server
            .process
            .as_mut()
            .unwrap()
            .child
            .try_wait()
            .unwrap()
            .is_none()
        {
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
        let mut server = PeerServer::new("/nonexistent/dlrm-bench-peer", ["--serve"]);
        let err = server
            .request(&request("fm_interaction", Path::new("p")))
            .unwrap_err();
        assert!(format!("{err:#}").contains("starting"), "{err:#}");
    }

    #[test]
    fn answers_are_told_from_other_lines() {
        assert!(matches!(
            parse_answer(r#"{"ok": true, "record": {"median_ms": 1.0}}"#),
            Some(Answer::Record(_))
        ));
        assert!(matches!(
            parse_answer(r#"{"ok": true}"#),
            Some(Answer::Error(_))
        ));
        assert!(matches!(
            parse_answer(r#"{"ok": false, "error": "x"}"#),
            Some(Answer::Error(e)) if e == "x"
        ));
        assert!(parse_answer("loaded set0").is_none());
        assert!(parse_answer(r#"{"median_ms": 1.0}"#).is_none());
    }

    /// The real script's --serve mode, with or without torch: bad requests are error answers
    /// on stdout (nothing else there), the same server answers them all, EOF ends it with 0.
    #[test]
    fn the_real_server_answers_bad_requests_with_errors_and_ends_at_eof() {
        if !python3_available() {
            return;
        }
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut server = PeerServer::new(
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
}
