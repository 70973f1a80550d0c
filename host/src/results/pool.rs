//! Several result sets read as one body of records (`report`, `project`, the HTML page): each
//! problem from the last set that measured it, the shards of one run together as their merge
//! would hold them, and the sets whose timings come from the CPU emulator told apart.
use super::RunMeta;
use crate::results::record::{read_records, Record};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The records of several result sets (directories or `results.jsonl` files), pooled by
/// problem: each problem's native records (reference, candidates) all come from the last run
/// given that measured candidates of it (or, when none did, from the last that measured it), so
/// a candidate's time and the reference's and PyTorch's it is compared with are from one run.
/// KernelBench answers (origin `kernelbench:…`) carry their own comparisons: each (problem,
/// group) of them comes from the last run that has it, beside the native records. Ordered by
/// problem number, then as recorded.
///
/// The shards of one run (`run --shard i/n`, told apart by their `run.json`) are one run here,
/// in the place of the last of them given: their records are those their merge
/// (`report --merge`) holds, every shard's candidates and each problem's reference from the
/// lowest shard index that has one (each candidate keeps the pairing with its own shard's
/// reference it was measured with). A shard given twice counts once (the later path); missing
/// shards are simply not there (only `--merge` insists on the whole run).
///
/// Sets of different backends, devices or presets are refused ([`mixing`]) unless
/// `allow_mixed`; then each record's group names where it came from (`group @ device/preset`).
pub fn pool_runs(paths: &[PathBuf], allow_mixed: bool) -> anyhow::Result<Vec<Record>> {
    Ok(Pooled::read(paths, allow_mixed)?.records)
}

/// Where a set's timings come from: `NVIDIA H200/full`, `CPU emulator/ci`.
fn where_from(run: &RunMeta) -> String {
    let device = if run.timings_are_gpu_timings {
        run.device.name.clone()
    } else {
        "CPU emulator".to_string()
    };
    format!("{device}/{}", run.config["preset"].as_str().unwrap_or("?"))
}

/// Why the sets cannot be pooled as they are: they come from more than one backend, device or
/// preset (timings of an emulator, or of `small` sizes, would count beside an H200's at
/// `full`). `None` when they agree (sets without a `run.json` are not counted).
pub fn mixing(sets: &[(PathBuf, Option<RunMeta>)]) -> Option<String> {
    let mut seen: Vec<(String, &Path)> = Vec::new();
    for (path, run) in sets {
        if let Some(run) = run {
            let from = where_from(run);
            if !seen.iter().any(|(f, _)| *f == from) {
                seen.push((from, path));
            }
        }
    }
    (seen.len() > 1).then(|| {
        let list: Vec<String> = seen
            .iter()
            .map(|(f, p)| format!("{} ({f})", p.display()))
            .collect();
        format!(
            "the result sets come from different backends, devices or presets: {}; their \
             timings do not compare. Report them apart, or give --allow-mixed to pool them \
             anyway (each row then names where it came from)",
            list.join(", ")
        )
    })
}

/// Result sets read once: each path with its `run.json` (when readable), and their records
/// pooled ([`pool_runs`]).
pub struct Pooled {
    pub sets: Vec<(PathBuf, Option<RunMeta>)>,
    /// One record per (problem, candidate) over its shapes
    /// ([`crate::report::shapes::by_problem`]).
    pub records: Vec<Record>,
    /// The records as measured: one per (problem, shape, candidate).
    pub shaped: Vec<Record>,
}

