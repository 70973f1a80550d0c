//! The run's input cache: every input set of a problem is generated once per run and stored
//! here, so that a fresh worker after a crash or a timeout (and PyTorch's peer, `run --torch`)
//! reads it instead of making it again; its oracle too (written by the same background writer,
//! so the first preparation does not wait for it: an oracle that took seconds of f64 work — a
//! sort of 10⁷ ids, 10⁹ multiply-adds — reads back in tens of milliseconds from `/dev/shm`).
//!
//! Content-addressed: a set's files are named by a hash of everything the set depends on
//! (problem, preset, label, sizes, seeds, special-value set, the build: its commit, and for a
//! build of uncommitted changes the binary's size and time), so a file is never taken for a
//! set it was not made for. Per problem and shape directory:
//! - `<label>-<key>.safetensors`: the set's own tensors, in `dlrm-bench gen`'s format (metadata
//!   `problem`, `preset`, `seed`, `sizes`, ...), plus `scalars`, `work` and `shared`;
//! - `shared-<key>.safetensors`: one tensor the sets share (a table), stored once; a set's
//!   `shared` metadata maps tensor names to these files.
//!
//! Oracles are apart, in `<root>/.oracles/<problem dir>/<label>-<key>.oracle.safetensors`
//! ([`super::oracle_cache`]): KernelBench answers read the sets (their Python runs in a sandbox
//! that must see the input files) but never the expected outputs. The `.oracles` directory is
//! private to the caller (mode 0700: a root caller's sandboxed uid cannot enter it) and the
//! answers' sandbox covers it (for a caller that keeps its uid) ([`ORACLES_DIR`]).
//!
//! Every file is written under a temporary name and renamed, and the set file comes last, so a
//! set whose file exists is complete (a worker killed while writing leaves no half entry).
use super::config::SetPlan;
use crate::results::record::build_identity;
use anyhow::Context;
use bench_problems::{InputSet, Oracle, Preset, Problem, Sizes, Work};
use data_gen::TensorSet;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A set as the cache holds it: its inputs and work.
pub(super) struct CachedSet {
    pub input: InputSet,
    pub work: Work,
}

/// The input cache of one problem of a run.
#[derive(Clone, Debug)]
pub struct InputCache {
    dir: PathBuf,
    oracle_dir: PathBuf,
}

/// The directory under a cache root that holds the oracles, private to the caller.
pub const ORACLES_DIR: &str = ".oracles";

/// Metadata key of a set file's shared tensors: `{"weight": "shared-<key>.safetensors"}`.
const SHARED: &str = "shared";

impl InputCache {
    /// The cache of `problem` under the run's cache directory `root`: a directory per problem
    /// and shape (`name`, `name@shape`), removed when that unit ends (unless the inputs are
    /// kept), never another shape's.
    pub fn new(root: &Path, problem: &dyn Problem) -> Self {
        let key = crate::results::record::unit_key(problem.name(), problem.shape_name());
        InputCache {
            dir: root.join(&key),
            oracle_dir: root.join(ORACLES_DIR).join(key),
        }
    }

    /// The bytes of the problem's files in the cache, its oracles with them.
    pub fn bytes(&self) -> u64 {
        bytes_under(&self.dir) + bytes_under(&self.oracle_dir)
    }

