//! `dlrm-bench run`: the orchestrator. It picks the device, measures the ceilings, loads the
//! candidates, and for each problem starts a worker process ([`crate::runner::worker`]) that checks and
//! times the candidates. A candidate that crashes the worker is recorded as `runtime_error`, one
//! that exceeds the time limit as `timeout` (the worker is killed); a fresh worker then takes
//! the candidates left. Records are appended to `results.jsonl` as they arrive, so
//! `--resume DIR` finishes an interrupted run without redoing what is there. With `--torch`,
//! PyTorch eager is timed beside each reference by the run's one peer server ([`crate::runner::peer`]).
//! With `--shard i/n` it runs only its block of the items ([`crate::runner::shard`]); with `--devices`
//! each problem's candidates are split over the devices, a worker per device at a time
//! (`runner/units.rs`).
use crate::backend::{self, DeviceInfo};
use crate::candidate::{discover_all, load_candidate, Candidate};
use crate::evaluate::{EvalConfig, InputCache};
use crate::kernelbench;
use crate::report;
use crate::report::metrics::{Basis, Summary};
use crate::report::projection::{self, Workload};
use crate::results::derived::{input_stats, phase_table, phase_totals};
use crate::results::record::{read_records, Ceilings, Record, RecordLog, Status, GIT_COMMIT};
use crate::results::run_dir::{self, SECRET_FILE, SECRET_HIDDEN};
use crate::results::{self, RunMeta, SecretSeed, ShardMeta};
use crate::runner::activity::PhaseTimes;
use crate::runner::peer::{
    attach_peer, load_peers, peer_files, run_peer, torch_available, PeerMedian, PeerServer,
};
use crate::runner::shard::Shard;
use crate::runner::worker::{Event, WorkerSpec};
use crate::runner::worker_exit::death_message;
use bench_problems::{all_problems, Preset, Problem};
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::{BTreeSet, VecDeque};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use units::{append, device_cache, UnitContext};

pub mod activity;
pub mod peer;
pub mod shard;
mod units;
pub mod worker;
pub mod worker_exit;

/// Everything `run` needs (also stored in `run.json`, so `--resume` can rebuild it).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunOptions {
    pub problems: Vec<String>,
    pub candidate_roots: Vec<PathBuf>,
    pub preset: Option<Preset>,
    pub force_cpu: bool,
    pub require_gpu: bool,
    pub out: PathBuf,
    pub peer: Vec<PathBuf>,
    pub eval: EvalConfig,
    /// Seconds one execution of a candidate's launch plan may run on the device before its
    /// worker is killed ([`execution_limit_s`]); the harness's own work never counts.
    pub timeout_s: f64,
    pub command_line: String,
    /// A workload profile to project the run's wins onto (summary and run.json).
    #[serde(default)]
    pub workload: Option<PathBuf>,
    /// Time PyTorch eager (`tools/torch_peer.py`) on the run's own input files.
    #[serde(default)]
    pub torch: bool,
    /// Also time the `torch.compile`d Model (with `torch`).
    #[serde(default)]
    pub torch_compile: bool,
    /// The input cache's directory (default [`default_input_cache`]).
    #[serde(default)]
    pub input_cache: Option<PathBuf>,
    /// Keep the input cache after the run.
    #[serde(default)]
    pub keep_inputs: bool,
    /// Directories of KernelBench answers (`dlrm-bench kernelbench`): each answer is evaluated
    /// after its problem's native candidates ([`crate::kernelbench`]).
    #[serde(default)]
    pub kernelbench: Vec<PathBuf>,
    /// Seconds each of an answer's two evaluator processes may take (loading, compiling,
    /// checking, timing) before it is killed.
    #[serde(default = "default_answer_timeout_s")]
    pub answer_timeout_s: f64,
    /// The basis of the headline metrics (every basis measured is reported).
    #[serde(default)]
    pub basis: Basis,
    /// Print the final table with every column (else it fits 120 columns). On `--resume`, the
    /// command line's, not the interrupted run's.
    #[serde(default)]
    pub wide: bool,
    /// This run's share of the items (`--shard i/n`, [`crate::runner::shard`]); `None`: all of them.
    #[serde(default)]
    pub shard: Option<Shard>,
    /// The ordinals of the devices that run workers, one worker per device at a time
    /// (`--devices`; empty: device 0).
    #[serde(default)]
    pub devices: Vec<usize>,
    /// `--devices all`: every CUDA device (resolved into `devices` when the run starts).
    #[serde(default)]
    pub all_devices: bool,
    /// The secret seed the scheduler gave (`--secret-seed-file`, `DLRM_BENCH_SECRET_SEED`):
    /// never written into `run.json` with the options.
    #[serde(skip)]
    pub given_secret: Option<u64>,
}

fn default_answer_timeout_s() -> f64 {
    600.0
}

/// What a finished run produced.
pub struct RunOutcome {
    pub dir: PathBuf,
    pub records: Vec<Record>,
    /// The group metrics on both bases.
    pub metrics: Summary,
    pub on_gpu: bool,
}

const EMULATOR_BANNER: &str = "\
################################################################################
#  NO GPU: running on the CPU emulator at `ci` size.                           #
#  Correctness checks are real; TIMINGS ARE NOT GPU TIMINGS and the speedups   #
#  below say nothing about GPU performance. CUDA C++/PTX candidates are        #
#  skipped (they need a GPU); Rust candidates from gpu-kernels run.            #
################################################################################";

/// Seconds a worker may spend generating inputs and checking the reference.
const PREPARE_TIMEOUT_S: f64 = 900.0;
/// Seconds the harness may go without any report while it evaluates a candidate (a stall of
/// the harness, never charged to the candidate as a `timeout`).
const HARNESS_STALL_S: f64 = 900.0;
/// An execution of a candidate's plan may take at most this many times the reference's median…
const REFERENCE_MULTIPLE: f64 = 1000.0;
/// …but is never cut before this many seconds.
const MIN_EXECUTION_LIMIT_S: f64 = 10.0;

/// Seconds one execution of a candidate's plan may run: `timeout_s`, and at most
/// [`REFERENCE_MULTIPLE`] times the reference's median (`reference_ms`, when known), never under
/// [`MIN_EXECUTION_LIMIT_S`] (unless `timeout_s` itself is lower).
pub fn execution_limit_s(timeout_s: f64, reference_ms: Option<f64>) -> f64 {
    match reference_ms {
        Some(ms) if ms > 0.0 => {
            timeout_s.min((REFERENCE_MULTIPLE * ms / 1e3).max(MIN_EXECUTION_LIMIT_S))
        }
        _ => timeout_s,
    }
}

