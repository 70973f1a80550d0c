//! A unit of a run's work (one problem at one shape on one device: a chunk of its candidates,
//! maybe its reference and KernelBench answers) and what every unit of a run shares
//! ([`UnitContext`]): the types `units` (running them in order) and `answers` (a unit's
//! answers) both work on.
use super::ahead::AheadTotals;
use super::options::RunOptions;
use crate::candidate::Candidate;
use crate::kernelbench;
use crate::kernelbench::builds::AheadBuilds;
use crate::results::record::{Ceilings, Record, RecordLog};
use bench_problems::Problem;
use indicatif::ProgressBar;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// One problem's share of the work on one device: a chunk of its candidates (and, for the
/// problem's first chunk, the reference's record and the KernelBench answers).
#[derive(Clone)]
pub(super) struct Unit<'c> {
    pub(super) problem: &'static dyn Problem,
    pub(super) device: usize,
    /// Log the reference's record (else it is measured for the pairing only, and dropped).
    pub(super) keeps_reference: bool,
    pub(super) candidates: Vec<&'c Candidate>,
    pub(super) answers: Vec<&'c kernelbench::Answer>,
}

/// What every [`Unit`] of a run shares.
pub(super) struct UnitContext<'a> {
    pub(super) opts: &'a RunOptions,
    pub(super) exe: &'a Path,
    pub(super) secret_seed: u64,
    pub(super) ceilings: Option<Ceilings>,
    pub(super) log: &'a Mutex<RecordLog>,
    pub(super) bar: &'a ProgressBar,
    /// The (problem, origin) of the records a resumed run has already.
    pub(super) done: &'a BTreeSet<(String, String)>,
    pub(super) previous: &'a [Record],
    pub(super) cache_root: &'a Path,
    pub(super) per_device_cache: bool,
    pub(super) dir: &'a Path,
    pub(super) peer_file: &'a Path,
    pub(super) torch: bool,
    /// The KernelBench answers' builds, made ahead.
    pub(super) builds: &'a AheadBuilds,
    /// What a Triton candidate's compile must not see ([`crate::runner::worker::WorkerSpec`]).
    pub(super) sandbox_hide: &'a [PathBuf],
    /// Make each next unit's inputs while a unit is measured ([`super::ahead`]).
    pub(super) prepare_ahead: bool,
    pub(super) ahead_totals: &'a Mutex<AheadTotals>,
}
