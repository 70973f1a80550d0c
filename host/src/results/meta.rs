//! `run.json`, typed: what a run was (its identity, device, configuration, seeds and problems)
//! and, once it ends, what it measured (metrics, phases, projection). Every reader and writer
//! goes through [`RunMeta`]; fields a reader does not know are kept as they were
//! ([`RunMeta::extra`]), so a set written by another version loads and is written back whole.
//! Parts whose shape changed over the project's history (the configuration, the options, the
//! metrics) stay JSON values here and are typed where they are used.
use crate::backend::DeviceInfo;
use crate::results::record::Ceilings;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// The format this build writes; sets without the field are format 1.
pub(crate) const FORMAT: u32 = 2;

fn format_1() -> u32 {
    1
}

fn is_format_1(v: &u32) -> bool {
    *v == 1
}

/// The secret seed as `run.json` holds it: the number once published, else a sentence saying
/// where it is (`run_dir::SECRET_HIDDEN`, `shard::SECRET_WITH_MERGE`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SecretSeed {
    Published(u64),
    Withheld(String),
}

impl SecretSeed {
    /// The seed, when published.
    pub fn published(&self) -> Option<u64> {
        match self {
            SecretSeed::Published(s) => Some(*s),
            SecretSeed::Withheld(_) => None,
        }
    }
}

/// Which part of a sharded run a set holds (`run --shard i/n`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShardMeta {
    pub index: usize,
    pub count: usize,
    pub items: usize,
    pub first_item: usize,
    pub end_item: usize,
}

/// One result set's `run.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunMeta {
    #[serde(default = "format_1", skip_serializing_if = "is_format_1")]
    pub format: u32,
    pub run_id: String,
    pub started: String,
    /// `None` (null) while the run goes on.
    pub finished: Option<String>,
    pub command: String,
    pub git_commit: String,
    /// The SHA-256 of the dlrm-bench binary that ran it (a `-dirty` commit names no one
    /// tree); absent in older sets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary_sha256: Option<String>,
    /// The backend and why it was chosen, as printed.
    pub backend: String,
    pub device: DeviceInfo,
    pub timings_are_gpu_timings: bool,
    /// `None` (null) on the emulator.
    pub ceilings: Option<Ceilings>,
    /// The evaluation configuration (`evaluate::EvalConfig`).
    pub config: Value,
    pub public_seeds: Vec<u64>,
    pub secret_seed: SecretSeed,
    pub peer_files: Vec<std::path::PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devices: Option<Vec<usize>>,
    /// The run's options (`runner::RunOptions`), from which a resume rebuilds them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Value>,
    /// Each problem's name, number, sizes and recipe.
    pub problems: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardMeta>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_seed_sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_stats: Option<Value>,
    /// The wall time of the last attempt (the run, or its last resume).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_s: Option<f64>,
    /// Each attempt at the run, the first and every resume: `{started, wall_s, records}` (an
    /// attempt cut short has no `wall_s`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub projection: Option<Value>,
    /// A merge of shards: the whole run is there, and which shards it was made of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub complete: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged_shards: Option<Vec<Value>>,
    /// Fields this build does not know, kept as read.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

impl RunMeta {
    /// The `run.json` of the set in `dir`; the error names the file and, for a field that does
    /// not parse, the field.
    pub fn load(dir: &Path) -> anyhow::Result<RunMeta> {
        let path = dir.join("run.json");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("{}: cannot read", path.display()))?;
        Self::parse(&text).with_context(|| format!("{}", path.display()))
    }

    /// `run.json`'s text, typed.
    pub fn parse(text: &str) -> anyhow::Result<RunMeta> {
        let de = &mut serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(de).map_err(|e| match e.path().to_string().as_str() {
            "." => anyhow::anyhow!("{}", e.inner()),
            path => anyhow::anyhow!("field `{path}`: {}", e.inner()),
        })
    }

    /// The `run.json` of the set beside `path` (a set's directory or its `results.jsonl`),
    /// when there is a readable one.
    pub fn beside(path: &Path) -> Option<RunMeta> {
        Self::load(super::set_dir(path)).ok()
    }

    /// Writes it as `dir/run.json`, atomically, keys in order as every set has them.
    pub fn write(&self, dir: &Path) -> anyhow::Result<()> {
        crate::results::run_dir::write_json(&dir.join("run.json"), &serde_json::to_value(self)?)
    }
}

/// A complete `run.json` of a finished emulator run (one problem, no shard), for tests to edit.
#[cfg(test)]
pub(crate) fn sample_run_json() -> Value {
    serde_json::json!({
        "run_id": "r", "started": "2026-01-01T00:00:00Z", "finished": "2026-01-01T00:01:00Z",
        "command": "dlrm-bench run", "backend": "emulator", "ceilings": null, "peer_files": [],
        "git_commit": "abc", "public_seeds": [1, 2], "secret_seed": 7,
        "timings_are_gpu_timings": false,
        "device": {"kind": "cpu-emulator", "name": "emu", "driver": null,
            "compute_capability": null, "multiprocessors": 2, "l2_bytes": 0,
            "memory_bytes": 0, "max_threads_per_block": 1024,
            "max_shared_bytes_per_block": 49152},
        "config": {"preset": "ci", "seed": 2026, "public_sets": 3},
        "problems": [{"name": "embedding_bag_sum"}],
        "options": {"basis": "reference"},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every committed set's `run.json` loads, and written back it is the same JSON: nothing a
    /// reader did not know is lost.
    #[test]
    fn every_committed_run_json_loads_and_round_trips() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../results");
        let mut seen = 0;
        let mut dirs = vec![root];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.file_name().is_some_and(|n| n == "run.json") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    let meta = RunMeta::parse(&text)
                        .unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
                    let original: Value = serde_json::from_str(&text).unwrap();
                    assert_eq!(
                        serde_json::to_value(&meta).unwrap(),
                        original,
                        "{}",
                        path.display()
                    );
                    seen += 1;
                }
            }
        }
        assert!(seen >= 45, "only {seen} committed sets");
    }

    #[test]
    fn the_test_sample_is_a_run_json() {
        RunMeta::parse(&sample_run_json().to_string()).unwrap();
    }

    #[test]
    fn a_field_of_the_wrong_type_is_named() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../results/20261204T213806Z-gpu-full/run.json");
        let mut v: Value = serde_json::from_str(&std::fs::read_to_string(root).unwrap()).unwrap();
        v["device"]["multiprocessors"] = serde_json::json!("many");
        let err = RunMeta::parse(&v.to_string()).unwrap_err().to_string();
        assert!(err.contains("field `device.multiprocessors`"), "{err}");
        let mut v2 = v.clone();
        v2["device"]["multiprocessors"] = serde_json::json!(132);
        v2["unknown_later_field"] = serde_json::json!({"kept": [1, 2]});
        let meta = RunMeta::parse(&v2.to_string()).unwrap();
        assert_eq!(
            serde_json::to_value(&meta).unwrap(),
            v2,
            "unknown fields kept"
        );
        assert_eq!(meta.format, 1, "a set without `format` is format 1");
    }
}