    /// Removes the problem's files, its oracles too.
    pub fn remove(&self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = std::fs::remove_dir_all(&self.oracle_dir);
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

    /// The file of set `plan`'s oracle ([`super::oracle_cache`]).
    pub(super) fn oracle_path(
        &self,
        problem: &dyn Problem,
        preset: Preset,
        plan: &SetPlan,
    ) -> PathBuf {
        self.oracle_dir.join(format!(
            "{}-{}.oracle.safetensors",
            plan.label,
            set_key(problem, preset, plan)
        ))
    }

    /// The oracle of set `plan` as stored, or `None` when it is not there.
    pub(super) fn load_oracle(
        &self,
        problem: &dyn Problem,
        preset: Preset,
        plan: &SetPlan,
    ) -> anyhow::Result<Option<Oracle>> {
        let path = self.oracle_path(problem, preset, plan);
        if !path.exists() {
            return Ok(None);
        }
        super::oracle_cache::read(&path)
            .map(Some)
            .with_context(|| path.display().to_string())
    }

    /// Stores the oracle of set `plan`.
    pub(super) fn store_oracle(
        &self,
        problem: &dyn Problem,
        preset: Preset,
        plan: &SetPlan,
        oracle: &Oracle,
    ) -> anyhow::Result<()> {
        if let Some(root) = self.oracle_dir.parent() {
            oracles_root(root.parent().unwrap_or(Path::new(".")))?;
        }
        std::fs::create_dir_all(&self.oracle_dir)
            .with_context(|| format!("creating {}", self.oracle_dir.display()))?;
        let path = self.oracle_path(problem, preset, plan);
        let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
        super::oracle_cache::write(oracle, &tmp)?;
        std::fs::rename(&tmp, &path)
            .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
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
        Ok(Some(CachedSet { input, work }))
    }

    /// Stores set `plan`: shared tensors once each, then the set file.
    pub(super) fn store(
        &self,
        problem: &dyn Problem,
        preset: Preset,
        plan: &SetPlan,
        set: &InputSet,
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

/// The oracles' directory of the cache under `root` ([`ORACLES_DIR`]), made if need be and
/// private to the caller (mode 0700).
pub fn oracles_root(root: &Path) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let dir = root.join(ORACLES_DIR);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
        .with_context(|| format!("making {} private", dir.display()))?;
    Ok(dir)
}

/// The bytes free to an unprivileged writer on the file system holding `dir`.
pub(crate) fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs with a NUL-terminated path and a zeroed out-struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(path.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

/// The bytes of the files under `dir` (0 when it is not there).
fn bytes_under(dir: &Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .flatten()
            .map(|e| match e.metadata() {
                Ok(m) if m.is_dir() => bytes_under(&e.path()),
                Ok(m) => m.len(),
                Err(_) => 0,
            })
            .sum()
    })
}

/// What the writer of a [`StoreQueue`] writes: a set (with its work), or a set's oracle.
enum StoreJob {
    Set(SetPlan, InputSet, Work),
    Oracle(SetPlan, Arc<Oracle>),
}

/// Writes sets to an [`InputCache`] on a thread of its own, so the writes (gigabytes at `full`)
/// overlap the oracle, the upload and the next set's generation instead of coming between
/// them. Sets are written in the order submitted; [`StoreQueue::finish`] waits for the last.
pub(super) struct StoreQueue<'scope> {
    jobs: std::sync::mpsc::Sender<StoreJob>,
    writer: std::thread::ScopedJoinHandle<'scope, ()>,
    queued: std::cell::Cell<usize>,
}

impl<'scope> StoreQueue<'scope> {
    /// Starts the writer for `problem`'s sets in `cache` within `scope`. A set that cannot be
    /// written is reported and left out of the cache, never fatal.
    pub fn start<'env>(
        scope: &'scope std::thread::Scope<'scope, 'env>,
        cache: &'env InputCache,
        problem: &'env dyn Problem,
        preset: Preset,
    ) -> Self {
        let (jobs, queue) = std::sync::mpsc::channel::<StoreJob>();
        let writer = scope.spawn(move || {
            for job in queue {
                let (plan, done) = match job {
                    StoreJob::Set(plan, input, work) => {
                        let done = cache.store(problem, preset, &plan, &input, &work);
                        (plan, done)
                    }
                    StoreJob::Oracle(plan, oracle) => {
                        let done = cache.store_oracle(problem, preset, &plan, &oracle);
                        (plan, done)
                    }
                };
                if let Err(e) = done {
                    eprintln!("warning: input cache: {e:#}; {} not cached", plan.label);
                }
            }
        });
        StoreQueue {
            jobs,
            writer,
            queued: 0.into(),
        }
    }

    /// Queues set `plan` (its tensors are shared, not copied).
    pub(crate) fn submit(&self, plan: &SetPlan, input: &InputSet, work: &Work) {
        // The writer ends only when the queue closes, so a send cannot fail while it runs; if
        // it panicked, finish reports that.
        let _ = self
            .jobs
            .send(StoreJob::Set(plan.clone(), input.clone(), *work));
        self.queued.set(self.queued.get() + 1);
    }

    /// Queues the oracle of set `plan` (shared, not copied).
    pub(crate) fn submit_oracle(&self, plan: &SetPlan, oracle: &Arc<Oracle>) {
        let _ = self
            .jobs
            .send(StoreJob::Oracle(plan.clone(), Arc::clone(oracle)));
        self.queued.set(self.queued.get() + 1);
    }

    /// How many sets were queued.
    pub(crate) fn queued(&self) -> usize {
        self.queued.get()
    }

    /// Waits until every queued set is written.
    pub(crate) fn finish(self) -> anyhow::Result<()> {
        drop(self.jobs);
        self.writer
            .join()
            .map_err(|_| anyhow::anyhow!("the input cache's writer panicked"))
    }
}

/// What set `plan` of `problem` depends on, hashed: the name of its files.
fn set_key(problem: &dyn Problem, preset: Preset, plan: &SetPlan) -> String {
    let sizes = serde_json::to_string(&plan.sizes).unwrap_or_default();
    hex_hash(&format!(
        "{}|{}|{}|{sizes}|{}|{}|{:?}|{}",
        problem.name(),
        preset.name(),
        plan.label,
        plan.seed,
        plan.table_seed,
        plan.special,
        build_identity()
    ))
}

/// 64 bits of hash of `text`, as 16 hex digits.
fn hex_hash(text: &str) -> String {
    format!("{:016x}", data_gen::seed::derive_str(0, text))
}

