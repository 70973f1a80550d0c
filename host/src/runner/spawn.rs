//! Worker processes from the orchestrator's side: spawning one for a spec, its event stream and exit, and the ceilings measured in one.
use super::options::RunOptions;
use crate::results::record::Ceilings;
use crate::runner::worker::Event;
use crate::runner::worker::WorkerSpec;
use std::collections::VecDeque;
use std::io::BufRead;
use std::io::BufReader;
use std::io::Write;
use std::path::Path;
use std::process::Child;
use std::process::Command;
use std::process::Stdio;
use std::sync::mpsc;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

/// A running worker: its process, its parsed stdout, and the tail of its stderr.
pub(crate) struct Worker {
    pub(super) child: Child,
    pub(super) events: Receiver<Option<Event>>,
    pub(super) stderr_tail: Arc<Mutex<VecDeque<String>>>,
    /// Open while the worker lives: it carries the go ([`WorkerSpec::wait_after_prepare`]),
    /// and its end tells the worker to stop.
    pub(super) stdin: Option<std::process::ChildStdin>,
}

pub(crate) fn spawn_worker(exe: &Path, spec: &WorkerSpec) -> anyhow::Result<Worker> {
    let mut command = Command::new(exe);
    if let Some(dir) = &spec.ptx_cache {
        command.env(crate::toolchain::ptx_cache::PTX_CACHE_ENV, dir);
    }
    if !spec.sandbox_hide.is_empty() {
        let paths = std::env::join_paths(&spec.sandbox_hide)
            .map_err(|e| anyhow::anyhow!("a path the sandbox hides: {e}"))?;
        command.env(crate::backend::triton_tool::SANDBOX_HIDE_ENV, paths);
    }
    if spec.unsandboxed {
        command.env(crate::backend::triton_tool::UNSANDBOXED_ENV, "1");
    }
    let mut child = command
        .arg("worker")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| anyhow::anyhow!("starting a worker ({}): {e}", exe.display()))?;
    let mut stdin = child.stdin.take().expect("piped");
    stdin.write_all(format!("{}\n", serde_json::to_string(spec)?).as_bytes())?;
    // Kept open for the worker's whole life: its end is how the worker knows the orchestrator
    // is gone (`worker::watch_parent`).
    let stdin = Some(stdin);
    let (tx, events) = mpsc::channel();
    let stdout = child.stdout.take().expect("piped");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let event =
                serde_json::from_str::<Event>(&line).unwrap_or_else(|e| unreadable(&line, &e));
            if tx.send(Some(event)).is_err() {
                return;
            }
        }
        let _ = tx.send(None);
    });
    let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
    let tail = stderr_tail.clone();
    let stderr = child.stderr.take().expect("piped");
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("  [worker] {line}");
            let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
            t.push_back(line);
            if t.len() > 12 {
                t.pop_front();
            }
        }
    });
    Ok(Worker {
        child,
        events,
        stderr_tail,
        stdin,
    })
}

/// The event standing for `line`, which did not parse (`error`): its first 300 characters.
fn unreadable(line: &str, error: &serde_json::Error) -> Event {
    let excerpt: String = line.chars().take(300).collect();
    let more = if excerpt.len() < line.len() {
        " …"
    } else {
        ""
    };
    eprintln!("warning: a worker's event could not be read ({error}): {excerpt}{more}");
    Event::Unreadable {
        excerpt: format!("{excerpt}{more}"),
        error: error.to_string(),
    }
}

impl Worker {
    pub(crate) fn stderr_tail(&self) -> String {
        self.stderr_tail
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Lets a worker waiting after its preparation go on (closing its stdin).
    pub(crate) fn go(&mut self) {
        if let Some(stdin) = self.stdin.as_mut() {
            let _ = stdin.write_all(b"go\n").and_then(|_| stdin.flush());
        }
    }

    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn base_spec(opts: &RunOptions, secret_seed: u64) -> WorkerSpec {
    WorkerSpec {
        ceilings_only: false,
        prepare_only: false,
        prepare_in_foreground: false,
        problem: String::new(),
        shape: None,
        ptx_cache: None,
        eval: opts.eval.clone(),
        secret_seed,
        candidates: Vec::new(),
        report_reference: false,
        force_cpu: opts.force_cpu,
        device: opts.devices.first().copied().unwrap_or(0),
        ceilings: None,
        input_cache: None,
        sandbox_hide: Vec::new(),
        unsandboxed: opts.unsandboxed,
        wait_after_prepare: false,
    }
}

pub(crate) fn measure_ceilings(
    exe: &Path,
    opts: &RunOptions,
    secret_seed: u64,
) -> anyhow::Result<Ceilings> {
    let spec = WorkerSpec {
        ceilings_only: true,
        ..base_spec(opts, secret_seed)
    };
    let mut w = spawn_worker(exe, &spec)?;
    loop {
        match w.events.recv_timeout(Duration::from_secs(180)) {
            Ok(Some(Event::Ceilings { ceilings })) => {
                let _ = w.child.wait();
                return Ok(ceilings);
            }
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => {
                w.kill();
                anyhow::bail!("measuring the device ceilings failed:\n{}", w.stderr_tail());
            }
        }
    }
}
