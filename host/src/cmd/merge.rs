//! `dlrm-bench report --merge SHARD_DIR... --out DIR`: the result sets of the shards of one run
//! (`run --shard i/n`, [`crate::runner::shard`]) made into one, with the files a run writes
//! (`results.jsonl`, `run.json`, `summary.md`, `summary.csv`, `report.html`).
//!
//! The merge refuses, naming the shard directory and the field, shards that are not of one
//! run: another commit, public seed, secret seed (compared by digest), configuration (preset,
//! sets, pairs, …), problem list, item count, device kind or device model; a shard that did not
//! finish; a shard index given twice; a shard count that differs; and it refuses an incomplete
//! set, naming the missing shard indices (a partial merge would look like a whole run).
//!
//! Records: every shard's candidate records as they are (each was paired with the reference on
//! its own device, in its own worker: its `reference_timing` and `speedup` stay its pairing
//! basis); one reference record per problem, from the lowest shard index that has one (the
//! shard whose block starts the problem). The secret seed is published when the merge is given
//! it (`--secret-seed-file` or `DLRM_BENCH_SECRET_SEED`) and it matches the shards' digest.
use crate::report::metrics::{Basis, Summary};
use crate::results::record::{read_records, Record};
use crate::results::shards::{field, merge_records, problem_names, shard_of, SAME};
use crate::results::{RunMeta, SecretSeed};
use crate::runner::shard::{secret_digest, Shard};
use anyhow::Context;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// One shard's result set, read.
struct ShardSet {
    dir: PathBuf,
    run: RunMeta,
    /// `run` as JSON, for the comparisons by field path.
    view: Value,
    shard: Shard,
    records: Vec<Record>,
}

fn read_shard(dir: &Path) -> anyhow::Result<ShardSet> {
    let file = dir.join("run.json");
    anyhow::ensure!(
        file.is_file(),
        "{}: not a result set (no readable run.json)",
        dir.display()
    );
    let run = RunMeta::load(dir)?;
    let shard = run.shard.as_ref().map(shard_of).ok_or_else(|| {
        anyhow::anyhow!(
            "{}: field `shard`: missing or not {{index, count}}: not a shard of `run --shard i/n`",
            file.display()
        )
    })?;
    anyhow::ensure!(
        run.finished.is_some(),
        "{}: field `finished` is null: shard {shard} did not finish (finish it with `run \
         --resume {}`)",
        file.display(),
        dir.display()
    );
    let results = dir.join("results.jsonl");
    anyhow::ensure!(results.is_file(), "{}: no such file", results.display());
    Ok(ShardSet {
        dir: dir.to_path_buf(),
        records: read_records(&results),
        view: serde_json::to_value(&run)?,
        run,
        shard,
    })
}

/// Refuses `sets` unless they are the shards of one run, each once, all there.
fn check(sets: &[ShardSet]) -> anyhow::Result<()> {
    let first = &sets[0];
    let name = |s: &ShardSet| format!("{} (shard {})", s.dir.display(), s.shard);
    for s in &sets[1..] {
        let mut paths: Vec<String> = SAME.iter().map(|p| p.to_string()).collect();
        paths.push("problems".into());
        let keys = first.run.config.as_object().into_iter().flatten();
        paths.extend(keys.map(|(k, _)| format!("config.{k}")));
        let mut differ = Vec::new();
        for path in &paths {
            let (a, b) = if path == "problems" {
                (
                    json!(problem_names(&first.view)),
                    json!(problem_names(&s.view)),
                )
            } else {
                (
                    field(&first.view, path).clone(),
                    field(&s.view, path).clone(),
                )
            };
            if a != b {
                differ.push(format!(
                    "field `{path}` is {b}, but {} has {a}",
                    name(first)
                ));
            }
        }
        anyhow::ensure!(
            differ.is_empty(),
            "{}/run.json: {}: not shards of one run",
            s.dir.display(),
            differ.join("; ")
        );
    }
    let count = first.shard.count;
    for (i, s) in sets.iter().enumerate() {
        if let Some(other) = sets[..i].iter().find(|o| o.shard.index == s.shard.index) {
            anyhow::bail!(
                "{}/run.json: field `shard` is {}, and so is {}'s: a shard given twice",
                s.dir.display(),
                s.shard,
                other.dir.display()
            );
        }
    }
    let have: BTreeSet<usize> = sets.iter().map(|s| s.shard.index).collect();
    let missing: Vec<String> = (0..count)
        .filter(|i| !have.contains(i))
        .map(|i| format!("{i}/{count}"))
        .collect();
    anyhow::ensure!(
        missing.is_empty(),
        "incomplete: shard{} {} of {count} missing (given: {}); merge all {count} shards",
        if missing.len() > 1 { "s" } else { "" },
        missing.join(", "),
        sets.iter().map(name).collect::<Vec<_>>().join(", ")
    );
    Ok(())
}