fn parse<T: serde::de::DeserializeOwned>(path: &Path, key: &str, text: &str) -> anyhow::Result<T> {
    serde_json::from_str(text).with_context(|| format!("{}: metadata `{key}`", path.display()))
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
    fn each_shape_of_a_problem_has_a_directory_of_its_own() {
        let p = bench_problems::find_problem("fm_interaction").unwrap();
        let root = Path::new("/cache");
        let other = bench_problems::at_shape(p, Preset::Ci, "k5").unwrap();
        let default = bench_problems::at_shape(p, Preset::Ci, "default").unwrap();
        assert_eq!(InputCache::new(root, p).dir(), root.join("fm_interaction"));
        assert_eq!(
            InputCache::new(root, &default).dir(),
            root.join("fm_interaction")
        );
        assert_eq!(
            InputCache::new(root, &other).dir(),
            root.join("fm_interaction@k5")
        );
    }

    /// Oracles live apart from the sets KernelBench answers read, in a directory private to
    /// the caller, and go with their unit's files.
    #[test]
    fn oracles_are_stored_apart_in_a_private_directory() {
        use std::os::unix::fs::PermissionsExt;
        let problem = bench_problems::find_problem("fm_interaction").unwrap();
        let root = data_gen::tensor::scratch_path("oracle-cache");
        let cache = InputCache::new(&root, problem);
        let plan = &super::super::config::ci_config(1, 0).input_sets(problem)[0];
        let set = problem
            .generate(Preset::Ci, &plan.sizes, plan.seeds())
            .unwrap();
        let oracle = problem.oracle(&set).unwrap();
        cache
            .store_oracle(problem, Preset::Ci, plan, &oracle)
            .unwrap();
        let back = cache
            .load_oracle(problem, Preset::Ci, plan)
            .unwrap()
            .unwrap();
        assert_eq!(back.len(), oracle.len());
        let oracles = root.join(ORACLES_DIR);
        let mode = std::fs::metadata(&oracles).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{oracles:?}");
        let in_sets = std::fs::read_dir(cache.dir()).map_or(0, |d| d.count());
        assert_eq!(in_sets, 0, "no oracle beside the sets");
        cache.remove();
        assert!(cache
            .load_oracle(problem, Preset::Ci, plan)
            .unwrap()
            .is_none());
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// A unit prepared ahead holds every set and oracle of its plan, readable by its worker; a
    /// second preparation into the same (kept) cache reads and makes nothing.
    #[test]
    fn a_unit_prepared_ahead_is_whole_and_not_made_twice() {
        let problem = bench_problems::find_problem("fm_interaction").unwrap();
        let root = data_gen::tensor::scratch_path("prepared-ahead");
        let cache = InputCache::new(&root, problem);
        let cfg = super::super::config::ci_config(2, 2);
        let phases = super::super::prepare_ahead(problem, cfg.clone(), &cache).unwrap();
        assert!(phases
            .0
            .contains_key(&crate::runner::activity::Phase::Generate));
        for plan in &cfg.input_sets(problem) {
            assert!(
                cache.load(problem, Preset::Ci, plan).unwrap().is_some(),
                "{}",
                plan.label
            );
            assert!(cache
                .load_oracle(problem, Preset::Ci, plan)
                .unwrap()
                .is_some());
        }
        let again = super::super::prepare_ahead(problem, cfg, &cache).unwrap();
        assert!(again.is_empty(), "{again:?}");
        let sets = std::fs::read_dir(cache.dir()).unwrap().flatten();
        let files: u64 = sets.map(|e| e.metadata().unwrap().len()).sum();
        assert!(cache.bytes() > files, "the oracles count too");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn sets_stored_by_the_queue_read_back_equal_and_share_their_table_once() {
        let problem = bench_problems::find_problem("embedding_backward_rowwise_adagrad").unwrap();
        let root = data_gen::tensor::scratch_path("input-cache");
        let cache = InputCache::new(&root, problem);
        let plans = super::super::config::ci_config(2, 0).input_sets(problem);
        let mut made = Vec::new();
        std::thread::scope(|scope| {
            let queue = StoreQueue::start(scope, &cache, problem, Preset::Ci);
            for plan in &plans[..2] {
                assert!(cache.load(problem, Preset::Ci, plan).unwrap().is_none());
                let set = problem
                    .generate(Preset::Ci, &plan.sizes, plan.seeds())
                    .unwrap();
                let work = problem.work(&set);
                queue.submit(plan, &set, &work);
                made.push((set, work));
            }
            assert_eq!(queue.queued(), 2);
            queue.finish().unwrap();
        });
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
        for (plan, (set, work)) in plans.iter().zip(&made) {
            let back = cache.load(problem, Preset::Ci, plan).unwrap().unwrap();
            assert_eq!(back.input.tensors, set.tensors);
            assert_eq!(
                (back.input.seed, &back.input.sizes, &back.input.scalars),
                (set.seed, &set.sizes, &set.scalars)
            );
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
