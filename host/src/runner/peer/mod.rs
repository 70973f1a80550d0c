//! PyTorch eager beside the references (`run --torch`). One `tools/torch_peer.py --serve`
//! process ([`PeerServer`]) serves the whole run: it imports torch and initialises CUDA once,
//! then times eager on each problem's input files ([`run_peer`], one JSON request and one JSON
//! answer per problem, under a time limit). A server that hangs or dies is killed and the next
//! problem starts a fresh one; any failure is a warning and leaves that problem without a peer.
//! The timings come back through JSONL files ([`load_peers`]) and sit beside each reference
//! record ([`attach_peer`]).
use crate::evaluate::{rotation_files, EvalConfig, InputCache};
use crate::results::record::{unit_key, PeerTime, Record};
use crate::runner::activity::{Phase, PhaseTimes};
use crate::toolchain::served::Served;
use bench_problems::Problem;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The peer's script, relative to the working directory (the repository root).
pub(crate) const TORCH_PEER: &str = "tools/torch_peer.py";
/// Seconds PyTorch's peer may take on one problem.
pub(crate) const PEER_TIMEOUT_S: f64 = 900.0;
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
    /// The problem's shape the time is for (a line without one: the default shape).
    pub shape: Option<String>,
    /// [`EAGER`] or [`COMPILE`].
    pub implementation: String,
    /// NaN when `error` is set.
    pub median_ms: f64,
    /// The spread of the times, when the line gives it.
    pub p10_ms: Option<f64>,
    pub p90_ms: Option<f64>,
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
                            shape: v["shape"].as_str().map(str::to_string),
                            implementation,
                            median_ms: ms,
                            p10_ms: v["p10_ms"].as_f64(),
                            p90_ms: v["p90_ms"].as_f64(),
                            error: None,
                            source: f.display().to_string(),
                        }),
                        (Some(p), _, Some(e)) => out.push(PeerMedian {
                            problem: p.to_string(),
                            shape: v["shape"].as_str().map(str::to_string),
                            implementation,
                            median_ms: f64::NAN,
                            p10_ms: None,
                            p90_ms: None,
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
        peers.iter().rev().find(|p| {
            p.problem == reference.problem
                && unit_key(&p.problem, p.shape.as_deref()) == reference.unit_key()
                && p.implementation == implementation
        })
    };
    let time = |peer: &PeerMedian| PeerTime {
        median_ms: peer.median_ms,
        reference_over_pytorch: t.median_ms / peer.median_ms,
        source: peer.source.clone(),
        p10_ms: peer.p10_ms,
        p90_ms: peer.p90_ms,
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
            shape: problem.shape_name(),
            inputs: rotation_files(problem, eval, cache),
            out: peer_file,
            check: true,
            // At a problem's other shapes eager runs the same code: one set says it computes
            // the problem (its f64 check is the peer's slowest stage there).
            check_sets: problem
                .shape_name()
                .filter(|s| *s != bench_problems::DEFAULT_SHAPE)
                .map(|_| 1),
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
    /// The problem's shape, echoed into the peer's record (the inputs say the sizes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shape: Option<&'a str>,
    pub inputs: Vec<PathBuf>,
    pub out: &'a Path,
    pub check: bool,
    /// Check only the first that many sets (all of them when absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check_sets: Option<usize>,
    pub iters: u32,
    pub warmup: u32,
    /// Time the Model under `torch.compile` instead of eager.
    pub compile: bool,
}

/// The run's `tools/torch_peer.py --serve` process ([`Served`]): started at the first request,
/// kept for the next ones, replaced after a timeout or a death.
pub(crate) type PeerServer = Served;

/// The run's server: `python3 tools/torch_peer.py --serve`, `PEER_TIMEOUT_S` a request.
pub(crate) fn torch_server() -> PeerServer {
    let mut s = Served::program("torch", "python3", [TORCH_PEER, "--serve"]);
    s.timeout_s = PEER_TIMEOUT_S;
    s
}

#[cfg(test)]
mod tests;
