//! The shards of one run (`run --shard i/n`): what identifies their run in each `run.json`, and
//! their records as one set (every shard's candidates, one reference per problem). The merge
//! command (`report --merge`) and the pooling of sets both build on these.
use super::RunMeta;
use crate::results::record::Record;
use crate::runner::shard::Shard;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The `run.json` fields every shard of one run must have alike (dotted paths).
pub(crate) const SAME: &[&str] = &[
    "git_commit",
    "public_seeds",
    "secret_seed_sha256",
    "timings_are_gpu_timings",
    "device.kind",
    "device.name",
    "shard.count",
    "shard.items",
];

pub(crate) fn field<'a>(v: &'a Value, path: &str) -> &'a Value {
    path.split('.').fold(v, |v, k| &v[k])
}

pub(crate) fn shard_of(meta: &crate::results::ShardMeta) -> Shard {
    Shard {
        index: meta.index,
        count: meta.count,
    }
}

/// The shard a result set's `run.json` says it is, with what identifies its run: the fields
/// every shard of one run has alike ([`SAME`], the problems' names, the configuration) as one
/// value, equal for the shards of one run and only for them (as [`check`] compares them).
/// `None` when the set is not a shard of `run --shard i/n` (a whole run, or a merged one).
pub(crate) fn shard_of_run(run: &RunMeta) -> Option<(Value, Shard)> {
    let shard = shard_of(run.shard.as_ref()?);
    let view = serde_json::to_value(run).ok()?;
    let mut key = serde_json::Map::new();
    for path in SAME {
        key.insert(path.to_string(), field(&view, path).clone());
    }
    key.insert("problems".into(), json!(problem_names(&view)));
    key.insert("config".into(), run.config.clone());
    Some((Value::Object(key), shard))
}

/// The problems' names in a `run.json`, each with its shape (`name@shape`) where it has one:
/// shards run at different shapes are not one run.
pub(crate) fn problem_names(run: &Value) -> Vec<Value> {
    run["problems"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| match &p["shape"] {
            Value::String(shape) => json!(format!("{}@{shape}", p["name"].as_str().unwrap_or(""))),
            _ => p["name"].clone(),
        })
        .collect()
}

/// The merged records of shards (each its directory and records, in shard index order):
/// candidates of every shard, one reference per problem (the lowest shard index's), in problem
/// order. Two shards with a record of one candidate are refused. [`crate::report::pool_runs`]
/// pools the shards of one run with it too.
pub(crate) fn merge_records<'a>(
    sets: impl IntoIterator<Item = (&'a Path, &'a [Record])>,
) -> anyhow::Result<Vec<Record>> {
    let mut out: Vec<Record> = Vec::new();
    let mut seen: BTreeSet<(String, String, String)> = BTreeSet::new();
    let mut referenced: BTreeSet<String> = BTreeSet::new();
    // Every overlap, by problem: a refusal lists them all, not the first found.
    let mut overlaps: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (dir, records) in sets {
        for r in records {
            if r.is_reference() {
                if referenced.insert(r.unit_key()) {
                    out.push(r.clone());
                }
                continue;
            }
            let key = (r.unit_key(), r.group.clone(), r.candidate.clone());
            if !seen.insert(key) {
                overlaps.entry(r.problem.clone()).or_default().push(format!(
                    "`{}` ({}) again in {}/results.jsonl",
                    r.candidate,
                    r.group,
                    dir.display()
                ));
                continue;
            }
            out.push(r.clone());
        }
    }
    anyhow::ensure!(
        overlaps.is_empty(),
        "the shards overlap: candidates in two shards, in {} problem(s): {}",
        overlaps.len(),
        overlaps
            .iter()
            .map(|(p, c)| format!("{p}: {}", c.join(", ")))
            .collect::<Vec<_>>()
            .join("; ")
    );
    let number =
        |r: &Record| bench_problems::find_problem(&r.problem).map_or(u32::MAX, |p| p.number());
    out.sort_by_key(number);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::record::Status;

    fn record(problem: &str, candidate: &str) -> Record {
        let group = if candidate == "reference" {
            "reference"
        } else {
            "g"
        };
        let mut r = Record::new(problem, candidate, group, "o");
        r.status = Status::Correct;
        r
    }

    /// Overlapping shards are refused naming every problem and candidate in two shards, not
    /// the first found; each problem's reference comes from the first shard with it.
    #[test]
    fn overlaps_are_listed_all_and_references_taken_once() {
        let a = [
            record("kjt_permute", "reference"),
            record("kjt_permute", "x"),
            record("embedding_bag_sum", "y"),
        ];
        let b = [
            record("kjt_permute", "reference"),
            record("kjt_permute", "z"),
        ];
        let merged = merge_records([(Path::new("a"), &a[..]), (Path::new("b"), &b[..])]).unwrap();
        let names: Vec<&str> = merged.iter().map(|r| r.candidate.as_str()).collect();
        assert_eq!(names, ["y", "reference", "x", "z"]);

        let c = [
            record("kjt_permute", "x"),
            record("embedding_bag_sum", "y"),
            record("fm_interaction", "w"),
        ];
        let err = merge_records([(Path::new("a"), &a[..]), (Path::new("c"), &c[..])])
            .unwrap_err()
            .to_string();
        assert!(err.contains("in 2 problem(s)"), "{err}");
        assert!(
            err.contains("embedding_bag_sum: `y` (g) again in c/results.jsonl"),
            "{err}"
        );
        assert!(
            err.contains("kjt_permute: `x` (g) again in c/results.jsonl"),
            "{err}"
        );
        assert!(!err.contains("fm_interaction"), "{err}");
    }
}
