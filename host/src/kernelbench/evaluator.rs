//! The answers' evaluator: one `tools/kernelbench_eval.py --serve` process per device, in the
//! sandbox, for the whole run ([`Evaluator`]). It imports torch once and never touches CUDA
//! itself; for each job (one protocol on one answer) it forks a child that initialises CUDA,
//! runs the protocol in a fresh scratch directory and dies, so an answer that crashes, hangs,
//! corrupts its CUDA context or patches the interpreter costs only itself. Under bubblewrap the
//! server runs alone in its PID namespace and kills every process a job left behind before the
//! next job starts. A server that stops answering is killed and the next job starts a fresh
//! one (a fresh uid too, as root).
use super::Outcome;
use crate::toolchain::sandbox::{Isolation, Sandbox};
use crate::toolchain::served::Served;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Seconds a server may take beyond a job's own limit before it is taken for hung: its start
/// (torch imported) and the child's clean-up.
const SERVER_GRACE_S: f64 = 120.0;

/// One device's evaluator server.
pub struct Evaluator {
    served: Served,
    scratch: PathBuf,
    next_job: usize,
}

/// What one job cost: its seconds in the child, and the server's start when this job started
/// one (the rest of the wall time); `stages` are the child's own account of its seconds (the
/// result's `stages_s`: known names, seconds in [0, 10^6)).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JobTimes {
    pub job_s: f64,
    pub start_s: f64,
    pub stages: Vec<(String, f64)>,
}

impl Evaluator {
    /// The evaluator `script` (`tools/kernelbench_eval.py`; tests give another) for `device`
    /// in `sandbox`, with `scratch` its only writable directory (each job gets a subdirectory,
    /// removed after it). Nothing starts until the first job.
    pub fn new(script: &Path, sandbox: &Sandbox, scratch: &Path, device: usize) -> Evaluator {
        let script = std::path::absolute(script).unwrap_or_else(|_| script.to_path_buf());
        let scratch = std::path::absolute(scratch).unwrap_or_else(|_| scratch.to_path_buf());
        // Alone in a PID namespace only under bubblewrap: only there may it kill every process
        // it can signal.
        let reap_all = sandbox.isolation == Isolation::Bubblewrap;
        let command_line = format!("python3 {} --serve", script.display());
        let (sandbox, dir) = (sandbox.clone(), scratch.clone());
        let make = Box::new(move || {
            let mut args = vec![script.as_os_str().to_owned(), "--serve".into()];
            if reap_all {
                args.push("--reap-all".into());
            }
            let mut c = sandbox.command(&dir, "python3", args)?;
            c.env("CUDA_VISIBLE_DEVICES", device.to_string());
            Ok(c)
        });
        Evaluator {
            served: Served::new("kernelbench_eval", command_line, make),
            scratch,
            next_job: 0,
        }
    }

    /// Runs `protocol` on the answer of `request` in a child of the server, killed after
    /// `limit_s`; `builds` are the answer's extensions built ahead ([`super::builds`]).
    pub fn run(
        &mut self,
        request: &Value,
        protocol: &str,
        builds: &[Value],
        limit_s: f64,
    ) -> (Outcome, JobTimes) {
        self.next_job += 1;
        let job = json!({
            "id": self.next_job,
            "request": request,
            "protocol": protocol,
            "scratch": self.scratch.join(format!("job-{}", self.next_job)),
            "limit_s": limit_s,
            "builds": builds,
        });
        let starts = !self.served.is_held() || self.served.has_exited();
        self.served.timeout_s = limit_s + SERVER_GRACE_S;
        let clock = Instant::now();
        let reply = self.served.request(&job);
        let wall = clock.elapsed().as_secs_f64();
        let job_s = reply
            .as_ref()
            .ok()
            .and_then(|r| r["seconds"].as_f64())
            .unwrap_or(wall)
            .min(wall);
        let stages = reply
            .as_ref()
            .map(|r| super::known_figures(&r["result"]["stages_s"], &super::STAGES))
            .unwrap_or_default()
            .into_iter()
            .collect();
        let times = JobTimes {
            job_s,
            start_s: if starts { wall - job_s } else { 0.0 },
            stages,
        };
        let outcome = match reply {
            Ok(r) if r["id"] != json!(self.next_job) => Outcome::Failed(format!(
                "the evaluator's server answered job {} when job {} was asked",
                r["id"], self.next_job
            )),
            Ok(r) => outcome_of(&r, limit_s),
            Err(e) => Outcome::Failed(format!("the evaluator's server failed: {e:#}")),
        };
        (outcome, times)
    }

    /// Ends the server (closes its input, kills it if it lingers).
    pub fn shutdown(&mut self) {
        self.served.shutdown();
        let _ = std::fs::remove_dir_all(&self.scratch);
    }
}

impl Drop for Evaluator {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The outcome a job's record says: `result`, `timeout` or `failed` (with the tail of what the
/// answer's process printed).
fn outcome_of(record: &Value, limit_s: f64) -> Outcome {
    let tail = record["log_tail"].as_str().unwrap_or("").trim_end();
    let with_tail = |m: &str| {
        if tail.is_empty() {
            m.to_string()
        } else {
            format!("{m}\n{tail}")
        }
    };
    match record["outcome"].as_str() {
        Some("result") if record["result"].is_object() => Outcome::Result(record["result"].clone()),
        Some("timeout") => Outcome::Timeout(limit_s),
        Some("failed") => Outcome::Failed(with_tail(
            record["error"].as_str().unwrap_or("(no message)"),
        )),
        _ => Outcome::Failed(with_tail(&format!(
            "the evaluator's server answered something else: {record}"
        ))),
    }
}
