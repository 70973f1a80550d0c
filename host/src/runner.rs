//! `dlrm-bench run`: picks the backend, measures the ceilings, loads the candidates, evaluates
//! every problem, and writes the results directory as it goes.
use crate::backend;
use crate::candidate::{discover, load_candidate, Candidate};
use crate::evaluate::{EvalConfig, ProblemRun};
use crate::metrics::{self, GroupMetrics};
use crate::record::{Ceilings, PeerTime, Record, Status};
use crate::report::{self, RecordLog, GIT_COMMIT};
use bench_problems::{all_problems, Preset, Problem};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;
use std::path::{Path, PathBuf};

/// Everything `run` needs.
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub problems: Vec<String>,
    pub candidate_roots: Vec<PathBuf>,
    pub preset: Option<Preset>,
    pub force_cpu: bool,
    pub require_gpu: bool,
    pub out: PathBuf,
    pub peer: Vec<PathBuf>,
    pub eval: EvalConfig,
    pub command_line: String,
}

/// What a finished run produced.
pub struct RunOutcome {
    pub dir: PathBuf,
    pub records: Vec<Record>,
    pub metrics: Vec<GroupMetrics>,
    pub on_gpu: bool,
}

const EMULATOR_BANNER: &str = "\
################################################################################
#  NO GPU: running on the CPU emulator at `ci` size.                           #
#  Correctness checks are real; TIMINGS ARE NOT GPU TIMINGS and the speedups   #
#  below say nothing about GPU performance. CUDA C++/PTX candidates are        #
#  skipped (they need a GPU); Rust candidates from gpu-kernels run.            #
################################################################################";

/// Runs the suite.
pub fn run(mut opts: RunOptions) -> anyhow::Result<RunOutcome> {
    let (mut backend, why) = backend::select(opts.force_cpu, opts.require_gpu)?;
    let on_gpu = backend.is_gpu();
    if !on_gpu {
        eprintln!("{EMULATOR_BANNER}\n(backend: {why})");
        if opts.preset.is_some_and(|p| p != Preset::Ci) {
            eprintln!(
                "warning: --preset {} ignored: the emulator runs `ci` sizes only",
                opts.preset.unwrap().name()
            );
        }
        opts.preset = Some(Preset::Ci);
    } else {
        eprintln!("backend: {why}");
    }
    let preset = opts.preset.unwrap_or(Preset::Full);
    opts.eval.preset = preset;

    let problems: Vec<&'static dyn Problem> = if opts.problems.is_empty() {
        all_problems()
    } else {
        opts.problems
            .iter()
            .map(|n| {
                bench_problems::find_problem(n)
                    .ok_or_else(|| anyhow::anyhow!("unknown problem `{n}` (see `dlrm-bench list`)"))
            })
            .collect::<anyhow::Result<_>>()?
    };

    let started = chrono::Utc::now();
    let run_id = format!(
        "{}-{}-{}",
        started.format("%Y%m%dT%H%M%SZ"),
        if on_gpu { "gpu" } else { "cpu" },
        preset.name()
    );
    let dir = opts.out.join(&run_id);
    std::fs::create_dir_all(&dir)?;
    let mut log = RecordLog::open(&dir)?;

    let ceilings = if on_gpu {
        let c = crate::ceilings::measure(&mut *backend)
            .map_err(|e| anyhow::anyhow!("measuring the device ceilings: {e}"))?;
        eprintln!(
            "ceilings: HBM copy {:.0} GB/s, L2 read {:.0} GB/s, fp32 {:.1} TFLOP/s",
            c.hbm_bytes_per_s / 1e9,
            c.l2_bytes_per_s / 1e9,
            c.fp32_flops_per_s / 1e12
        );
        Some(c)
    } else {
        None
    };
    let mut run_json = json!({
        "run_id": run_id,
        "started": started.to_rfc3339(),
        "finished": null,
        "command": opts.command_line,
        "git_commit": GIT_COMMIT,
        "backend": why,
        "device": backend.info(),
        "timings_are_gpu_timings": on_gpu,
        "ceilings": ceilings,
        "config": opts.eval,
        "public_seeds": (0..opts.eval.public_sets).map(|k| crate::evaluate::public_seed(opts.eval.seed, k)).collect::<Vec<_>>(),
        "secret_seed": "(written when the run ends)",
        "peer_files": opts.peer,
        "problems": problems.iter().map(|p| json!({
            "name": p.name(), "number": p.number(), "sizes": p.sizes(preset), "recipe": p.recipe(preset),
        })).collect::<Vec<_>>(),
    });
    write_json(&dir.join("run.json"), &run_json)?;

    let (candidates, invalid) = load_all(&opts.candidate_roots);
    let mut records = Vec::new();
    for err in invalid {
        let mut r = Record::new(
            "-",
            &err.file.display().to_string(),
            "invalid",
            &err.file.display().to_string(),
        );
        r.status = Status::InvalidManifest;
        r.message = err.to_string();
        eprintln!("invalid candidate: {err}");
        log.append(&r)?;
        records.push(r);
    }
    let peers = load_peers(&opts.peer);
    let total: usize = problems
        .iter()
        .map(|p| 1 + candidates.iter().filter(|c| c.problem == p.name()).count())
        .sum();
    let bar = ProgressBar::new(total as u64);
    bar.set_style(ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}").unwrap());
    for &problem in &problems {
        bar.set_message(format!("{}: generating inputs", problem.name()));
        let mine: Vec<&Candidate> = candidates
            .iter()
            .filter(|c| c.problem == problem.name())
            .collect();
        let mut prun =
            match ProblemRun::prepare(&mut *backend, problem, opts.eval.clone(), ceilings) {
                Ok(p) => p,
                Err(e) => {
                    let mut r = Record::new(problem.name(), "reference", "reference", "reference");
                    r.status = Status::RuntimeError;
                    r.message = format!("could not prepare the inputs: {e:#}");
                    log.append(&r)?;
                    records.push(r);
                    bar.inc(1 + mine.len() as u64);
                    continue;
                }
            };
        bar.set_message(format!("{}: reference", problem.name()));
        let mut reference = prun.reference_record();
        attach_peer(&mut reference, &peers);
        log.append(&reference)?;
        records.push(reference);
        bar.inc(1);
        for cand in mine {
            bar.set_message(format!("{}: {}/{}", problem.name(), cand.group, cand.name));
            let r = prun.evaluate(cand);
            log.append(&r)?;
            records.push(r);
            bar.inc(1);
        }
        prun.release();
    }
    bar.finish_and_clear();

    let metrics = metrics::summarize(&records, problems.len());
    run_json["finished"] = json!(chrono::Utc::now().to_rfc3339());
    run_json["secret_seed"] = json!(opts.eval.secret_seed);
    run_json["metrics"] = serde_json::to_value(&metrics)?;
    write_json(&dir.join("run.json"), &run_json)?;
    let heading = heading(&run_id, backend.info(), on_gpu, ceilings);
    report::write_markdown(&dir, &heading, &records, &metrics)?;
    report::write_csv(&dir, &records)?;
    println!("{heading}\n");
    println!("{}", report::terminal_tables(&records, &metrics));
    println!("results: {} ({})", dir.display(), log.path().display());
    Ok(RunOutcome {
        dir,
        records,
        metrics,
        on_gpu,
    })
}

