//! The run's input cache: every input set of a problem, with its oracle and work, is generated
//! once per run and stored here, so that a fresh worker after a crash or a timeout (and
//! PyTorch's peer, `run --torch`) reads it instead of making it again.
//!
//! Content-addressed: a set's files are named by a hash of everything the set depends on
//! (problem, preset, label, sizes, seeds, special-value set, the binary's commit), so a file is
//! never taken for a set it was not made for. Per problem directory:
//! - `<label>-<key>.safetensors`: the set's own tensors, in `dlrm-bench gen`'s format (metadata
//!   `problem`, `preset`, `seed`, `sizes`, ...), plus `scalars`, `work` and `shared`;
//! - `<label>-<key>.oracle.safetensors`: each output's oracle (f64 or i64);
//! - `shared-<key>.safetensors`: one tensor the sets share (a table), stored once; a set's
//!   `shared` metadata maps tensor names to these files.
//!
//! Every file is written under a temporary name and renamed, and the set file comes last, so a
//! set whose file exists is complete (a worker killed while writing leaves no half entry).
use super::config::SetPlan;
use crate::record::GIT_COMMIT;
use anyhow::Context;
use bench_problems::{InputSet, Oracle, OracleOutput, Preset, Problem, Sizes, Work};
use data_gen::{HostTensor, TensorSet};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A set as the cache holds it.
pub(super) struct CachedSet {
    pub input: InputSet,
    pub oracle: Oracle,
    pub work: Work,
}

/// The input cache of one problem of a run.
#[derive(Clone, Debug)]
pub struct InputCache {
    dir: PathBuf,
}

/// Metadata key of a set file's shared tensors: `{"weight": "shared-<key>.safetensors"}`.
const SHARED: &str = "shared";

impl InputCache {
    /// The cache of `problem` under the run's cache directory `root`.
    pub fn new(root: &Path, problem: &dyn Problem) -> Self {
        InputCache {
            dir: root.join(problem.name()),
        }
    }

    /// The directory of the problem's files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of set `plan` (it exists once the set is stored).
    pub(super) fn set_path(
        &self,
        problem: &dyn Problem,
        preset: Preset,
        plan: &SetPlan,
    ) -> PathBuf {
        self.dir.join(format!(
            "{}-{}.safetensors",
            plan.label,
            set_key(problem, preset, plan)
        ))
    }

    fn oracle_path(set_path: &Path) -> PathBuf {
        set_path.with_extension("oracle.safetensors")
    }

    /// Set `plan` as stored, or `None` when it is not there.
    pub(super) fn load(
        &self,
        problem: &dyn Problem,
        preset: Preset,
        plan: &SetPlan,
    ) -> anyhow::Result<Option<CachedSet>> {
        let path = self.set_path(problem, preset, plan);
        if !path.exists() {
            return Ok(None);
        }
        let mut file = TensorSet::read(&path)?;
        let meta = |key: &str| {
            file.metadata
                .get(key)
                .with_context(|| format!("{}: no metadata `{key}`", path.display()))
        };
        let sizes: Sizes = parse(&path, "sizes", meta("sizes")?)?;
        let scalars: BTreeMap<String, f64> = parse(&path, "scalars", meta("scalars")?)?;
        let work: Work = parse(&path, "work", meta("work")?)?;
        let shared: BTreeMap<String, String> = parse(&path, SHARED, meta(SHARED)?)?;
        for (name, shared_file) in shared {
            let shared_path = self.dir.join(&shared_file);
            let key = format!("cache/{}", shared_path.display());
            let tensor = data_gen::shared_tensor(&key, || {
                let mut one = TensorSet::read(&shared_path)?;
                one.tensors
                    .remove(&name)
                    .with_context(|| format!("{}: no tensor `{name}`", shared_path.display()))
            })?;
            file.tensors.insert(name, tensor);
        }
        file.metadata.clear();
        let input = InputSet {
            seed: plan.seed,
            sizes,
            scalars,
            tensors: file,
        };
        let oracle_path = Self::oracle_path(&path);
        let oracle = oracle_from_file(&oracle_path, TensorSet::read(&oracle_path)?)?;
        Ok(Some(CachedSet {
            input,
            oracle,
            work,
        }))
    }

