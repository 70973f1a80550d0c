//! Before any candidate runs: the options resolved (or a resumed run's read back), the device probed, the result directory opened, the shard's items, the PyTorch peer, the ceilings and the first `run.json`.
use super::options::RunOptions;
use super::spawn::measure_ceilings;
use super::{default_input_cache, shard, EMULATOR_BANNER};
use crate::backend;
use crate::backend::DeviceInfo;
use crate::kernelbench;
use crate::report::projection::Workload;
use crate::results;
use crate::results::record::Ceilings;
use crate::results::record::Record;
use crate::results::record::RecordLog;
use crate::results::record::GIT_COMMIT;
use crate::results::run_dir;
use crate::results::run_dir::SECRET_HIDDEN;
use crate::results::RunMeta;
use crate::results::SecretSeed;
use crate::results::ShardMeta;
use crate::runner::peer::torch_available;
use bench_problems::all_problems;
use bench_problems::Preset;
use bench_problems::Problem;
use serde_json::json;
use std::collections::BTreeSet;
use std::path::Path;
use std::path::PathBuf;
use std::time::Instant;

/// A run made ready: its options as they will be recorded, the device, the work, its
/// directory and secret seed, and what an earlier attempt of it recorded.
pub(crate) struct Prepared {
    pub(super) opts: RunOptions,
    pub(super) info: DeviceInfo,
    pub(super) on_gpu: bool,
    pub(super) why: String,
    pub(super) preset: Preset,
    pub(super) answers: Vec<kernelbench::Answer>,
    pub(super) bad_answers: Vec<(PathBuf, String)>,
    pub(super) problems: Vec<&'static dyn Problem>,
    pub(super) workload: Option<Workload>,
    pub(super) started: chrono::DateTime<chrono::Utc>,
    pub(super) dir: PathBuf,
    pub(super) run_id: String,
    pub(super) secret_seed: u64,
    pub(super) published: bool,
    pub(super) cache_root: PathBuf,
    pub(super) previous: Vec<Record>,
    pub(super) done: BTreeSet<(String, String)>,
    /// The earlier attempts at this run (a resume's), as `run.json` keeps them.
    pub(super) earlier_attempts: Vec<serde_json::Value>,
    /// Held until the run ends: no other run appends to this result set meanwhile.
    pub(super) _lock: run_dir::RunLock,
}

/// Resolves the options (a resume's from its `run.json`), probes the device, selects the
/// problems and answers, and opens the run's directory (a new one, or the resumed one with its
/// secret seed and records); the record log opened for appending.
pub(crate) fn prepare(
    opts: RunOptions,
    resume: Option<&Path>,
) -> anyhow::Result<(Prepared, RecordLog)> {
    let (wide, given_secret) = (opts.wide, opts.given_secret);
    // A resume holds its result set from the start (once it is known to be one); a new run
    // once its directory is made.
    let mut early_lock = None;
    let (mut opts, original) = match resume {
        Some(dir) => {
            let (opts, run) = resumed(dir)?;
            early_lock = Some(run_dir::lock(dir)?);
            (opts, Some((dir, run)))
        }
        None => (opts, None),
    };
    opts.wide = wide;
    resolve_devices(&mut opts)?;
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
    // Recorded absolute, as the candidate roots are: a resume from another directory finds
    // them.
    opts.kernelbench = (opts.kernelbench.iter())
        .map(|d| std::path::absolute(d).unwrap_or_else(|_| d.clone()))
        .collect();
    let (answers, bad_answers) = kernelbench::discover(&opts.kernelbench);
    problems_of_answers(&mut opts, &answers, &bad_answers)?;
    let problems =
        super::shapes::at_shapes(&select_problems(&opts.problems)?, preset, &opts.shapes)?;
    // A bad profile or a missing candidate directory is an error before anything is measured
    // or written; the roots are recorded absolute, so a resume from elsewhere finds them.
    let workload = opts.workload.as_deref().map(Workload::load).transpose()?;
    opts.candidate_roots = crate::candidate::check_roots(&opts.candidate_roots)?;
    // A yardstick asked for and missing is an error, not a warning and a table without it.
    for f in &opts.peer {
        std::fs::File::open(f).map_err(|e| {
            anyhow::anyhow!("--peer {}: cannot read the peer file: {e}", f.display())
        })?;
    }

    let started = chrono::Utc::now();
    let (dir, secret_seed, published) = open_run_dir(
        &opts,
        original.as_ref(),
        given_secret,
        on_gpu,
        preset,
        &started,
    )?;
    opts.eval.secret_seed = secret_seed; // a resumed config has none (run.json never keeps it)
    let earlier_attempts = original
        .as_ref()
        .map(|(_, run)| earlier_attempts(run))
        .unwrap_or_default();
    let lock = match early_lock {
        Some(l) => l,
        None => run_dir::lock(&dir)?,
    };
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
    let previous = log.records().to_vec();
    let done: BTreeSet<(String, String)> = previous
        .iter()
        .map(|r| (r.unit_key(), r.origin.clone()))
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
            earlier_attempts,
            _lock: lock,
        },
        log,
    ))
}

/// `--all-devices` as the devices found, none given as device 0; `--torch` needs one device.
fn resolve_devices(opts: &mut RunOptions) -> anyhow::Result<()> {
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
    Ok(())
}

