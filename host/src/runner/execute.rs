//! The run's work: each problem's session in turn, then the KernelBench answers, records appended as they arrive.
use super::prepare::record_shard;
use super::prepare::refused_items;
use super::prepare::torch_peer;
use super::prepare::Prepared;
use super::unit::UnitContext;
use super::units::device_cache;
use super::{load_all, shard, units, Executed};
use crate::candidate::Candidate;
use crate::kernelbench;
use crate::kernelbench::builds::{AheadBuilds, Build};
use crate::results::record::Ceilings;
use crate::results::record::Record;
use crate::results::record::RecordLog;
use crate::results::record::Status;
use crate::results::RunMeta;
use crate::runner::peer::load_peers;
use crate::runner::peer::peer_files;
use crate::runner::peer::PeerMedian;
use crate::runner::peer::PeerServer;
use crate::runner::shard::Shard;
use bench_problems::Problem;
use indicatif::ProgressStyle;
use indicatif::{MultiProgress, ProgressBar};
use serde_json::json;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Records the candidates and answers that cannot run, then runs every unit of this shard's
/// work (each problem's reference, candidates and answers, in workers) with PyTorch's peer when
/// asked for; every record is appended to `results.jsonl` as it comes.
pub(crate) fn execute(
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
    let all_items = run_items(problems, &candidates, answers, &refused);
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
    let mut peer_server = crate::runner::peer::torch_server();
    if torch {
        meta.peer_files = peer_files(&opts.peer, &peer_file);
        meta.write(dir)?;
    }
    let units = units::plan(problems, &candidates, answers, &owns, &opts.devices);
    let touched: BTreeSet<&str> = units.iter().map(|u| u.problem.name()).collect();
    let total = steps(&units);
    let to_build = answers_to_build(p, &units, torch);
    let builds = AheadBuilds::new(&to_build);
    let bars = MultiProgress::new();
    let bar = bars.add(progress_bar(total, "{bar:30} {pos}/{len} ETA {eta} {msg}"));
    let log = Mutex::new(log);
    let sandbox_hide = sandbox_hide(p);
    let ahead_totals = Mutex::new(super::ahead::AheadTotals::default());
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
        builds: &builds,
        sandbox_hide: &sandbox_hide,
        prepare_ahead: super::ahead::enabled(on_gpu, opts.devices.len()),
        ahead_totals: &ahead_totals,
    };
    let helpers = Overlapped {
        to_build: &to_build,
        builds: &builds,
        bars: &bars,
    };
    let ran = helpers.run(
        p,
        &ctx,
        &units,
        (&mut peers, &mut peer_server),
        &mut sessions,
        setup,
    );
    let (records, in_sessions) = ran?;
    fresh.extend(records);
    peer_server.shutdown();
    if !opts.keep_inputs {
        remove_input_caches(&opts.devices, cache_root);
    }
    bar.finish_and_clear();

    Ok(Executed {
        records: log
            .into_inner()
            .expect("no worker thread panics")
            .into_records(),
        fresh: fresh.len(),
        touched: touched.len(),
        sessions,
        in_sessions,
    })
}

/// The records `units` owe: the progress bar's length.
fn steps(units: &[super::unit::Unit]) -> usize {
    units
        .iter()
        .map(|u| usize::from(u.keeps_reference) + u.candidates.len() + u.answers.len())
        .sum()
}

/// A progress bar of `len` steps drawn as `template`.
fn progress_bar(len: usize, template: &str) -> ProgressBar {
    let bar = ProgressBar::new(len as u64);
    bar.set_style(ProgressStyle::with_template(template).unwrap());
    bar
}

/// Removes the (emptied) input caches of `devices` and their root.
fn remove_input_caches(devices: &[usize], cache_root: &Path) {
    let _ = std::fs::remove_dir_all(cache_root.join(super::prebuild::PTX_DIR));
    let oracles = crate::evaluate::ORACLES_DIR;
    for &d in devices {
        let _ = std::fs::remove_dir(cache_root.join(device_cache(d)).join(oracles));
        let _ = std::fs::remove_dir(cache_root.join(device_cache(d)));
    }
    let _ = std::fs::remove_dir(cache_root.join(oracles));
    let _ = std::fs::remove_dir(cache_root);
}