/// Where a run's input cache goes by default: memory-backed `/dev/shm/dlrm-bench/<run-id>-<pid>`
/// when `/dev/shm` is a writable directory (sets are gigabytes at `full`), else the run
/// directory's `inputs/`. The process id keeps two runs started in the same second (tests)
/// apart; a resumed run makes its inputs again.
pub fn default_input_cache(run_dir: &Path, run_id: &str) -> PathBuf {
    let shm = Path::new("/dev/shm");
    let writable = shm.is_dir()
        && std::fs::metadata(shm).is_ok_and(|m| !m.permissions().readonly())
        && std::fs::create_dir_all(shm.join("dlrm-bench")).is_ok();
    if writable {
        shm.join("dlrm-bench")
            .join(format!("{run_id}-{}", std::process::id()))
    } else {
        run_dir.join("inputs")
    }
}

/// Runs the suite (or finishes the run in `resume`): [`prepare`]s it, measures the device's
/// ceilings and writes `run.json`, [`execute`]s every problem's unit, and [`finish`]es with the
/// metrics, `run.json` complete, the reports and the phase table.
pub fn run(opts: RunOptions, resume: Option<&Path>) -> anyhow::Result<RunOutcome> {
    let (p, log) = prepare(opts, resume)?;
    let exe = std::env::current_exe()?;
    // Wall seconds outside the problems' workers (ceilings, the torch probe) and of each
    // problem's session, so run.json accounts for the whole wall time.
    let mut setup = serde_json::Map::new();
    let clock = Instant::now();
    let ceilings = measure_run_ceilings(&p, &exe)?;
    setup.insert("ceilings".into(), json!(clock.elapsed().as_secs_f64()));
    let mut meta = initial_meta(&p, ceilings)?;
    meta.write(&p.dir)?;
    let executed = execute(&p, log, &exe, ceilings, &mut meta, &mut setup)?;
    finish(p, meta, setup, ceilings, executed)
}

/// A run made ready: its options as they will be recorded, the device, the work, its
/// directory and secret seed, and what an earlier attempt of it recorded.
struct Prepared {
    opts: RunOptions,
    info: DeviceInfo,
    on_gpu: bool,
    why: String,
    preset: Preset,
    answers: Vec<kernelbench::Answer>,
    bad_answers: Vec<(PathBuf, String)>,
    problems: Vec<&'static dyn Problem>,
    workload: Option<Workload>,
    started: chrono::DateTime<chrono::Utc>,
    dir: PathBuf,
    run_id: String,
    secret_seed: u64,
    published: bool,
    cache_root: PathBuf,
    previous: Vec<Record>,
    done: BTreeSet<(String, String)>,
}

/// What [`execute`] leaves for [`finish`].
struct Executed {
    fresh: usize,
    touched: usize,
    sessions: serde_json::Map<String, serde_json::Value>,
    in_sessions: f64,
}

/// Resolves the options (a resume's from its `run.json`), probes the device, selects the
/// problems and answers, and opens the run's directory (a new one, or the resumed one with its
/// secret seed and records); the record log opened for appending.
fn prepare(opts: RunOptions, resume: Option<&Path>) -> anyhow::Result<(Prepared, RecordLog)> {
    let (wide, given_secret) = (opts.wide, opts.given_secret);
    let (mut opts, original) = match resume {
        Some(dir) => {
            let (opts, run) = resumed(dir)?;
            (opts, Some((dir, run)))
        }
        None => (opts, None),
    };
    opts.wide = wide;
    if opts.all_devices {
        let count = if opts.force_cpu {
            0
        } else {
            backend::cuda_device_count()
        };
        opts.devices = (0..count.max(1)).collect();
        opts.all_devices = false;
    }
    if opts.devices.is_empty() {
        opts.devices = vec![0];
    }
    anyhow::ensure!(
        opts.devices.len() == 1 || !opts.torch,
        "--torch (and `kernelbench`) time PyTorch on one GPU: give one device with --devices, \
         or none"
    );
    // GPUs named by --devices are not quietly replaced by the emulator.
    let require_gpu = opts.require_gpu || (!opts.force_cpu && opts.devices != [0]);
    let (info, on_gpu, why) = probe_device(opts.force_cpu, require_gpu, &opts.devices)?;
    if !on_gpu {
        eprintln!("{EMULATOR_BANNER}\n(backend: {why})");
        if opts.preset.is_some_and(|p| p != Preset::Ci) {
            eprintln!(
                "warning: --preset {} ignored: the emulator runs `ci` sizes only",
                opts.preset.unwrap().name()
            );
        }
        opts.preset = Some(Preset::Ci);
        opts.force_cpu = true;
    } else {
        eprintln!("backend: {why}");
    }
    let preset = opts.preset.unwrap_or(Preset::Full);
    opts.eval.preset = preset;
    if let Some((dir, run)) = &original {
        run_dir::check_resume_backend(dir, run, on_gpu, &info, preset)?;
    }
    let (answers, bad_answers) = kernelbench::discover(&opts.kernelbench);
    problems_of_answers(&mut opts, &answers)?;
    let problems = select_problems(&opts.problems)?;
    // A bad profile or a missing candidate directory is an error before anything is measured
    // or written; the roots are recorded absolute, so a resume from elsewhere finds them.
    let workload = opts.workload.as_deref().map(Workload::load).transpose()?;
    opts.candidate_roots = crate::candidate::check_roots(&opts.candidate_roots)?;

    let started = chrono::Utc::now();
    let (dir, secret_seed, published) = open_run_dir(
        &opts,
        original.as_ref(),
        given_secret,
        on_gpu,
        preset,
        &started,
    )?;
    let run_id = dir
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let cache_root = opts
        .input_cache
        .clone()
        .unwrap_or_else(|| default_input_cache(&dir, &run_id));
    eprintln!("input cache: {}", cache_root.display());
    let log = RecordLog::open(&dir)?;
    let previous = read_records(&dir.join("results.jsonl"));
    let done: BTreeSet<(String, String)> = previous
        .iter()
        .map(|r| (r.problem.clone(), r.origin.clone()))
        .collect();

    Ok((
        Prepared {
            opts,
            info,
            on_gpu,
            why,
            preset,
            answers,
            bad_answers,
            problems,
            workload,
            started,
            dir,
            run_id,
            secret_seed,
            published,
            cache_root,
            previous,
            done,
        },
        log,
    ))
}