    /// Stores set `plan`: shared tensors once each, the oracle, then the set file.
    pub(super) fn store(
        &self,
        problem: &dyn Problem,
        preset: Preset,
        plan: &SetPlan,
        set: &InputSet,
        oracle: &Oracle,
        work: &Work,
    ) -> anyhow::Result<()> {
        std::fs::create_dir_all(&self.dir)
            .with_context(|| format!("creating {}", self.dir.display()))?;
        let mut own = TensorSet::new();
        let mut shared = BTreeMap::new();
        for (name, t) in &set.tensors.tensors {
            match data_gen::shared_key(&t.bytes) {
                Some(key) => {
                    let file = format!("shared-{}.safetensors", hex_hash(&key));
                    let path = self.dir.join(&file);
                    if !path.exists() {
                        let mut one = TensorSet::new();
                        one.insert(name.clone(), t.clone());
                        one.metadata.insert("shared_key".into(), key);
                        write_atomically(&one, &path)?;
                    }
                    shared.insert(name.clone(), file);
                }
                None => own.insert(name.clone(), t.clone()),
            }
        }
        let path = self.set_path(problem, preset, plan);
        write_atomically(&oracle_file(oracle)?, &Self::oracle_path(&path))?;
        let meta = &mut own.metadata;
        meta.insert("problem".into(), problem.name().into());
        meta.insert("preset".into(), preset.name().into());
        meta.insert("label".into(), plan.label.clone());
        meta.insert("seed".into(), plan.seed.to_string());
        meta.insert("table_seed".into(), plan.table_seed.to_string());
        meta.insert("sizes".into(), serde_json::to_string(&set.sizes)?);
        meta.insert("scalars".into(), serde_json::to_string(&set.scalars)?);
        meta.insert("work".into(), serde_json::to_string(work)?);
        meta.insert(SHARED.into(), serde_json::to_string(&shared)?);
        meta.insert("recipe".into(), problem.recipe(preset).to_string());
        write_atomically(&own, &path)
    }
}

/// What set `plan` of `problem` depends on, hashed: the name of its files.
fn set_key(problem: &dyn Problem, preset: Preset, plan: &SetPlan) -> String {
    let sizes = serde_json::to_string(&plan.sizes).unwrap_or_default();
    hex_hash(&format!(
        "{}|{}|{}|{sizes}|{}|{}|{:?}|{GIT_COMMIT}",
        problem.name(),
        preset.name(),
        plan.label,
        plan.seed,
        plan.table_seed,
        plan.special
    ))
}

/// 64 bits of hash of `text`, as 16 hex digits.
fn hex_hash(text: &str) -> String {
    format!("{:016x}", data_gen::seed::derive_str(0, text))
}

fn parse<T: serde::de::DeserializeOwned>(path: &Path, key: &str, text: &str) -> anyhow::Result<T> {
    serde_json::from_str(text).with_context(|| format!("{}: metadata `{key}`", path.display()))
}

/// Metadata key prefix of a row-update oracle output: `rows/<name>` holds its shape and bounds,
/// tensors `<name>/rows` and `<name>/delta` its rows and updates.
const ROWS: &str = "rows/";

/// The row-update oracle's scalars, as stored.
#[derive(serde::Serialize, serde::Deserialize)]
struct RowShape {
    total_rows: usize,
    width: usize,
    update_rel_l2: f64,
    update_max_scaled: f64,
}

/// An oracle as one file: f64 or i64 values per output, a row update as its two tensors.
fn oracle_file(oracle: &Oracle) -> anyhow::Result<TensorSet> {
    let mut file = TensorSet::new();
    for (name, values) in oracle {
        match values {
            OracleOutput::Float(v) => file.insert(
                name.clone(),
                HostTensor::from_f64(vec![v.len()], v.clone())?,
            ),
            OracleOutput::Int(v) => file.insert(
                name.clone(),
                HostTensor::from_i64(vec![v.len()], v.clone())?,
            ),
            OracleOutput::Rows(u) => {
                let rows = HostTensor::from_i64(vec![u.rows.len()], u.rows.clone())?;
                let delta = HostTensor::from_f64(vec![u.delta.len()], u.delta.clone())?;
                file.insert(format!("{name}/rows"), rows);
                file.insert(format!("{name}/delta"), delta);
                let shape = RowShape {
                    total_rows: u.total_rows,
                    width: u.width,
                    update_rel_l2: u.update_rel_l2,
                    update_max_scaled: u.update_max_scaled,
                };
                file.metadata
                    .insert(format!("{ROWS}{name}"), serde_json::to_string(&shape)?);
            }
        }
    }
    Ok(file)
}

