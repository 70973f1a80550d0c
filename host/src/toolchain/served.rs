//! A helper process that answers requests, one JSON line each on its stdin and one JSON line
//! each on its stdout, under a time limit per request ([`Served`]): PyTorch's peer
//! (`tools/torch_peer.py --serve`) and the KernelBench answers' evaluator
//! (`tools/kernelbench_eval.py --serve`). A server that hangs or dies is killed with its
//! process group; the next request starts a fresh one.
use serde::Serialize;
use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Seconds one request may take unless the owner says otherwise.
const DEFAULT_TIMEOUT_S: f64 = 900.0;
/// Seconds the server may take to exit once its stdin is closed, before it is killed.
const SHUTDOWN_GRACE_S: f64 = 5.0;

/// Makes the command that starts a server (a sandboxed one, say).
pub type MakeCommand = Box<dyn Fn() -> std::io::Result<Command> + Send>;

/// A server process, started at the first request and kept for the next ones; one that timed
/// out or died is replaced at the next request. Closing it ([`Self::shutdown`], or dropping it)
/// ends the process and its process group.
pub struct Served {
    /// Prefixes the server's stderr lines and names it in warnings.
    label: String,
    /// The command line, for messages.
    command_line: String,
    /// Makes the command that starts the server.
    make: MakeCommand,
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
    /// The last lines of its stderr, for the message when it dies without answering.
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
}

/// Lines of a server's stderr kept for messages.
const STDERR_TAIL: usize = 12;

/// What came of one request.
enum Answer {
    Record(serde_json::Value),
    Error(String),
    TimedOut,
    Exited,
}

impl Served {
    /// A server started by `make` (called again for each fresh server); `command_line` names
    /// it in messages. Nothing starts until the first request.
    pub fn new(label: &str, command_line: String, make: MakeCommand) -> Self {
        Served {
            label: label.to_string(),
            command_line,
            make,
            timeout_s: DEFAULT_TIMEOUT_S,
            shutdown_grace_s: SHUTDOWN_GRACE_S,
            process: None,
        }
    }

    /// A server run as `program args...` (tests give a fake one).
    pub fn program(
        label: &str,
        program: impl Into<OsString>,
        args: impl IntoIterator<Item = impl Into<OsString>>,
    ) -> Self {
        let program: OsString = program.into();
        let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
        let command_line = std::iter::once(&program)
            .chain(&args)
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ");
        let make = Box::new(move || {
            let mut c = Command::new(&program);
            c.args(&args);
            Ok(c)
        });
        Self::new(label, command_line, make)
    }

    /// Whether a server process is held (it may have exited since).
    pub fn is_held(&self) -> bool {
        self.process.is_some()
    }

    /// Whether the held server process has exited (false when none is held).
    pub fn has_exited(&mut self) -> bool {
        self.process
            .as_mut()
            .is_some_and(|p| !matches!(p.child.try_wait(), Ok(None)))
    }

    /// Sends `request` and waits for its answer: the record, or why there is none (an error
    /// answer, which keeps the server; a timeout or a dead server, which ends it).
    pub fn request(&mut self, request: &impl Serialize) -> anyhow::Result<serde_json::Value> {
        let line = serde_json::to_string(request)?;
        let timeout = Duration::from_secs_f64(self.timeout_s.max(0.0));
        let command = self.command_line.clone();
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
                let tail = self.process.as_ref().map(|p| p.stderr_tail.clone());
                let ending = self.end(Duration::from_secs_f64(self.shutdown_grace_s.max(0.0)));
                // The last lines reach the reader thread just after the exit.
                std::thread::sleep(Duration::from_millis(50));
                let said: Vec<String> = match tail.as_ref().map(|t| t.lock()) {
                    Some(Ok(t)) => t.iter().cloned().collect(),
                    _ => Vec::new(),
                };
                let said = match said.is_empty() {
                    true => String::new(),
                    false => format!("; its last words:\n{}", said.join("\n")),
                };
                anyhow::bail!(
                    "`{command}` exited ({}) without answering (the next request starts a fresh \
                     one){said}",
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
                    "warning: the {} server had exited ({status}); starting a fresh one",
                    self.label
                );
                self.process = None;
            }
        }
        if self.process.is_none() {
            self.process = Some(self.spawn()?);
        }
        self.process
            .as_mut()
            .ok_or_else(|| anyhow::anyhow!("the {} server did not start", self.label))
    }

    fn spawn(&self) -> anyhow::Result<ServerProcess> {
        eprintln!("{}: starting `{}`", self.label, self.command_line);
        let mut command =
            (self.make)().map_err(|e| anyhow::anyhow!("preparing `{}`: {e}", self.command_line))?;
        // Its own process group: what it starts dies with it.
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| anyhow::anyhow!("starting `{}`: {e}", self.command_line))?;
        let (stdin, stdout, stderr) =
            match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
                (Some(i), Some(o), Some(e)) => (i, o, e),
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    anyhow::bail!("`{}`: its pipes were not opened", self.command_line);
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
        let label = self.label.clone();
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        let tail = stderr_tail.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("  [{label}] {line}");
                if let Ok(mut t) = tail.lock() {
                    if t.len() == STDERR_TAIL {
                        t.pop_front();
                    }
                    t.push_back(line);
                }
            }
        });
        Ok(ServerProcess {
            child,
            stdin: Some(stdin),
            lines,
            stderr_tail,
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
                    kill_group(&mut process.child);
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
                "warning: the {} server was still running {:.0} s after its input closed and \
                 was killed",
                self.label, self.shutdown_grace_s
            );
        } else if !ending.status.is_some_and(|s| s.success()) {
            eprintln!(
                "warning: the {} server ended with {}",
                self.label,
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

impl Drop for Served {
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
                    None => eprintln!("  (server stdout) {line}"),
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

/// Kills `child` and its process group (it leads one: [`Served`] starts it so).
fn kill_group(child: &mut Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: kill(2) on the group the child leads.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
    let _ = child.kill();
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
