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
pub(crate) const TORCH_PEER: &str = "tools/torch_peer.py";
/// Seconds PyTorch's peer may take on one problem.
pub(crate) const PEER_TIMEOUT_S: f64 = 900.0;
/// Seconds the server may take to exit once its stdin is closed, before it is killed.
const SHUTDOWN_GRACE_S: f64 = 5.0;
/// Timed calls and warm-up calls of one peer request (the script's defaults).
const PEER_ITERS: u32 = 50;
const PEER_WARMUP: u32 = 5;

/// The `impl` of an eager record (also of a record that names none: older files).
pub(crate) const EAGER: &str = "pytorch_eager";
/// The `impl` of a `torch.compile` record.
pub(crate) const COMPILE: &str = "pytorch_compile";

/// One problem's PyTorch median, from a peer file.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PeerMedian {
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
pub(crate) fn torch_available() -> bool {
    Command::new("python3")
        .args(["-c", "import torch, safetensors"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// PyTorch peer timings by problem, from `tools/torch_peer.py` JSONL files (in file order: the
/// last line of a problem wins). A bad line or an unreadable file is a warning naming it.
pub(crate) fn load_peers(files: &[PathBuf]) -> Vec<PeerMedian> {
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
pub(crate) fn attach_peer(reference: &mut Record, peers: &[PeerMedian]) {
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
pub(crate) fn run_peer(
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
pub(crate) struct PeerRequest<'a> {
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
pub(crate) struct PeerServer {
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
    pub(crate) fn request(&mut self, request: &PeerRequest) -> anyhow::Result<serde_json::Value> {
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
    pub(crate) fn shutdown(&mut self) -> Option<Ending> {
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
mod tests;