/// The oracle [`oracle_file`] stored in `file` (read from `path`).
fn oracle_from_file(path: &Path, mut file: TensorSet) -> anyhow::Result<Oracle> {
    let mut oracle = Oracle::new();
    for (key, text) in &file.metadata {
        let Some(name) = key.strip_prefix(ROWS) else {
            continue;
        };
        let shape: RowShape = parse(path, key, text)?;
        let mut take = |part: &str| {
            file.tensors
                .remove(&format!("{name}/{part}"))
                .with_context(|| format!("{}: no tensor `{name}/{part}`", path.display()))
        };
        let (rows, delta) = (take("rows")?.to_i64_vec()?, take("delta")?.to_f64_vec());
        let update = bench_problems::RowUpdate {
            total_rows: shape.total_rows,
            width: shape.width,
            rows,
            delta,
            update_rel_l2: shape.update_rel_l2,
            update_max_scaled: shape.update_max_scaled,
        };
        oracle.insert(name.to_string(), OracleOutput::Rows(update));
    }
    for (name, t) in file.tensors {
        let values = match t.dtype {
            data_gen::DType::F64 => OracleOutput::Float(t.to_f64_vec()),
            data_gen::DType::I64 => OracleOutput::Int(t.to_i64_vec()?),
            other => anyhow::bail!("{}: an oracle of dtype {}", path.display(), other.name()),
        };
        oracle.insert(name, values);
    }
    Ok(oracle)
}

/// Writes `set` to a temporary file beside `path`, then renames it to `path`.
fn write_atomically(set: &TensorSet, path: &Path) -> anyhow::Result<()> {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    set.write(&tmp)?;
    std::fs::rename(&tmp, path)
        .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_set_reads_back_equal_and_shares_its_table_once() {
        let problem = bench_problems::find_problem("embedding_backward_rowwise_adagrad").unwrap();
        let root = data_gen::tensor::scratch_path("input-cache");
        let cache = InputCache::new(&root, problem);
        let plans = super::super::config::ci_config(2, 0).input_sets(problem);
        let mut made = Vec::new();
        for plan in &plans[..2] {
            assert!(cache.load(problem, Preset::Ci, plan).unwrap().is_none());
            let set = problem
                .generate(Preset::Ci, &plan.sizes, plan.seeds())
                .unwrap();
            let oracle = problem.oracle(&set).unwrap();
            let work = problem.work(&set);
            cache
                .store(problem, Preset::Ci, plan, &set, &oracle, &work)
                .unwrap();
            made.push((set, oracle, work));
        }
        assert!(
            made[0].0.tensors.tensors["weight"]
                .bytes
                .same_as(&made[1].0.tensors.tensors["weight"].bytes),
            "the sets share one table"
        );
        let files: Vec<String> = std::fs::read_dir(cache.dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        let shared = files.iter().filter(|f| f.starts_with("shared-")).count();
        assert_eq!(
            shared, 2,
            "weight and momentum, once each for both sets: {files:?}"
        );
        assert!(files.iter().all(|f| !f.contains(".tmp-")), "{files:?}");
        for (plan, (set, oracle, work)) in plans.iter().zip(&made) {
            let back = cache.load(problem, Preset::Ci, plan).unwrap().unwrap();
            assert_eq!(back.input.tensors, set.tensors);
            assert_eq!(
                (back.input.seed, &back.input.sizes, &back.input.scalars),
                (set.seed, &set.sizes, &set.scalars)
            );
            assert_eq!(&back.oracle, oracle);
            assert_eq!(&back.work, work);
        }
        // Another commit, seed or set is another key: nothing is taken for what it is not.
        let mut other = plans[0].clone();
        other.seed += 1;
        assert!(cache.load(problem, Preset::Ci, &other).unwrap().is_none());
        // A damaged file is an error naming it, not a wrong set.
        let path = cache.set_path(problem, Preset::Ci, &plans[0]);
        std::fs::write(&path, b"garbage").unwrap();
        let e = cache.load(problem, Preset::Ci, &plans[0]).err().unwrap();
        assert!(
            format!("{e:#}").contains(&path.display().to_string()),
            "{e:#}"
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