/// What untrusted Python run for this run (a Triton candidate's compile, a KernelBench
/// answer's build) must not see: the run's input cache (sets and oracles), its results
/// directory (the secret seed's file among them) and a `--secret-seed-file`.
fn sandbox_hide(p: &Prepared) -> Vec<PathBuf> {
    [Some(p.cache_root.clone()), Some(p.dir.clone())]
        .into_iter()
        .chain([p.opts.secret_seed_file.clone()])
        .flatten()
        .collect()
}

/// This shard's KernelBench answers that will run and need their `load_inline` builds; none
/// without PyTorch or a sandbox to build in.
fn answers_to_build<'a>(
    p: &'a Prepared,
    units: &[super::unit::Unit<'a>],
    torch: bool,
) -> Vec<&'a kernelbench::Answer> {
    if !torch || super::answers::sandbox_refusal(p.opts.unsandboxed).is_some() {
        return Vec::new();
    }
    units
        .iter()
        .flat_map(|u| u.answers.iter().copied())
        .filter(|a| !p.done.contains(&(a.problem.to_string(), a.origin())))
        .collect()
}

/// Builds `answers` into `into`, as many at a time as half the cores
/// ([`kernelbench::builds`]), on a thread of its own while the run measures (so the builds'
/// wall time is not a phase: an answer's wait for its build is, `answer_build`). Returns
/// what `run.json`'s setup says of them.
fn build_answers(
    p: &Prepared,
    answers: &[&kernelbench::Answer],
    into: &AheadBuilds,
    bars: &MultiProgress,
) -> serde_json::Value {
    // However this ends (a panic included), no evaluation waits for a build never made.
    let _finish = into.finisher();
    let clock = std::time::Instant::now();
    let (major, minor) = p.info.compute_capability.unwrap_or((9, 0));
    // Where the sandbox's uids can reach it (not under a private home).
    let cache = crate::toolchain::sandbox::shared_dir(kernelbench::builds::CACHE_DIR)
        .unwrap_or_else(|_| p.dir.join(kernelbench::builds::CACHE_DIR));
    // Half the cores, at the lowest priority (builds.rs): the measurements keep the rest.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let jobs = build_jobs(std::env::var(BUILD_JOBS_ENV).ok().as_deref(), cores);
    let settings = kernelbench::builds::BuildSettings {
        script: Path::new(kernelbench::KERNELBENCH_EVAL),
        cache: &cache,
        arch: format!("{major}.{minor}"),
        sandbox: &super::answers::answer_sandbox().hiding(
            sandbox_hide(p)
                .into_iter()
                .chain([PathBuf::from("/dev/shm")]),
        ),
        limit_s: p.opts.answer_timeout_s,
        jobs,
    };
    let bar = bars.add(progress_bar(
        answers.len(),
        "{bar:30} {pos}/{len} answers built ahead, ETA {eta}",
    ));
    kernelbench::builds::build_all(answers, &settings, into, &|| bar.inc(1));
    bar.finish_and_clear();
    let secs = clock.elapsed().as_secs_f64();
    let made = into.snapshot();
    let failed = made
        .values()
        .filter(|b| matches!(b, Build::CompileError(_)))
        .count();
    let _ = bars.println(format!(
        "built {} of {} KernelBench answers ahead in {secs:.1} s, beside the measurements ({jobs} \
         at a time; {failed} rejected by the compiler; cache {})",
        made.len(),
        answers.len(),
        cache.display()
    ));
    serde_json::json!({"wall_s": secs, "answers": answers.len(), "built": made.len(),
                       "compile_errors": failed, "jobs": jobs})
}

/// The variable that sets how many answers are built at a time (default half the cores).
pub(crate) const BUILD_JOBS_ENV: &str = "DLRM_BENCH_BUILD_JOBS";

