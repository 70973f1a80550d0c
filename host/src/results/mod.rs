//! A result set on disk: `run.json` as the typed [`RunMeta`] (read once, written whole and
//! atomically), beside the records of `results.jsonl` ([`crate::record`]) and the secret seed's
//! file ([`crate::run_dir`]).
pub mod meta;

pub use meta::{RunMeta, SecretSeed, ShardMeta};