/// Merges the shard result sets in `dirs` into `out`; `secret` is the run's secret seed when the
/// merge was given it (published in `run.json` after it is checked against the shards' digest).
pub fn merge(dirs: &[PathBuf], out: &Path, secret: Option<u64>) -> anyhow::Result<Vec<Record>> {
    anyhow::ensure!(!dirs.is_empty(), "--merge: no shard directories");
    let mut sets = dirs
        .iter()
        .map(|d| read_shard(d))
        .collect::<anyhow::Result<Vec<_>>>()?;
    check(&sets)?;
    sets.sort_by_key(|s| s.shard.index);
    let is_input = |d: &PathBuf| d.canonicalize().ok() == out.canonicalize().ok();
    anyhow::ensure!(
        !dirs.iter().any(is_input),
        "--out {} is one of the shards; give a new directory",
        out.display()
    );
    if out.join("run.json").exists() || out.join("results.jsonl").exists() {
        anyhow::bail!(
            "--out {}: it holds a result set already; give a new directory",
            out.display()
        );
    }
    let digest = sets[0].run.secret_seed_sha256.as_deref().unwrap_or("");
    let published = match secret {
        Some(seed) if secret_digest(seed) == digest => SecretSeed::Published(seed),
        Some(_) => anyhow::bail!(
            "the secret seed given to the merge is not the shards' (field `secret_seed_sha256` \
             of {}/run.json differs from its digest)",
            sets[0].dir.display()
        ),
        None => SecretSeed::Withheld(
            "(not published: give the merge the shards' secret seed with --secret-seed-file or \
             DLRM_BENCH_SECRET_SEED)"
                .into(),
        ),
    };
    let records = merge_records(sets.iter().map(|s| (s.dir.as_path(), s.records.as_slice())))?;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let run_id = out
        .file_name()
        .map_or("merged".into(), |s| s.to_string_lossy().into_owned());
    let (run, metrics) = merged_meta(&sets, &records, run_id.clone(), published)?;
    run.write(out)?;
    let mut log = crate::results::record::RecordLog::open(out)?;
    for r in &records {
        log.append(r)?;
    }
    let heading = format!(
        "# DLRM-Bench run {run_id} (merged from {} shards)\n\ndevice: {} ({}), commit: {}\n\
         shards: {}{}",
        sets.len(),
        run.device.name,
        run.device.kind,
        run.git_commit,
        dirs.iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        if !run.timings_are_gpu_timings {
            "\n\n**CPU emulator: correctness is real, timings are NOT GPU timings.**"
        } else {
            ""
        }
    );
    crate::report::write_markdown(out, &heading, &records, &metrics, "")?;
    crate::report::write_csv(out, &records)?;
    crate::report::html::write_run_report(out, &records, &metrics, None)?;
    println!("{heading}\n");
    println!(
        "{}",
        crate::report::terminal_tables(&records, &metrics, false)
    );
    println!("merged {} shards into {}", sets.len(), out.display());
    Ok(records)
}