impl Pooled {
    /// Reads the sets at `paths` (directories or their `results.jsonl`) and pools them
    /// ([`pool_runs`]; sets of different origins only with `allow_mixed`).
    pub fn read(paths: &[PathBuf], allow_mixed: bool) -> anyhow::Result<Pooled> {
        let sets: Vec<(PathBuf, Option<RunMeta>)> = paths
            .iter()
            .map(|p| (p.clone(), RunMeta::beside(p)))
            .collect();
        let mixed = mixing(&sets);
        if let (Some(why), false) = (&mixed, allow_mixed) {
            anyhow::bail!("{why}");
        }
        let shaped = pool_sets(&sets, mixed.is_some())?;
        // The strictest of the sets' win thresholds decides the wins over all shapes.
        let threshold = sets
            .iter()
            .filter_map(|(_, run)| run.as_ref()?.config["win_threshold"].as_f64())
            .fold(1.0, f64::max);
        let records = crate::report::shapes::by_problem(&shaped, threshold);
        Ok(Pooled {
            sets,
            records,
            shaped,
        })
    }

    /// The paths given.
    pub(crate) fn paths(&self) -> Vec<PathBuf> {
        self.sets.iter().map(|(p, _)| p.clone()).collect()
    }

    /// The number of problems the pooled records cover.
    pub(crate) fn problem_count(&self) -> usize {
        let mut problems: Vec<&str> = self.records.iter().map(|r| r.problem.as_str()).collect();
        problems.dedup();
        problems.len()
    }

    /// Warns on stderr about each set that ran on the CPU emulator ([`warn_emulator_sets`]).
    pub(crate) fn warn_emulator(&self) {
        for (path, run) in &self.sets {
            if run.as_ref().is_some_and(|r| !r.timings_are_gpu_timings) {
                warn_emulator(path);
            }
        }
    }
}

/// The first record that repeats an earlier one's problem and origin: (the earlier's number,
/// its own, counted from 1 in file order) and the record.
pub(crate) fn first_duplicate(records: &[Record]) -> Option<(usize, usize, &Record)> {
    let mut seen = std::collections::BTreeMap::new();
    for (i, r) in records.iter().enumerate() {
        if let Some(first) = seen.insert((r.unit_key(), &r.origin), i) {
            return Some((first + 1, i + 1, r));
        }
    }
    None
}

/// [`pool_runs`] of sets already read.
fn pool_sets(sets: &[(PathBuf, Option<RunMeta>)], label: bool) -> anyhow::Result<Vec<Record>> {
    let answer = |r: &Record| r.origin.starts_with(crate::kernelbench::ORIGIN_PREFIX);
    // The result sets as runs: a plain set alone, the shards of one run together (by index).
    type Shards = Vec<(usize, PathBuf, Vec<Record>)>;
    // (the run's identity, its shard count, the shards read of it)
    let mut runs: Vec<(Option<serde_json::Value>, usize, Shards)> = Vec::new();
    for (path, meta) in sets {
        let dir = super::set_dir(path);
        let file = if path.is_dir() {
            path.join("results.jsonl")
        } else {
            path.clone()
        };
        anyhow::ensure!(file.is_file(), "{}: no such results file", file.display());
        let mut found = read_records(&file);
        anyhow::ensure!(!found.is_empty(), "{}: no records", file.display());
        if let (true, Some(run)) = (label, meta) {
            let from = where_from(run);
            for r in &mut found {
                r.group = format!("{} @ {from}", r.group);
            }
        }
        if let Some((first, second, r)) = first_duplicate(&found) {
            anyhow::bail!(
                "{}: records {first} and {second} are both `{}` of {} (origin {}): the set was \
                 appended to twice (two runs at once?); keep one of them and report again",
                file.display(),
                r.candidate,
                r.problem,
                r.origin
            );
        }
        let shard = meta.as_ref().and_then(super::shards::shard_of_run);
        let Some((run, shard)) = shard else {
            runs.push((None, 1, vec![(0, dir.to_path_buf(), found)]));
            continue;
        };
        let mut shards = match runs.iter().position(|(r, _, _)| r.as_ref() == Some(&run)) {
            Some(i) => runs.remove(i).2,
            None => Vec::new(),
        };
        shards.retain(|(index, _, _)| *index != shard.index);
        shards.push((shard.index, dir.to_path_buf(), found));
        shards.sort_by_key(|(index, _, _)| *index);
        runs.push((Some(run), shard.count, shards));
    }
    let mut pooled: Vec<Record> = Vec::new();
    for (_, count, mut shards) in runs {
        let present: Vec<usize> = shards.iter().map(|(index, _, _)| *index).collect();
        if let Some(warning) = incomplete_run_warning(&present, count) {
            let dirs: Vec<String> = shards
                .iter()
                .map(|(_, d, _)| d.display().to_string())
                .collect();
            eprintln!("warning: {} — {warning}", dirs.join(", "));
        }
        let found = match shards.len() {
            1 => shards.pop().expect("one").2,
            _ => super::shards::merge_records(
                shards.iter().map(|(_, d, r)| (d.as_path(), r.as_slice())),
            )?,
        };
        let (answers, native): (Vec<Record>, Vec<Record>) = found.into_iter().partition(answer);
        let replaces = |problem: &str, pooled: &[Record]| {
            native
                .iter()
                .any(|r| r.problem == problem && !r.is_reference())
                || !pooled.iter().any(|p| p.problem == problem && !answer(p))
        };
        let problems: BTreeSet<String> = native
            .iter()
            .map(|r| r.problem.clone())
            .filter(|p| replaces(p, &pooled))
            .collect();
        pooled.retain(|p| answer(p) || !problems.contains(&p.problem));
        pooled.extend(native.into_iter().filter(|r| problems.contains(&r.problem)));
        pooled.retain(|p| {
            !answer(p)
                || !answers
                    .iter()
                    .any(|a| a.problem == p.problem && a.group == p.group)
        });
        pooled.extend(answers);
    }
    let number =
        |r: &Record| bench_problems::find_problem(&r.problem).map_or(u32::MAX, |p| p.number());
    pooled.sort_by_key(number); // stable: recorded order inside a problem
    Ok(pooled)
}