/// Builds at a time: `DLRM_BENCH_BUILD_JOBS` when it is a whole number from 1 to 4x the cores
/// (else, with a warning, the default), otherwise half the `cores`.
fn build_jobs(setting: Option<&str>, cores: usize) -> usize {
    let default = (cores / 2).max(1);
    match setting.map(|v| v.trim().parse::<usize>()) {
        None => default,
        Some(Ok(n)) if (1..=4 * cores).contains(&n) => n,
        Some(_) => {
            eprintln!(
                "warning: {BUILD_JOBS_ENV}={} is not a number of builds from 1 to {}; building \
                 {default} at a time",
                setting.unwrap_or_default(),
                4 * cores
            );
            default
        }
    }
}

/// Every item of the run, in shard order: each problem once, however many shapes it is run at
/// (a shard owns an item at every shape), with its candidates and answers, then the refused.
fn run_items(
    problems: &[&'static dyn Problem],
    candidates: &[Candidate],
    answers: &[kernelbench::Answer],
    refused: &[(String, String, &'static str, String)],
) -> Vec<shard::Item> {
    let mut names: Vec<&str> = Vec::new();
    for p in problems {
        if !names.contains(&p.name()) {
            names.push(p.name());
        }
    }
    shard::items(
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
    )
}

/// The work that runs beside the units, on the host: KernelBench answers' builds and native
/// candidates' NVRTC builds ([`super::prebuild`], on a GPU).
struct Overlapped<'a> {
    to_build: &'a [&'a kernelbench::Answer],
    builds: &'a AheadBuilds,
    bars: &'a MultiProgress,
}

impl Overlapped<'_> {
    /// Runs `units` with the helpers beside them; what each took goes into `setup` (as objects:
    /// they overlap the sessions, so they are not setup time).
    fn run(
        &self,
        p: &Prepared,
        ctx: &UnitContext,
        units: &[super::unit::Unit],
        (peers, peer_server): (&mut Vec<PeerMedian>, &mut PeerServer),
        sessions: &mut serde_json::Map<String, serde_json::Value>,
        setup: &mut serde_json::Map<String, serde_json::Value>,
    ) -> anyhow::Result<(Vec<Record>, f64)> {
        let ptx_dir = p.cache_root.join(super::prebuild::PTX_DIR);
        let stop = AtomicBool::new(false);
        let (ran, built, prebuilt) = std::thread::scope(|scope| {
            let building = (!self.to_build.is_empty())
                .then(|| scope.spawn(|| build_answers(p, self.to_build, self.builds, self.bars)));
            let cands: Vec<&Candidate> = units.iter().flat_map(|u| u.candidates.clone()).collect();
            let (cc, ptx, stop) = (p.info.compute_capability, &ptx_dir, &stop);
            let prebuilding = p
                .on_gpu
                .then(|| scope.spawn(move || super::prebuild::prebuild(&cands, cc, ptx, stop)));
            let ran = ctx.run_all(units, peers, peer_server, sessions);
            // Builds not started by now are for answers the run no longer reaches.
            self.builds.cancel();
            stop.store(true, Ordering::Relaxed);
            let prebuilt = prebuilding.and_then(|h| h.join().ok().flatten());
            (ran, building.map(|h| h.join()), prebuilt)
        });
        if let Some(Ok(summary)) = built {
            setup.insert("answer_builds_overlapped".into(), summary);
        }
        if let Some(s) = prebuilt {
            setup.insert("native_builds_overlapped".into(), json!({ "seconds": s }));
        }
        let ahead = ctx.ahead_totals.lock().unwrap_or_else(|e| e.into_inner());
        if ahead.units > 0 {
            setup.insert(
                "inputs_prepared_ahead".into(),
                json!({
                    "units": ahead.units,
                    "seconds": ahead.seconds,
                    "most_at_once": ahead.most_at_once,
                }),
            );
        }
        ran
    }
}

#[cfg(test)]
mod tests {
    use super::build_jobs;

    #[test]
    fn builds_at_a_time_are_half_the_cores_unless_a_sane_number_is_asked_for() {
        assert_eq!(build_jobs(None, 16), 8);
        assert_eq!(build_jobs(None, 1), 1);
        assert_eq!(build_jobs(Some("16"), 16), 16);
        assert_eq!(build_jobs(Some(" 3 "), 16), 3);
        for bad in ["0", "65", "-2", "many", ""] {
            assert_eq!(build_jobs(Some(bad), 16), 8, "{bad}");
        }
    }
}