/// The merged set's `run.json` (the first shard's, made the whole run's) and its metrics.
fn merged_meta(
    sets: &[ShardSet],
    records: &[Record],
    run_id: String,
    published: SecretSeed,
) -> anyhow::Result<(RunMeta, Summary)> {
    let mut run = sets[0].run.clone();
    let options = run.options.clone().unwrap_or_default();
    let basis: Basis = serde_json::from_value(options["basis"].clone()).unwrap_or_default();
    let threshold = run.config["win_threshold"].as_f64().unwrap_or(1.0);
    let combined = crate::report::shapes::by_problem(records, threshold);
    let problems: std::collections::BTreeSet<String> =
        run.problems.iter().map(|p| p["name"].to_string()).collect();
    let metrics = Summary::new(&combined, problems.len(), basis);
    run.run_id = run_id;
    run.command = std::env::args().collect::<Vec<_>>().join(" ");
    run.started = sets
        .iter()
        .map(|s| s.run.started.clone())
        .min()
        .unwrap_or_default();
    run.finished = sets.iter().filter_map(|s| s.run.finished.clone()).max();
    run.secret_seed = published;
    run.complete = Some(true);
    run.merged_shards = Some(
        sets.iter()
            .map(|s| {
                json!({
                    "shard": s.shard.to_string(), "dir": s.dir, "run_id": s.run.run_id,
                    "started": s.run.started, "finished": s.run.finished,
                    "wall_s": s.run.wall_s, "backend": s.run.backend,
                    "ceilings": s.run.ceilings, "devices": s.run.devices,
                    "records": s.records.len(),
                })
            })
            .collect(),
    );
    // The merged set is the whole run: no shard of it.
    if let Some(o) = run.options.as_mut() {
        o["shard"] = Value::Null;
    }
    run.shard = None;
    run.wall_s = None;
    run.projection = None;
    run.metrics = Some(serde_json::to_value(&metrics)?);
    run.input_stats = Some(crate::results::derived::input_stats(records));
    run.phases = Some(crate::results::derived::phase_table(records));
    Ok((run, metrics))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::record::{RecordLog, Status};

    fn root(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("dlrm-merge-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    /// A finished shard `index/count` in `root/s<index>`, with a reference and one candidate of
    /// problem `embedding_bag_sum`; `edit` changes its run.json.
    fn shard(root: &Path, index: usize, count: usize, edit: impl Fn(&mut Value)) -> PathBuf {
        let dir = root.join(format!("s{index}-{}", rand::random::<u32>()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut run = crate::results::meta::sample_run_json();
        run["secret_seed"] = json!(crate::runner::shard::SECRET_WITH_MERGE);
        run["secret_seed_sha256"] = json!(secret_digest(7));
        run["shard"] = json!({"index": index, "count": count, "items": 4,
            "first_item": 2 * index, "end_item": 2 * index + 2});
        edit(&mut run);
        crate::results::run_dir::write_json(&dir.join("run.json"), &run).unwrap();
        let mut log = RecordLog::open(&dir).unwrap();
        let mut r = Record::new("embedding_bag_sum", "reference", "reference", "reference");
        r.status = Status::Correct;
        r.device = Some(index);
        log.append(&r).unwrap();
        let mut c = Record::new("embedding_bag_sum", &format!("c{index}"), "g", "o");
        c.status = Status::Correct;
        log.append(&c).unwrap();
        dir
    }

    type Edit = Box<dyn Fn(&mut Value)>;

    fn refused(dirs: &[PathBuf], out: &Path) -> String {
        format!("{:#}", merge(dirs, out, None).unwrap_err())
    }

    #[test]
    fn shards_of_one_run_merge_with_one_reference_and_the_secret_published() {
        let r = root("ok");
        let dirs = [shard(&r, 1, 2, |_| {}), shard(&r, 0, 2, |_| {})];
        let out = r.join("merged");
        let got = merge(&dirs, &out, Some(7)).unwrap();
        let names: Vec<(&str, Option<usize>)> = got
            .iter()
            .map(|r| (r.candidate.as_str(), r.device))
            .collect();
        assert_eq!(names, [("reference", Some(0)), ("c0", None), ("c1", None)]);
        let run: Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
        assert_eq!(run["secret_seed"], 7);
        assert_eq!(run["complete"], true);
        assert!(run.get("shard").is_none());
        assert_eq!(read_records(&out.join("results.jsonl")).len(), 3);
        assert!(out.join("summary.md").is_file() && out.join("summary.csv").is_file());
        // A wrong secret is refused; an existing result set is not overwritten.
        let e = format!("{:#}", merge(&dirs, &r.join("m2"), Some(8)).unwrap_err());
        assert!(e.contains("secret_seed_sha256"), "{e}");
        assert!(refused(&dirs, &out).contains("holds a result set already"));
        std::fs::remove_dir_all(&r).unwrap();
    }

    #[test]
    fn mismatched_shards_are_refused_naming_the_directory_and_the_field() {
        let r = root("bad");
        let out = r.join("merged");
        let cases: Vec<(&str, Edit)> = vec![
            ("config.seed", Box::new(|v| v["config"]["seed"] = json!(1))),
            (
                "config.preset",
                Box::new(|v| v["config"]["preset"] = json!("small")),
            ),
            (
                "secret_seed_sha256",
                Box::new(|v| v["secret_seed_sha256"] = json!(secret_digest(8))),
            ),
            ("git_commit", Box::new(|v| v["git_commit"] = json!("def"))),
            (
                "device.kind",
                Box::new(|v| v["device"]["kind"] = json!("cuda")),
            ),
            (
                "device.name",
                Box::new(|v| v["device"]["name"] = json!("NVIDIA H100")),
            ),
            ("shard.count", Box::new(|v| v["shard"]["count"] = json!(3))),
            ("public_seeds", Box::new(|v| v["public_seeds"] = json!([5]))),
            ("problems", Box::new(|v| v["problems"] = json!([]))),
        ];
        let good = shard(&r, 0, 2, |_| {});
        for (what, edit) in cases {
            let bad = shard(&r, 1, 2, edit);
            let e = refused(&[good.clone(), bad.clone()], &out);
            assert!(e.contains(&format!("field `{what}`")), "{what}: {e}");
            assert!(e.contains(&bad.display().to_string()), "{what}: {e}");
        }
        assert!(!out.exists());
        // The same shard twice, a missing one, an unfinished one, a plain run.
        let twice = shard(&r, 0, 2, |_| {});
        let e = refused(&[good.clone(), twice.clone()], &out);
        assert!(
            e.contains("given twice") && e.contains(&twice.display().to_string()),
            "{e}"
        );
        let e = refused(std::slice::from_ref(&good), &out);
        assert!(
            e.contains("incomplete") && e.contains("1/2 of 2 missing"),
            "{e}"
        );
        let open = shard(&r, 1, 2, |v| v["finished"] = Value::Null);
        let e = refused(&[good.clone(), open.clone()], &out);
        assert!(
            e.contains("field `finished`") && e.contains("did not finish"),
            "{e}"
        );
        let plain = shard(&r, 1, 2, |v| v["shard"] = Value::Null);
        let e = refused(&[good.clone(), plain], &out);
        assert!(e.contains("field `shard`"), "{e}");
        let e = refused(&[good, r.join("nowhere")], &out);
        assert!(e.contains("nowhere") && e.contains("run.json"), "{e}");
        std::fs::remove_dir_all(&r).unwrap();
    }
}