/// The result sets among `paths` (directories or their results.jsonl) whose `run.json` says
/// they ran on the CPU emulator (`timings_are_gpu_timings: false`).
pub(crate) fn emulator_sets(paths: &[PathBuf]) -> Vec<PathBuf> {
    paths
        .iter()
        .filter(|path| RunMeta::beside(path).is_some_and(|run| !run.timings_are_gpu_timings))
        .cloned()
        .collect()
}

/// The warning for a run of `count` shards of which only `present` (indices) were given: what
/// the report then leaves out. `None` when every shard is there.
pub(crate) fn incomplete_run_warning(present: &[usize], count: usize) -> Option<String> {
    let missing: Vec<String> = (0..count)
        .filter(|i| !present.contains(i))
        .map(|i| format!("{i}/{count}"))
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "{} of the run's {count} shards; shard(s) {} missing, so their problems are not in this report",
            present.len(),
            missing.join(", ")
        )
    })
}

/// Warns on stderr about each of [`emulator_sets`]: its timings say nothing about a GPU, so
/// neither does a projection from them.
pub fn warn_emulator_sets(paths: &[PathBuf]) {
    for path in emulator_sets(paths) {
        warn_emulator(&path);
    }
}

/// The caveat printed with the tables (stdout, beside the numbers it qualifies) when any of
/// `paths` ran on the CPU emulator; `None` when none did.
pub fn emulator_caveat(paths: &[PathBuf]) -> Option<String> {
    let sets = emulator_sets(paths);
    (!sets.is_empty()).then(|| {
        let names: Vec<String> = sets.iter().map(|p| p.display().to_string()).collect();
        format!(
            "{} ran on the CPU emulator: {EMULATOR_CAVEAT}",
            names.join(", ")
        )
    })
}

/// What an emulator's numbers are not (said on stdout next to them).
pub const EMULATOR_CAVEAT: &str = "its statuses are results, its timings are NOT GPU timings: the \
    wins, speedups and any projection from them say nothing about a GPU.";

fn warn_emulator(path: &Path) {
    eprintln!(
        "warning: {} ran on the CPU emulator: its timings are NOT GPU timings, and a \
         projection from them says nothing about a GPU step",
        path.display()
    );
}