/// The attempts a resumed run's `run.json` records (one for a set older than the list: its
/// start, and its wall time if it ended).
fn earlier_attempts(run: &RunMeta) -> Vec<serde_json::Value> {
    if !run.attempts.is_empty() {
        return run.attempts.clone();
    }
    vec![json!({"started": run.started, "wall_s": run.wall_s})]
}

/// `kernelbench DIR...` without --problem: the problems the answers are for.
fn problems_of_answers(
    opts: &mut RunOptions,
    answers: &[kernelbench::Answer],
    bad: &[(PathBuf, String)],
) -> anyhow::Result<()> {
    if opts.problems.is_empty() && !opts.kernelbench.is_empty() {
        opts.problems = bench_problems::all_problems()
            .iter()
            .filter(|p| answers.iter().any(|a| a.problem == p.name()))
            .map(|p| p.name().to_string())
            .collect();
        if opts.problems.is_empty() {
            let dirs: Vec<String> = opts
                .kernelbench
                .iter()
                .map(|d| d.display().to_string())
                .collect();
            let why: String = bad.iter().map(|(_, why)| format!("\n  {why}")).collect();
            anyhow::bail!("no KernelBench answers in {}{why}", dirs.join(", "));
        }
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
pub(crate) fn refused_items(
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
pub(crate) fn record_shard(
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
pub(crate) fn torch_peer(
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
pub(crate) fn measure_run_ceilings(p: &Prepared, exe: &Path) -> anyhow::Result<Option<Ceilings>> {
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
        for g in c.gathers.iter().flatten() {
            eprintln!(
                "ceilings: random {} B rows: gathers from HBM {:.0} GB/s, from L2 {:.0} GB/s; \
                 atomic adds {:.0} GB/s",
                g.row_bytes,
                g.hbm_bytes_per_s / 1e9,
                g.l2_bytes_per_s / 1e9,
                g.atomic_bytes_per_s / 1e9
            );
        }
        Some(c)
    } else {
        None
    })
}

/// `run.json` as the run starts (or resumes).
pub(crate) fn initial_meta(p: &Prepared, ceilings: Option<Ceilings>) -> anyhow::Result<RunMeta> {
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
        earlier_attempts,
        ..
    } = p;
    let (on_gpu, preset, secret_seed, published) = (*on_gpu, *preset, *secret_seed, *published);
    Ok(RunMeta {
        format: results::meta::FORMAT,
        run_id: run_id.clone(),
        // The run's start: its first attempt's.
        started: earlier_attempts
            .first()
            .and_then(|a| a["started"].as_str())
            .map_or_else(|| started.to_rfc3339(), str::to_string),
        finished: None,
        command: opts.command_line.clone(),
        git_commit: GIT_COMMIT.into(),
        binary_sha256: run_dir::binary_sha256(),
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
            .map(|p| json!({"name": p.name(), "number": p.number(), "shape": p.shape_name(), "sizes": p.sizes(preset), "recipe": p.recipe(preset)}))
            .collect(),
        shard: None,
        secret_seed_sha256: None,
        metrics: None,
        input_stats: None,
        wall_s: None,
        attempts: earlier_attempts.clone(),
        phases: None,
        projection: None,
        complete: None,
        merged_shards: None,
        extra: Default::default(),
    })
}

/// Reads the `run.json` of the run in `dir` and rebuilds its options (changing nothing).
fn resumed(dir: &Path) -> anyhow::Result<(RunOptions, RunMeta)> {
    let meta = RunMeta::load(dir)?;
    let opts: RunOptions = serde_json::from_value(meta.options.clone().unwrap_or_default())
        .map_err(|e| anyhow::anyhow!("{}/run.json: field `options`: {e}", dir.display()))?;
    opts.check_bounds()
        .map_err(|e| anyhow::anyhow!("{}/run.json: options: {e}", dir.display()))?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evaluate::EvalConfig;

    fn emulator_options(out: &Path, secret_seed: u64) -> RunOptions {
        let mut eval = EvalConfig::quick_ci(2026, secret_seed);
        eval.preset = Preset::Ci;
        let mut opts: RunOptions = serde_json::from_value(serde_json::json!({
            "problems": ["fm_interaction"], "candidate_roots": [], "preset": "ci",
            "force_cpu": true, "require_gpu": false, "out": out, "peer": [], "eval": eval,
            "timeout_s": 20.0, "command_line": "dlrm-bench run --cpu",
        }))
        .unwrap();
        // Never serialised, as in run.json.
        opts.eval.secret_seed = secret_seed;
        opts
    }

    /// A resumed run names its input files from the run's secret seed, not from its resumed
    /// config's (which `run.json` never carries): the peer and the KernelBench answers look
    /// for the files its workers make.
    #[test]
    fn a_resumed_run_checks_with_the_secret_seed_it_started_with() {
        let out = std::env::temp_dir().join(format!("dlrm-resume-seed-{}", std::process::id()));
        let (first, _log) = prepare(emulator_options(&out, 4_242_424_242), None).unwrap();
        assert_eq!(first.opts.eval.secret_seed, 4_242_424_242);
        initial_meta(&first, None)
            .unwrap()
            .write(&first.dir)
            .unwrap();
        let dir = first.dir.clone();
        drop(first);
        // What the command line would give a resume (its own fresh seed) is not what counts.
        let (resumed, _log) = prepare(emulator_options(&out, 1), Some(&dir)).unwrap();
        assert_eq!(resumed.secret_seed, 4_242_424_242);
        assert_eq!(resumed.opts.eval.secret_seed, 4_242_424_242);
        std::fs::remove_dir_all(&out).ok();
    }
}
