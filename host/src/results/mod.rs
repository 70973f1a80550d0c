//! A result set on disk: `run.json` as the typed [`RunMeta`] (read once, written whole and
//! atomically), beside the records of `results.jsonl` ([`crate::results::record`]) and the secret seed's
//! file ([`crate::results::run_dir`]); several sets pooled into one body of records ([`pool`]), and the
//! shards of one run read together ([`shards`]).
pub mod derived;
pub mod meta;
pub mod pool;
pub mod record;
pub mod run_dir;
pub mod shards;

pub(crate) use meta::{RunMeta, SecretSeed, ShardMeta};

pub use pool::{emulator_caveat, pool_runs, warn_emulator_sets, EMULATOR_CAVEAT};

use std::path::Path;

/// The directory of the result set at `path` (a set's directory, or a file in it such as its
/// `results.jsonl`).
pub(crate) fn set_dir(path: &Path) -> &Path {
    if path.is_dir() {
        path
    } else {
        path.parent().unwrap_or(Path::new("."))
    }
}