fn heading(run_id: &str, info: &backend::DeviceInfo, on_gpu: bool, c: Option<Ceilings>) -> String {
    let mut s = format!(
        "# DLRM-Bench run {run_id}\n\ndevice: {} ({}), driver: {}, commit: {GIT_COMMIT}",
        info.name,
        info.kind,
        info.driver.clone().unwrap_or_else(|| "-".into())
    );
    if let Some(c) = c {
        s += &format!(
            "\nceilings: HBM copy {:.0} GB/s, L2 read {:.0} GB/s, fp32 {:.1} TFLOP/s",
            c.hbm_bytes_per_s / 1e9,
            c.l2_bytes_per_s / 1e9,
            c.fp32_flops_per_s / 1e12
        );
    }
    if !on_gpu {
        s += "\n\n**CPU emulator: correctness is real, timings are NOT GPU timings.**";
    }
    s
}

fn write_json(path: &Path, v: &serde_json::Value) -> std::io::Result<()> {
    std::fs::write(
        path,
        serde_json::to_string_pretty(v).map_err(std::io::Error::other)?,
    )
}

/// Loads every candidate under the roots; invalid manifests are returned separately.
pub fn load_all(roots: &[PathBuf]) -> (Vec<Candidate>, Vec<crate::candidate::CandidateError>) {
    let mut ok = Vec::new();
    let mut bad = Vec::new();
    for root in roots {
        if !root.exists() {
            eprintln!(
                "warning: candidate directory {} does not exist",
                root.display()
            );
        }
        for dir in discover(root) {
            match load_candidate(&dir) {
                Ok(c) => ok.push(c),
                Err(e) => bad.push(e),
            }
        }
    }
    (ok, bad)
}

/// PyTorch peer timings by problem, from `tools/torch_peer.py` JSONL files (last line wins).
fn load_peers(files: &[PathBuf]) -> Vec<(String, f64, String)> {
    let mut out = Vec::new();
    for f in files {
        match std::fs::read_to_string(f) {
            Ok(text) => {
                for (i, line) in text
                    .lines()
                    .enumerate()
                    .filter(|(_, l)| !l.trim().is_empty())
                {
                    match serde_json::from_str::<serde_json::Value>(line) {
                        Ok(v) => match (v["problem"].as_str(), v["median_ms"].as_f64()) {
                            (Some(p), Some(ms)) => {
                                out.push((p.to_string(), ms, f.display().to_string()))
                            }
                            _ => eprintln!(
                                "warning: {}:{}: no `problem` or `median_ms`",
                                f.display(),
                                i + 1
                            ),
                        },
                        Err(e) => eprintln!("warning: {}:{}: {e}", f.display(), i + 1),
                    }
                }
            }
            Err(e) => eprintln!("warning: cannot read peer file {}: {e}", f.display()),
        }
    }
    out
}

fn attach_peer(reference: &mut Record, peers: &[(String, f64, String)]) {
    if let (Some((_, ms, src)), Some(t)) = (
        peers.iter().rev().find(|(p, _, _)| p == &reference.problem),
        &reference.timing,
    ) {
        reference.pytorch = Some(PeerTime {
            median_ms: *ms,
            reference_over_pytorch: t.median_ms / ms,
            source: src.clone(),
        });
    }
}