/// `kernelbench DIR...` without --problem: the problems the answers are for.
fn problems_of_answers(
    opts: &mut RunOptions,
    answers: &[kernelbench::Answer],
) -> anyhow::Result<()> {
    if opts.problems.is_empty() && !opts.kernelbench.is_empty() {
        opts.problems = bench_problems::all_problems()
            .iter()
            .filter(|p| answers.iter().any(|a| a.problem == p.name()))
            .map(|p| p.name().to_string())
            .collect();
        anyhow::ensure!(
            !opts.problems.is_empty(),
            "no KernelBench answers in {}",
            opts.kernelbench
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(())
}

/// The run's directory, secret seed and whether `run.json` had published it: the resumed run's
/// (`original`), or a new directory with the seed kept in its secret file.
fn open_run_dir(
    opts: &RunOptions,
    original: Option<&(&Path, RunMeta)>,
    given_secret: Option<u64>,
    on_gpu: bool,
    preset: Preset,
    started: &chrono::DateTime<chrono::Utc>,
) -> anyhow::Result<(PathBuf, u64, bool)> {
    Ok(match original {
        Some((dir, run)) => {
            eprintln!("resuming {}", dir.display());
            // Stored in SECRET_FILE again before run.json is rewritten (run_dir's doc).
            let (seed, published) = resumed_secret(dir, run, given_secret)?;
            (dir.to_path_buf(), seed, published)
        }
        None => {
            let run_id = format!(
                "{}-{}-{}{}",
                started.format("%Y%m%dT%H%M%SZ"),
                if on_gpu { "gpu" } else { "cpu" },
                preset.name(),
                opts.shard
                    .map(|s| format!("-shard{}of{}", s.index, s.count))
                    .unwrap_or_default()
            );
            let dir = run_dir::create_run_dir(&opts.out, &run_id)?;
            let secret = opts.eval.secret_seed;
            // Kept out of run.json until the run ends; a resumed run reads it from here.
            run_dir::store_secret(&dir, secret)?;
            (dir, secret, false)
        }
    })
}

/// Candidates and KernelBench answers that cannot run, as (origin, name, what, why): each gets
/// one `invalid_manifest` record.
fn refused_items(
    invalid: &[crate::candidate::CandidateError],
    bad_answers: &[(PathBuf, String)],
) -> Vec<(String, String, &'static str, String)> {
    invalid
        .iter()
        .map(|err| {
            let origin = err.file.parent().unwrap_or(&err.file).display().to_string();
            (origin.clone(), origin, "candidate", err.to_string())
        })
        .chain(bad_answers.iter().map(|(file, why)| {
            let origin = format!("{}{}", kernelbench::ORIGIN_PREFIX, file.display());
            (
                origin,
                file.display().to_string(),
                "KernelBench answer",
                why.clone(),
            )
        }))
        .collect()
}

/// A shard's part of `run.json` (which items it holds, the secret seed's digest), written.
fn record_shard(
    opts: &RunOptions,
    items: usize,
    secret_seed: u64,
    meta: &mut RunMeta,
    dir: &Path,
) -> anyhow::Result<()> {
    if let Some(s) = opts.shard {
        let range = s.range(items);
        meta.shard = Some(ShardMeta {
            index: s.index,
            count: s.count,
            items,
            first_item: range.start,
            end_item: range.end,
        });
        meta.secret_seed_sha256 = Some(shard::secret_digest(secret_seed));
        meta.write(dir)?;
        eprintln!(
            "shard {s}: items {}..{} of {}",
            range.start, range.end, items
        );
    }
    Ok(())
}

/// Whether PyTorch is timed beside the references: asked for, on a GPU, and importable (the
/// probe's seconds go to `setup`); a warning says why not when asked for.
fn torch_peer(
    opts: &RunOptions,
    on_gpu: bool,
    setup: &mut serde_json::Map<String, serde_json::Value>,
) -> bool {
    let clock = Instant::now();
    let torch = opts.torch && on_gpu && torch_available();
    setup.insert("torch_probe".into(), json!(clock.elapsed().as_secs_f64()));
    if opts.torch && !torch {
        eprintln!(
            "warning: --torch: no PyTorch peer ({}): python3 with torch and a GPU are needed",
            if on_gpu {
                "python3 cannot import torch"
            } else {
                "no GPU"
            }
        );
    }
    torch
}

/// The device's ceilings, measured on the first device when the run is on a GPU.
fn measure_run_ceilings(p: &Prepared, exe: &Path) -> anyhow::Result<Option<Ceilings>> {
    let (opts, on_gpu, secret_seed) = (&p.opts, p.on_gpu, p.secret_seed);
    Ok(if on_gpu {
        // On the first device; `probe_device` made sure the others are of its model.
        let c = measure_ceilings(exe, opts, secret_seed)?;
        eprintln!(
            "ceilings: HBM copy {:.0} GB/s, L2 read {:.0} GB/s, fp32 {:.1} TFLOP/s",
            c.hbm_bytes_per_s / 1e9,
            c.l2_bytes_per_s / 1e9,
            c.fp32_flops_per_s / 1e12
        );
        Some(c)
    } else {
        None
    })
}

/// `run.json` as the run starts (or resumes).
fn initial_meta(p: &Prepared, ceilings: Option<Ceilings>) -> anyhow::Result<RunMeta> {
    let Prepared {
        opts,
        info,
        on_gpu,
        why,
        preset,
        problems,
        started,
        run_id,
        secret_seed,
        published,
        ..
    } = p;
    let (on_gpu, preset, secret_seed, published) = (*on_gpu, *preset, *secret_seed, *published);
    Ok(RunMeta {
        format: results::meta::FORMAT,
        run_id: run_id.clone(),
        started: started.to_rfc3339(),
        finished: None,
        command: opts.command_line.clone(),
        git_commit: GIT_COMMIT.into(),
        backend: why.clone(),
        device: info.clone(),
        timings_are_gpu_timings: on_gpu,
        ceilings,
        config: serde_json::to_value(&opts.eval)?,
        public_seeds: (0..opts.eval.public_sets)
            .map(|k| crate::evaluate::public_seed(opts.eval.seed, k))
            .collect(),
        // Once published it stays so (a resume of a run that had ended).
        secret_seed: if published {
            SecretSeed::Published(secret_seed)
        } else {
            SecretSeed::Withheld(SECRET_HIDDEN.into())
        },
        peer_files: opts.peer.clone(),
        devices: Some(opts.devices.clone()),
        options: Some(serde_json::to_value(opts)?),
        problems: problems
            .iter()
            .map(|p| json!({"name": p.name(), "number": p.number(), "sizes": p.sizes(preset), "recipe": p.recipe(preset)}))
            .collect(),
        shard: None,
        secret_seed_sha256: None,
        metrics: None,
        input_stats: None,
        wall_s: None,
        phases: None,
        projection: None,
        complete: None,
        merged_shards: None,
        extra: Default::default(),
    })
}

/// Records the candidates and answers that cannot run, then runs every unit of this shard's
/// work (each problem's reference, candidates and answers, in workers) with PyTorch's peer when
/// asked for; every record is appended to `results.jsonl` as it comes.
fn execute(
    p: &Prepared,
    mut log: RecordLog,
    exe: &Path,
    ceilings: Option<Ceilings>,
    meta: &mut RunMeta,
    setup: &mut serde_json::Map<String, serde_json::Value>,
) -> anyhow::Result<Executed> {
    let Prepared {
        opts,
        on_gpu,
        answers,
        bad_answers,
        problems,
        dir,
        secret_seed,
        cache_root,
        previous,
        done,
        ..
    } = p;
    let (on_gpu, secret_seed) = (*on_gpu, *secret_seed);
    let mut sessions = serde_json::Map::new();
    let (candidates, invalid) = load_all(&opts.candidate_roots);
    let mut fresh = Vec::new();
    // Candidates and KernelBench answers that cannot run: one `invalid_manifest` record each
    // (once: a resumed run has them already).
    let refused = refused_items(&invalid, bad_answers);
    // This shard's items (all of them without --shard).
    let names: Vec<&str> = problems.iter().map(|p| p.name()).collect();
    let all_items = shard::items(
        &names,
        &candidates
            .iter()
            .map(|c| (c.problem.clone(), c.origin.clone()))
            .collect::<Vec<_>>(),
        &answers
            .iter()
            .map(|a| (a.problem.to_string(), a.origin()))
            .collect::<Vec<_>>(),
        &refused.iter().map(|r| r.0.clone()).collect::<Vec<_>>(),
    );
    let this_shard = opts.shard.unwrap_or(Shard::WHOLE);
    let owned = shard::owned(&all_items, this_shard);
    let owns = |problem: &str, origin: &str| owned.contains(&(problem.into(), origin.into()));
    record_shard(opts, all_items.len(), secret_seed, meta, dir)?;
    for (origin, name, what, why) in refused {
        if done.contains(&("-".to_string(), origin.clone())) || !owns("-", &origin) {
            continue;
        }
        let mut r = Record::new("-", &name, "invalid", &origin);
        r.status = Status::InvalidManifest;
        r.message = why;
        eprintln!("invalid {what}: {}", r.message);
        log.append(&r)?;
        fresh.push(r);
    }
    let mut peers = load_peers(&opts.peer);
    let torch = torch_peer(opts, on_gpu, setup);
    let peer_file = dir.join("peer.jsonl");
    // Started at the first problem's peer job, kept for the whole run.
    let mut peer_server = PeerServer::torch();
    if torch {
        meta.peer_files = peer_files(&opts.peer, &peer_file);
        meta.write(dir)?;
    }
    let units = units::plan(problems, &candidates, answers, &owns, &opts.devices);
    let touched: BTreeSet<&str> = units.iter().map(|u| u.problem.name()).collect();
    let total: usize = units
        .iter()
        .map(|u| usize::from(u.keeps_reference) + u.candidates.len() + u.answers.len())
        .sum();
    let bar = ProgressBar::new(total as u64);
    bar.set_style(ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}").unwrap());
    let log = Mutex::new(log);
    let ctx = UnitContext {
        opts,
        exe,
        secret_seed,
        ceilings,
        log: &log,
        bar: &bar,
        done,
        previous,
        cache_root,
        per_device_cache: opts.devices.len() > 1,
        dir,
        peer_file: &peer_file,
        torch,
    };
    let (records, in_sessions) =
        ctx.run_all(&units, &mut peers, &mut peer_server, &mut sessions)?;
    fresh.extend(records);
    peer_server.shutdown();
    if !opts.keep_inputs {
        for &d in &opts.devices {
            let _ = std::fs::remove_dir(cache_root.join(device_cache(d)));
        }
        let _ = std::fs::remove_dir(cache_root);
    }
    bar.finish_and_clear();

    Ok(Executed {
        fresh: fresh.len(),
        touched: touched.len(),
        sessions,
        in_sessions,
    })
}

/// The run's end: its metrics and `run.json` complete (secret seed published, phases,
/// projection), the secret file removed, the reports written and the tables and phase times
/// printed.
fn finish(
    p: Prepared,
    mut meta: RunMeta,
    setup: serde_json::Map<String, serde_json::Value>,
    ceilings: Option<Ceilings>,
    executed: Executed,
) -> anyhow::Result<RunOutcome> {
    let Prepared {
        opts,
        info,
        on_gpu,
        workload,
        started,
        dir,
        run_id,
        secret_seed,
        ..
    } = p;
    let Executed {
        fresh,
        touched,
        sessions,
        in_sessions,
    } = executed;
    let records = read_records(&dir.join("results.jsonl"));
    let metrics = Summary::new(&records, touched, opts.basis);
    meta.finished = Some(chrono::Utc::now().to_rfc3339());
    // A shard's seed is the other shards' too: only their merge publishes it.
    meta.secret_seed = match opts.shard {
        Some(_) => SecretSeed::Withheld(shard::SECRET_WITH_MERGE.into()),
        None => SecretSeed::Published(secret_seed),
    };
    meta.metrics = Some(serde_json::to_value(&metrics)?);
    meta.input_stats = Some(input_stats(&records));
    let wall_s = (chrono::Utc::now() - started).as_seconds_f64();
    meta.wall_s = Some(wall_s);
    // Where the wall time went outside the phases: the run's setup, and each problem's
    // session beyond its phases (worker start-up, device contexts, cache removal).
    let in_setup: f64 = setup.values().filter_map(|v| v.as_f64()).sum();
    let mut phases = phase_table(&records);
    phases["setup_s"] = setup.into();
    phases["sessions_s"] = sessions.into();
    phases["outside_sessions_s"] = json!(wall_s - in_sessions - in_setup);
    meta.phases = Some(phases);
    // Emulator timings say nothing about a GPU step: no projection from them.
    let projection = workload
        .as_ref()
        .filter(|_| on_gpu)
        .map(|w| projection::project(w, &records, None));
    if workload.is_some() && !on_gpu {
        eprintln!("no end-to-end projection: the emulator's timings are not GPU timings");
    }
    meta.projection = projection.as_ref().map(|p| p.to_json());
    meta.write(&dir)?;
    let _ = std::fs::remove_file(dir.join(SECRET_FILE));
    let heading = heading(&run_id, &info, on_gpu, ceilings);
    let projection_md = workload
        .as_ref()
        .zip(projection.as_ref())
        .map(|(w, p)| p.markdown(w));
    let suffix = projection_md
        .as_ref()
        .map_or(String::new(), |t| format!("\n{t}"));
    report::write_markdown(&dir, &heading, &records, &metrics, &suffix)?;
    report::write_csv(&dir, &records)?;
    crate::report::html::write_run_report(
        &dir,
        &records,
        &metrics,
        workload.as_ref().zip(projection.as_ref()),
    )?;
    println!("{heading}\n");
    println!("{}", report::terminal_tables(&records, &metrics, opts.wide));
    if let Some(kb) = kernelbench::verdicts_markdown(&records) {
        println!("\nKernelBench answers: our verdict beside KernelBench's\n{kb}");
    }
    if let Some(text) = &projection_md {
        println!("\n{text}");
    }
    println!("results: {} ({fresh} new records)", dir.display());
    let (_, all) = phase_totals(&records);
    let phases: Vec<String> = all
        .0
        .iter()
        .map(|(p, s)| format!("{} {s:.1} s", p.describe()))
        .collect();
    println!(
        "time: {wall_s:.1} s in all; setup {in_setup:.1} s; in the workers: {}; outside the \
         phases {:.1} s",
        phases.join(", "),
        wall_s - in_setup - all.total()
    );
    Ok(RunOutcome {
        dir,
        records,
        metrics,
        on_gpu,
    })
}

/// One KernelBench answer's record: both protocols run when the run has PyTorch on a GPU, the
/// problem's reference passed and its input sets are in the cache; otherwise skipped, saying
/// why.
#[allow(clippy::too_many_arguments)]
fn evaluate_answer(
    answer: &kernelbench::Answer,
    problem: &'static dyn Problem,
    opts: &RunOptions,
    cache: &InputCache,
    reference: Option<&Record>,
    ceilings: Option<Ceilings>,
    torch: bool,
    work_dir: &Path,
) -> Record {
    if !torch {
        return kernelbench::skipped_record(
            answer,
            "not run: KernelBench answers need python3 with torch and a CUDA GPU, and this run \
             has none",
        );
    }
    if reference.is_none_or(|r| r.status != Status::Correct) {
        return kernelbench::skipped_record(
            answer,
            "not run: the reference failed its own check on this device",
        );
    }
    let request = kernelbench::request(problem, answer, &opts.eval, cache);
    let missing = request["check_sets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["path"].as_str())
        .find(|p| !Path::new(p).is_file());
    if let Some(m) = missing {
        return kernelbench::skipped_record(
            answer,
            &format!(
                "not run: input set {m} is not in the input cache (a resumed run whose inputs \
                 were removed: resume with the inputs kept, or run again)"
            ),
        );
    }
    let (ours, kb) = kernelbench::evaluate(&request, work_dir, opts.answer_timeout_s);
    kernelbench::answer_record(
        answer,
        &ours,
        &kb,
        reference,
        ceilings,
        opts.eval.win_threshold,
    )
}

/// One line for each reference among `records` that failed its own check (a status other
/// than `correct`), naming its problem, status and the first line of its message.
pub fn reference_failures(records: &[Record]) -> Vec<String> {
    records
        .iter()
        .filter(|r| r.is_reference() && r.status != Status::Correct)
        .map(|r| {
            format!(
                "error: the reference of `{}` failed its own check ({}): {}",
                r.problem,
                r.status.name(),
                r.message.lines().next().unwrap_or("")
            )
        })
        .collect()
}

/// The exit status of `dlrm-bench run` (or `--resume`) over all of the run's records: a failure
/// when any reference failed its own check, each such reference named on stderr.
pub fn exit_code(records: &[Record]) -> ExitCode {
    let failures = reference_failures(records);
    for line in &failures {
        eprintln!("{line}");
    }
    if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Reads the `run.json` of the run in `dir` and rebuilds its options (changing nothing).
fn resumed(dir: &Path) -> anyhow::Result<(RunOptions, RunMeta)> {
    let meta = RunMeta::load(dir)?;
    let opts: RunOptions = serde_json::from_value(meta.options.clone().unwrap_or_default())
        .map_err(|e| anyhow::anyhow!("{}/run.json: field `options`: {e}", dir.display()))?;
    Ok((opts, meta))
}

/// The run's one probe of the device: what it is, whether it is a GPU, and why it was chosen.
/// Workers are told the choice ([`WorkerSpec::force_cpu`]) and open that backend themselves.
/// With several `devices` on a GPU, each must open and be of the first one's model (records
/// of one result set compare with each other).
fn probe_device(
    force_cpu: bool,
    require_gpu: bool,
    devices: &[usize],
) -> anyhow::Result<(DeviceInfo, bool, String)> {
    let (backend, why) = backend::select_device(force_cpu, require_gpu, devices[0])?;
    let (info, on_gpu) = (backend.info().clone(), backend.is_gpu());
    drop(backend);
    if on_gpu {
        for &d in &devices[1..] {
            let (other, _) = backend::select_device(false, true, d)
                .map_err(|e| anyhow::anyhow!("--devices: device {d}: {e:#}"))?;
            anyhow::ensure!(
                other.info().name == info.name,
                "--devices: device {d} is `{}` but device {} is `{}`: one result set holds \
                 one model of GPU (run a set per model)",
                other.info().name,
                devices[0],
                info.name
            );
        }
    }
    Ok((info, on_gpu, why))
}

/// The secret seed of the run being resumed in `dir` ([`run_dir::resume_secret`]); a shard
/// that ended has published none and kept none, so it takes the scheduler's (`given`) when
/// that matches the digest in its `run.json`.
fn resumed_secret(dir: &Path, run: &RunMeta, given: Option<u64>) -> anyhow::Result<(u64, bool)> {
    match (
        run_dir::resume_secret(dir, &run.secret_seed),
        given,
        &run.secret_seed_sha256,
    ) {
        (Ok(found), _, _) => Ok(found),
        (Err(_), Some(seed), Some(digest)) => {
            anyhow::ensure!(
                *digest == shard::secret_digest(seed),
                "{}/run.json: field `secret_seed_sha256`: the secret seed given is not this \
                 shard's",
                dir.display()
            );
            run_dir::store_secret(dir, seed)?;
            Ok((seed, false))
        }
        (Err(e), None, Some(_)) => Err(e.context(format!(
            "{}: a shard that ended keeps no secret seed: give the shards' with \
             --secret-seed-file or {}",
            dir.display(),
            shard::SECRET_ENV
        ))),
        (Err(e), _, _) => Err(e),
    }
}

fn select_problems(names: &[String]) -> anyhow::Result<Vec<&'static dyn Problem>> {
    if names.is_empty() {
        return Ok(all_problems());
    }
    names
        .iter()
        .map(|n| {
            bench_problems::find_problem(n)
                .ok_or_else(|| anyhow::anyhow!("unknown problem `{n}` (see `dlrm-bench list`)"))
        })
        .collect()
}

/// A running worker: its process, its parsed stdout, and the tail of its stderr.
struct Worker {
    child: Child,
    events: Receiver<Option<Event>>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    /// Open while the worker lives: it carries the go ([`WorkerSpec::wait_after_prepare`]),
    /// and its end tells the worker to stop.
    stdin: Option<std::process::ChildStdin>,
}

fn spawn_worker(exe: &Path, spec: &WorkerSpec) -> anyhow::Result<Worker> {
    let mut child = Command::new(exe)
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
            match serde_json::from_str::<Event>(&line) {
                Ok(e) => {
                    if tx.send(Some(e)).is_err() {
                        return;
                    }
                }
                Err(_) => eprintln!("worker: {line}"),
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

impl Worker {
    fn stderr_tail(&self) -> String {
        self.stderr_tail
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Lets a worker waiting after its preparation go on (closing its stdin).
    fn go(&mut self) {
        if let Some(stdin) = self.stdin.as_mut() {
            let _ = stdin.write_all(b"go\n").and_then(|_| stdin.flush());
        }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn base_spec(opts: &RunOptions, secret_seed: u64) -> WorkerSpec {
    WorkerSpec {
        ceilings_only: false,
        problem: String::new(),
        eval: opts.eval.clone(),
        secret_seed,
        candidates: Vec::new(),
        report_reference: false,
        force_cpu: opts.force_cpu,
        device: opts.devices.first().copied().unwrap_or(0),
        ceilings: None,
        input_cache: None,
        wait_after_prepare: false,
    }
}

fn measure_ceilings(exe: &Path, opts: &RunOptions, secret_seed: u64) -> anyhow::Result<Ceilings> {
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

/// What a worker was doing when its time ran out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stall {
    /// One execution of the candidate's plan on the device.
    Execution,
    /// The harness, between executions.
    Harness,
    /// Preparing the inputs and the reference.
    Prepare,
}

/// The evaluation of one problem's candidates across as many workers as faults require.
struct ProblemSession<'a> {
    problem: &'static dyn Problem,
    opts: &'a RunOptions,
    exe: &'a Path,
    secret_seed: u64,
    ceilings: Option<Ceilings>,
    peers: &'a mut Vec<PeerMedian>,
    log: &'a Mutex<RecordLog>,
    bar: &'a ProgressBar,
    reference_done: bool,
    /// Log the reference's record (the problem's first chunk); other chunks measure it on
    /// their device only to pair their candidates with.
    keeps_reference: bool,
    /// The device the session's workers run on (and its records say).
    device: usize,
    /// The reference's median time, once known (it bounds a candidate's execution time).
    reference_ms: Option<f64>,
    /// The run's input cache (its root directory).
    input_cache: PathBuf,
    /// Phases of work done for the problem but not yet in a record (a worker's preparation):
    /// added to the next record logged.
    carried: PhaseTimes,
    /// PyTorch's peer, to run once the first worker has stored the inputs (`run --torch`).
    peer: Option<PeerJob<'a>>,
}

/// The run's PyTorch peer server, where it reads the problem's inputs and writes its record.
struct PeerJob<'a> {
    server: &'a mut PeerServer,
    cache: InputCache,
    file: PathBuf,
}

impl ProblemSession<'_> {
    fn record(&mut self, mut r: Record, out: &mut Vec<Record>) -> anyhow::Result<()> {
        if !self.carried.is_empty() {
            r.phases
                .get_or_insert_with(PhaseTimes::default)
                .add(&std::mem::take(&mut self.carried));
        }
        r.device = Some(self.device);
        if r.is_reference() {
            attach_peer(&mut r, self.peers);
            self.reference_done = true;
            self.reference_ms = r.timing.as_ref().map(|t| t.median_ms);
            if !self.keeps_reference {
                // Its worker's preparation goes with the next record logged.
                if let Some(p) = r.phases.take() {
                    self.carried.add(&p);
                }
                return Ok(());
            }
        }
        append(self.log, &r)?;
        self.bar.inc(1);
        out.push(r);
        Ok(())
    }

    fn fail(
        &mut self,
        origin: &str,
        status: Status,
        message: String,
        out: &mut Vec<Record>,
    ) -> anyhow::Result<()> {
        let group = if origin == "reference" {
            "reference".to_string()
        } else {
            crate::candidate::candidate_group(Path::new(origin), self.problem.name())
        };
        let name = Path::new(origin)
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let name = if origin == "reference" {
            "reference".to_string()
        } else {
            name
        };
        let mut r = Record::new(self.problem.name(), &name, &group, origin);
        r.status = status;
        r.message = message;
        if origin != "reference" {
            if let Ok(c) = load_candidate(Path::new(origin)) {
                // The candidate's name and expected status, from its manifest.
                r.candidate = c.name.clone();
                r.expected_status = c.expect.clone();
            }
        }
        self.record(r, out)
    }

    /// Evaluates `pending` (candidate directories), restarting workers after faults.
    fn evaluate(&mut self, pending: &mut Vec<PathBuf>) -> anyhow::Result<Vec<Record>> {
        let mut out = Vec::new();
        if self.reference_done && pending.is_empty() {
            return Ok(out);
        }
        loop {
            let progress_before = pending.len();
            let attempt = self.attempt(pending, &mut out)?;
            if self.conclude(attempt, pending, progress_before, &mut out)? {
                return Ok(out);
            }
        }
    }

    /// One worker on `pending`: spawned, its events followed until it ends, stops reporting
    /// within its limit (then killed), or its channel closes.
    fn attempt(
        &mut self,
        pending: &mut Vec<PathBuf>,
        out: &mut Vec<Record>,
    ) -> anyhow::Result<Attempt> {
        self.bar.set_message(format!(
            "{}: generating inputs and checking the reference",
            self.problem.name()
        ));
        let spec = WorkerSpec {
            problem: self.problem.name().to_string(),
            candidates: pending.clone(),
            report_reference: !self.reference_done,
            ceilings: self.ceilings,
            input_cache: Some(self.input_cache.clone()),
            wait_after_prepare: self.peer.is_some(),
            device: self.device,
            ..base_spec(self.opts, self.secret_seed)
        };
        let mut worker = spawn_worker(self.exe, &spec)?;
        let mut w = Watch {
            current: None,
            phase: None,
            ready: false,
            reference_failed: false,
            device_lost: None,
            started: Instant::now(),
            running: None,
        };
        let outcome = loop {
            // While a candidate is current, the limit counts only its own device work (from
            // `Running` to `Done`); between executions the harness may take its time, and only a
            // silence of HARNESS_STALL_S is cut (and not charged to the candidate).
            let (limit, since, stall) = match (&w.current, w.running) {
                (Some(_), Some(t)) => (
                    execution_limit_s(self.opts.timeout_s, self.reference_ms),
                    t,
                    Stall::Execution,
                ),
                (Some((_, t)), None) => (HARNESS_STALL_S, *t, Stall::Harness),
                (None, _) => (
                    PREPARE_TIMEOUT_S.max(self.opts.timeout_s),
                    w.started,
                    Stall::Prepare,
                ),
            };
            let left = Duration::from_secs_f64(limit).saturating_sub(since.elapsed());
            let event = worker
                .events
                .recv_timeout(left.max(Duration::from_millis(1)));
            if let (Ok(Some(_)), Some((_, last))) = (&event, w.current.as_mut()) {
                *last = Instant::now();
            }
            match event {
                Ok(Some(event)) => self.on_event(event, &mut w, &mut worker, pending, out)?,
                Ok(None) => break None,
                Err(RecvTimeoutError::Timeout) => {
                    worker.kill();
                    break Some((limit, stall));
                }
                Err(RecvTimeoutError::Disconnected) => break None,
            }
        };
        Ok(Attempt {
            outcome,
            status: worker.child.wait().ok(),
            tail: worker.stderr_tail(),
            watch: w,
        })
    }

    /// What one event of the worker changes.
    fn on_event(
        &mut self,
        event: Event,
        w: &mut Watch,
        worker: &mut Worker,
        pending: &mut Vec<PathBuf>,
        out: &mut Vec<Record>,
    ) -> anyhow::Result<()> {
        match event {
            Event::Record { record } => {
                let record = *record;
                // Only what this worker was given, each once: the reference (when asked for)
                // and the candidates still pending.
                let expected = if record.is_reference() {
                    !self.reference_done && record.origin == "reference"
                } else {
                    pending
                        .iter()
                        .any(|p| p.display().to_string() == record.origin)
                };
                if !expected {
                    eprintln!(
                        "warning: {}: the worker reported a record of `{}`, which it was not given (or gave already): ignored",
                        self.problem.name(),
                        record.origin
                    );
                    return Ok(());
                }
                if record.is_reference() && record.status != Status::Correct {
                    w.reference_failed = true;
                }
                pending.retain(|p| p.display().to_string() != record.origin);
                w.current = None;
                w.running = None;
                w.phase = None;
                self.record(record, out)?;
            }
            Event::Start { candidate } => {
                self.bar
                    .set_message(format!("{}: {candidate}", self.problem.name()));
                w.current = Some((candidate, Instant::now()));
                w.phase = None;
            }
            Event::Phase { phase: p } => {
                let what = w.current.as_ref().map_or("reference", |(c, _)| c.as_str());
                self.bar
                    .set_message(format!("{}: {what}: {}", self.problem.name(), p.describe()));
                w.phase = Some(p.describe().to_string());
            }
            Event::Running => w.running = Some(Instant::now()),
            Event::Done => w.running = None,
            Event::Ready => w.ready = true,
            Event::Prepared { phases } => {
                self.carried.add(&phases);
                if let Some(job) = self.peer.take() {
                    self.bar
                        .set_message(format!("{}: PyTorch eager", self.problem.name()));
                    let opts = self.opts;
                    self.carried.add(&run_peer(
                        job.server,
                        &opts.eval,
                        self.problem,
                        &job.cache,
                        &job.file,
                        opts.torch_compile,
                    ));
                    *self.peers = load_peers(&peer_files(&opts.peer, &job.file));
                    w.started = Instant::now();
                }
                worker.go();
            }
            Event::DeviceLost { message } => w.device_lost = Some(message),
            Event::Ceilings { .. } => {}
        }
        Ok(())
    }

    /// Records what `attempt` left undone (a candidate that hung or killed its worker, a failed
    /// preparation, candidates a failed reference or a stopped worker leaves); true when
    /// nothing more is to be tried.
    fn conclude(
        &mut self,
        attempt: Attempt,
        pending: &mut Vec<PathBuf>,
        progress_before: usize,
        out: &mut Vec<Record>,
    ) -> anyhow::Result<bool> {
        let Attempt {
            outcome,
            status,
            tail,
            watch: w,
        } = attempt;
        let (current, phase, ready) = (w.current, w.phase, w.ready);
        let (reference_failed, device_lost) = (w.reference_failed, w.device_lost);
        match (outcome, current) {
            (Some((limit, Stall::Execution)), Some((cand, _))) => {
                pending.retain(|p| p.display().to_string() != cand);
                let msg = format!(
                    "one execution of its launch plan ran past {limit:.0} s on the device: the \
                 worker was killed (a hang or an endless kernel; the limit counts only the \
                 candidate's own device work)"
                );
                self.fail(&cand, Status::Timeout, msg, out)?;
            }
            (Some((limit, _)), Some((cand, _))) => {
                pending.retain(|p| p.display().to_string() != cand);
                let msg = format!(
                    "the harness made no progress for {limit:.0} s while evaluating this \
                 candidate (outside its device work): the worker was killed"
                );
                self.fail(&cand, Status::RuntimeError, msg, out)?;
            }
            (None, Some((cand, _))) => {
                pending.retain(|p| p.display().to_string() != cand);
                let what = format!("candidate {cand} of {}", self.problem.name());
                let msg = death_message(&what, phase.as_deref(), status, &tail);
                self.fail(&cand, Status::RuntimeError, msg, out)?;
            }
            (outcome, None) if !ready => {
                // Preparation (inputs, oracle, reference) failed or hung: nothing can be compared.
                let why = match outcome {
                    Some((limit, _)) => {
                        format!("preparing the inputs and the reference took over {limit:.0} s")
                    }
                    None => format!(
                        "the worker failed while preparing the inputs and the reference: {}",
                        death_message(
                            &format!("the reference of {}", self.problem.name()),
                            phase.as_deref(),
                            status,
                            &tail
                        )
                    ),
                };
                if !self.reference_done {
                    self.fail("reference", Status::RuntimeError, why.clone(), out)?;
                }
                for p in std::mem::take(pending) {
                    self.fail(
                        &p.display().to_string(),
                        Status::Skipped,
                        format!("not run: {why}"),
                        out,
                    )?;
                }
                return Ok(true);
            }
            _ => {}
        }
        if reference_failed {
            for p in std::mem::take(pending) {
                let msg = "not run: the reference failed its own check on this device".to_string();
                self.fail(&p.display().to_string(), Status::Skipped, msg, out)?;
            }
        }
        if pending.is_empty() {
            return Ok(true);
        }
        if let Some(m) = device_lost {
            eprintln!(
                "device lost ({m}); starting a fresh worker for the {} candidates left",
                pending.len()
            );
        }
        if pending.len() == progress_before {
            // No progress and no candidate to blame: do not loop forever.
            for p in std::mem::take(pending) {
                let msg = format!("not run: the worker stopped without a result:\n{tail}");
                self.fail(&p.display().to_string(), Status::RuntimeError, msg, out)?;
            }
            return Ok(true);
        }
        Ok(false)
    }
}

/// What the runner follows of a worker while it runs.
struct Watch {
    /// The candidate being evaluated and when the worker last reported on it.
    current: Option<(String, Instant)>,
    /// The harness's last phase (for the message of a worker that dies).
    phase: Option<String>,
    ready: bool,
    reference_failed: bool,
    device_lost: Option<String>,
    started: Instant,
    /// Since when the current candidate's own device work runs.
    running: Option<Instant>,
}

/// How one worker ended: killed at a limit (`outcome`), or not; its exit status and stderr.
struct Attempt {
    outcome: Option<(f64, Stall)>,
    status: Option<std::process::ExitStatus>,
    tail: String,
    watch: Watch,
}

fn heading(run_id: &str, info: &DeviceInfo, on_gpu: bool, c: Option<Ceilings>) -> String {
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

/// Loads every candidate under the roots; invalid manifests are returned separately.
pub fn load_all(roots: &[PathBuf]) -> (Vec<Candidate>, Vec<crate::candidate::CandidateError>) {
    let mut ok = Vec::new();
    let mut bad = Vec::new();
    for (_, loaded) in crate::candidate::set::load_unique(&discover_all(roots)) {
        match loaded {
            Ok(c) => ok.push(c),
            Err(e) => bad.push(e),
        }
    }
    (ok, bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(problem: &str, group: &str, status: Status, message: &str) -> Record {
        let mut r = Record::new(problem, "x", group, "origin");
        r.status = status;
        r.message = message.into();
        r
    }

    #[test]
    fn only_a_failed_reference_fails_the_run() {
        let passed = [
            rec("embedding_bag_sum", "reference", Status::Correct, ""),
            rec("embedding_bag_sum", "examples", Status::Incorrect, "wrong"),
            rec("kjt_permute", "examples", Status::Timeout, "hung"),
            rec("-", "invalid", Status::InvalidManifest, "bad toml"),
        ];
        assert!(reference_failures(&passed).is_empty());
        assert_eq!(exit_code(&passed), ExitCode::SUCCESS);
        let mut failed = passed.to_vec();
        failed.push(rec(
            "kjt_permute",
            "reference",
            Status::RuntimeError,
            "the worker failed while preparing the inputs and the reference:\nError: ...",
        ));
        failed.push(rec("fm_interaction", "reference", Status::Skipped, ""));
        assert_eq!(
            reference_failures(&failed),
            [
                "error: the reference of `kjt_permute` failed its own check (runtime_error): \
                 the worker failed while preparing the inputs and the reference:",
                "error: the reference of `fm_interaction` failed its own check (skipped): ",
            ]
        );
        assert_eq!(exit_code(&failed), ExitCode::FAILURE);
    }
}

#[cfg(test)]
mod limit_tests {
    use super::*;

    #[test]
    fn the_phase_table_sums_phases_per_problem_and_in_all() {
        use crate::runner::activity::{Phase, PhaseTimes};
        let mut a = Record::new("p", "reference", "reference", "reference");
        a.phases = Some(PhaseTimes(
            [(Phase::Generate, 2.0), (Phase::Check, 1.0)].into(),
        ));
        let mut b = Record::new("p", "c", "examples", "c");
        b.phases = Some(PhaseTimes([(Phase::Check, 0.5)].into()));
        let t = phase_table(&[a, b, Record::new("q", "c", "g", "o")]);
        assert_eq!(t["problems"]["p"]["check"], 1.5);
        assert_eq!(t["all"]["generate"], 2.0);
        assert_eq!(t["all_s"], 3.5);
        assert!(t["problems"].get("q").is_none());
    }

    #[test]
    fn the_execution_limit_is_the_timeout_capped_by_a_multiple_of_the_reference() {
        assert_eq!(execution_limit_s(180.0, None), 180.0);
        // 1.8 ms reference: 1000× is 1.8 s, raised to the 10 s floor.
        assert_eq!(execution_limit_s(180.0, Some(1.8)), 10.0);
        // 50 ms: 50 s, under the timeout.
        assert_eq!(execution_limit_s(180.0, Some(50.0)), 50.0);
        // A timeout below the floor stands.
        assert_eq!(execution_limit_s(3.0, Some(1.8)), 3.0);
        assert_eq!(execution_limit_s(180.0, Some(0.0)), 180.0);
    }
}
