//! Suite metrics over a run's records (docs/design.md §8): win rate, median speedup over wins and over
//! correct candidates, geometric mean, KernelBench's fast_p, correctness rate — per candidate
//! group, on three bases ([`Basis`]): over the Rust reference (paired speedups, always there),
//! over PyTorch eager (when eager was measured in the run) and over the `torch.compile`d Model
//! (when it was measured: `run --torch eager,compile`). [`Summary`] holds them all, headline
//! first, with the wins over the reference that lose to `torch.compile` ([`CompileLoss`]) and
//! the problems whose Model failed to compile.
use crate::evaluate::quantiles;
use crate::results::record::{PeerTime, Record, Status};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The p values fast_p is reported at.
pub(crate) const FAST_P: [f64; 6] = [0.0, 0.5, 0.8, 1.0, 1.5, 2.0];

/// What a speedup is over.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// The Rust reference kernel, timed interleaved with the candidate on the same inputs:
    /// [`Record::speedup`], a median of paired ratios with a bootstrap 95% interval.
    #[default]
    #[value(
        help = "The Rust reference kernel, timed interleaved with the candidate on the \
                    same inputs: a median of paired ratios with a bootstrap 95% interval"
    )]
    Reference,
    /// PyTorch eager on the same inputs (KernelBench's basis): paired
    /// ([`Record::speedup_eager`]) when eager was timed interleaved with the candidate in one
    /// process, else the unpaired ratio of eager's median ([`Record::pytorch`], timed in another
    /// process) to the candidate's.
    #[value(
        help = "PyTorch eager on the same inputs (KernelBench's basis): paired when eager \
                    was timed interleaved with the candidate in one process, else the unpaired \
                    ratio of eager's median (timed in another process) to the candidate's"
    )]
    Eager,
    /// The KernelBench `Model` under `torch.compile` on the same inputs (what a user gets
    /// without writing a kernel): always unpaired — the compiled Model's median
    /// ([`Record::pytorch_compile`], timed in another process) / the candidate's — so with no
    /// interval.
    #[value(
        help = "The KernelBench Model under torch.compile on the same inputs: always \
                    unpaired (the compiled Model's median, timed in another process, over the \
                    candidate's), so with no interval"
    )]
    Compile,
}

impl Basis {
    /// Every basis, in the default order.
    pub(crate) const ALL: [Basis; 3] = [Basis::Reference, Basis::Eager, Basis::Compile];

    /// `reference`, `eager` or `compile` (as `--basis` takes it).
    pub fn name(self) -> &'static str {
        match self {
            Basis::Reference => "reference",
            Basis::Eager => "eager",
            Basis::Compile => "compile",
        }
    }

    /// The basis named `name` (as [`Basis::name`] writes it).
    pub fn parse(name: &str) -> Option<Basis> {
        Basis::ALL.into_iter().find(|b| b.name() == name)
    }

    /// What the speedups are over, in words (table titles).
    pub fn describe(self) -> &'static str {
        match self {
            Basis::Reference => "over the Rust reference",
            Basis::Eager => "over PyTorch eager",
            Basis::Compile => "over torch.compile",
        }
    }

    /// The record's speedup on this basis. Reference: the median of [`Record::speedup`].
    /// Eager: the median of the paired [`Record::speedup_eager`] when present, else the
    /// unpaired ratio eager's median / the candidate's median (`pytorch.median_ms /
    /// timing.median_ms`), which carries no interval; `None` when eager was not measured (or
    /// the record has no timing). Compile: the unpaired ratio `pytorch_compile.median_ms /
    /// timing.median_ms` (no interval); `None` when the compiled Model was not measured or
    /// failed to compile. Candidates' records of a native run carry no `pytorch` or
    /// `pytorch_compile` of their own: see [`with_reference_peers`].
    pub fn speedup(&self, r: &Record) -> Option<f64> {
        match self {
            Basis::Reference => r.speedup.as_ref().map(|s| s.median),
            Basis::Eager => match &r.speedup_eager {
                Some(s) => Some(s.median),
                None => unpaired(r.pytorch.as_ref()?, r),
            },
            Basis::Compile => unpaired(r.pytorch_compile.as_ref()?, r),
        }
    }

    /// Whether the record is a win on this basis. Reference: [`Record::win`] (correct — so not
    /// suspect — and the paired speedup's lower 95% bound above the run's win threshold).
    /// Eager: correct and, when paired ([`Record::speedup_eager`]), the lower 95% bound above
    /// 1; when unpaired, [`unpaired_win`]. Compile: correct and [`unpaired_win`].
    pub fn win(&self, r: &Record) -> bool {
        match self {
            Basis::Reference => r.win,
            Basis::Eager => {
                r.status == Status::Correct
                    && match &r.speedup_eager {
                        Some(s) => s.ci_low > 1.0,
                        None => r.pytorch.as_ref().is_some_and(|p| unpaired_win(p, r)),
                    }
            }
            Basis::Compile => {
                r.status == Status::Correct
                    && r.pytorch_compile
                        .as_ref()
                        .is_some_and(|p| unpaired_win(p, r))
            }
        }
    }

    /// Whether the record has a measurement on this basis.
    fn measured(&self, r: &Record) -> bool {
        match self {
            Basis::Reference => true,
            Basis::Eager => r.pytorch.is_some() || r.speedup_eager.is_some(),
            Basis::Compile => r.pytorch_compile.is_some(),
        }
    }
}

/// PyTorch's median / the record's own median, when both are positive.
fn unpaired(peer: &PeerTime, r: &Record) -> Option<f64> {
    let own = r.timing.as_ref()?.median_ms;
    (own > 0.0 && peer.median_ms > 0.0).then(|| peer.median_ms / own)
}

/// A win over PyTorch timed in another process: the two spreads apart — PyTorch's 10th
/// percentile over the candidate's 90th above 1 — when the peer gave its spread (timings of
/// the same work a percent apart by noise are no win); for records without it, the ratio of
/// medians above 1 (a point estimate, not a bound).
pub(crate) fn unpaired_win(peer: &PeerTime, r: &Record) -> bool {
    let Some(t) = r.timing.as_ref() else {
        return false;
    };
    let usable = |v: f64| v.is_finite() && v > 0.0;
    match peer.p10_ms {
        Some(fast) => {
            usable(fast)
                && usable(t.p90_ms)
                && t.samples >= crate::kernelbench::MIN_UNPAIRED_SAMPLES
                && fast / t.p90_ms > 1.0
        }
        None => unpaired(peer, r).is_some_and(|s| s.is_finite() && s > 1.0),
    }
}

impl std::fmt::Display for Basis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `records` with each candidate's missing PyTorch times (per problem and shape) — [`Record::pytorch`] (eager) and
/// [`Record::pytorch_compile`] (with [`Record::pytorch_compile_error`]) — taken from its
/// problem's reference record: a native run (`run --torch`, `--peer`) puts PyTorch's times
/// beside the reference only, measured on the same inputs, so this is what [`Basis::Eager`]
/// and [`Basis::Compile`] need for their unpaired ratios. A time a record carries itself is
/// left as it is.
pub(crate) fn with_reference_peers(records: &[Record]) -> Vec<Record> {
    // Per problem, the last reference that has each (a pooled set has one reference a problem).
    let references = records.iter().filter(|r| r.is_reference());
    let eager: BTreeMap<String, &Record> = references
        .clone()
        .filter(|r| r.pytorch.is_some())
        .map(|r| (r.unit_key(), r))
        .collect();
    let compile: BTreeMap<String, &Record> = references
        .filter(|r| r.pytorch_compile.is_some() || r.pytorch_compile_error.is_some())
        .map(|r| (r.unit_key(), r))
        .collect();
    records
        .iter()
        .map(|r| {
            let mut r = r.clone();
            if r.pytorch.is_none() {
                r.pytorch = eager.get(&r.unit_key()).and_then(|e| e.pytorch.clone());
            }
            if r.pytorch_compile.is_none() && r.pytorch_compile_error.is_none() {
                if let Some(c) = compile.get(&r.unit_key()) {
                    r.pytorch_compile = c.pytorch_compile.clone();
                    r.pytorch_compile_error = c.pytorch_compile_error.clone();
                }
            }
            r
        })
        .collect()
}

/// The problems of `records` with a measurement on `basis` (any record of the problem, the
/// reference's included, has one).
fn measured_problems(records: &[Record], basis: Basis) -> BTreeSet<&str> {
    records
        .iter()
        .filter(|r| basis.measured(r))
        .map(|r| r.problem.as_str())
        .collect()
}

/// Aggregates of one group of candidates (e.g. `examples`) on one basis.
#[derive(Clone, Debug, Serialize)]
pub struct GroupMetrics {
    pub group: String,
    /// What the speedups are over.
    pub basis: Basis,
    /// Problems counted: the run's problems on the reference basis; on the eager (compile)
    /// basis, those of them where eager (the compiled Model) was measured.
    pub problems: usize,
    /// Problems where some candidate of the group wins ([`Basis::win`]).
    pub wins: usize,
    /// wins / problems.
    pub win_rate: f64,
    /// Median over winning problems of the best winning speedup.
    pub median_speedup_wins: Option<f64>,
    /// Median over correct candidates.
    pub median_speedup_correct: Option<f64>,
    pub geomean_speedup_correct: Option<f64>,
    /// KernelBench's fast_p, keyed by p as written (`"0"`, `"0.5"`, … for [`FAST_P`]): the
    /// fraction of the problems (`problems`, not of the candidates) for which the group has a
    /// correct candidate faster than p× on this basis; a problem counts once however many of
    /// the group's candidates answer it.
    pub fast_p: BTreeMap<String, f64>,
    pub candidates: usize,
    pub correct: usize,
    pub correctness_rate: f64,
    pub suspect: usize,
}

/// Metrics on `basis` for every candidate group of `records` (reference records excluded;
/// skipped ones do not count as attempts). `problems` is the run's problem count, the reference
/// basis's denominator; the eager and compile bases count only the problems of `records`
/// where eager (the compiled Model) was measured — a Model that failed to compile is not
/// measured. Candidates take PyTorch's times from their problem's reference
/// ([`with_reference_peers`]).
pub(crate) fn summarize(records: &[Record], problems: usize, basis: Basis) -> Vec<GroupMetrics> {
    let filled;
    let (records, problems) = match basis {
        Basis::Reference => (records, problems),
        Basis::Eager | Basis::Compile => {
            filled = with_reference_peers(records);
            let n = measured_problems(&filled, basis).len();
            (filled.as_slice(), n)
        }
    };
    let mut groups: BTreeMap<&str, Vec<&Record>> = BTreeMap::new();
    for r in records
        .iter()
        .filter(|r| !r.is_reference() && r.status != Status::Skipped)
    {
        groups.entry(&r.group).or_default().push(r);
    }
    groups
        .into_iter()
        .map(|(g, rs)| group_metrics(g, &rs, problems, basis))
        .collect()
}

fn group_metrics(group: &str, rs: &[&Record], problems: usize, basis: Basis) -> GroupMetrics {
    let mut best_win: BTreeMap<&str, f64> = BTreeMap::new();
    for r in rs.iter().filter(|r| basis.win(r)) {
        let s = basis.speedup(r).unwrap_or(0.0);
        let e = best_win.entry(&r.problem).or_insert(0.0);
        *e = e.max(s);
    }
    let correct: Vec<&Record> = rs
        .iter()
        .copied()
        .filter(|r| r.status == Status::Correct)
        .collect();
    let speedups: Vec<f64> = correct.iter().filter_map(|r| basis.speedup(r)).collect();
    let wins: Vec<f64> = best_win.values().copied().collect();
    let opt = |v: f64| (!v.is_nan()).then_some(v);
    let fast_p = FAST_P
        .iter()
        .map(|&p| {
            let solved: BTreeSet<&str> = correct
                .iter()
                .filter(|r| basis.speedup(r).is_some_and(|s| s > p))
                .map(|r| r.problem.as_str())
                .collect();
            (format!("{p}"), solved.len() as f64 / problems.max(1) as f64)
        })
        .collect();
    GroupMetrics {
        group: group.to_string(),
        basis,
        problems,
        wins: wins.len(),
        win_rate: wins.len() as f64 / problems.max(1) as f64,
        median_speedup_wins: opt(quantiles::median(&wins)),
        median_speedup_correct: opt(quantiles::median(&speedups)),
        geomean_speedup_correct: opt(quantiles::geomean(&speedups)),
        fast_p,
        candidates: rs.len(),
        correct: correct.len(),
        correctness_rate: correct.len() as f64 / rs.len().max(1) as f64,
        suspect: rs.iter().filter(|r| r.status == Status::Suspect).count(),
    }
}

/// A win over the reference that loses to `torch.compile`: the candidate beats the Rust
/// reference ([`Basis::Reference`]'s win) but is slower than the compiled Model (its
/// [`Basis::Compile`] speedup is below 1) — a kernel a user would do better without.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CompileLoss {
    pub problem: String,
    pub group: String,
    pub candidate: String,
    /// The paired median speedup over the reference.
    pub speedup_reference: f64,
    /// The compiled Model's median / the candidate's (below 1).
    pub speedup_compile: f64,
}

/// The wins over the reference among `records` that lose to `torch.compile` ([`CompileLoss`]),
/// in record order. Candidates take the compiled Model's time from their problem's reference.
pub(crate) fn compile_losses(records: &[Record]) -> Vec<CompileLoss> {
    with_reference_peers(records)
        .iter()
        .filter(|r| !r.is_reference() && Basis::Reference.win(r))
        .filter_map(|r| {
            let speedup_compile = Basis::Compile.speedup(r).filter(|&s| s < 1.0)?;
            Some(CompileLoss {
                problem: r.problem.clone(),
                group: r.group.clone(),
                candidate: r.candidate.clone(),
                speedup_reference: r.speedup.as_ref().map_or(f64::NAN, |s| s.median),
                speedup_compile,
            })
        })
        .collect()
}

/// Whether `r` is one of [`compile_losses`]: a win over the reference whose speedup over
/// `torch.compile` is below 1. `r` must carry the compiled Model's time (a candidate's record
/// after [`with_reference_peers`]).
pub(crate) fn loses_to_compile(r: &Record) -> bool {
    !r.is_reference()
        && Basis::Reference.win(r)
        && Basis::Compile.speedup(r).is_some_and(|s| s < 1.0)
}

/// The problems of `records` whose Model failed to compile, with why (from their reference
/// records' [`Record::pytorch_compile_error`]).
pub(crate) fn compile_failures(records: &[Record]) -> BTreeMap<String, String> {
    records
        .iter()
        .filter(|r| r.is_reference() && r.pytorch_compile.is_none())
        .filter_map(|r| Some((r.problem.clone(), r.pytorch_compile_error.clone()?)))
        .collect()
}

/// A run's group metrics on every basis measured, the headline first.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// The basis asked for (`--basis`); the reference stands in when that basis was not
    /// measured.
    pub headline: Basis,
    /// The run's problems.
    pub problems: usize,
    /// Problems where eager was measured (0: eager was not measured in the run).
    pub eager_problems: usize,
    /// Problems where the `torch.compile`d Model was measured (0: not measured in the run, or
    /// no Model compiled).
    pub compile_problems: usize,
    /// Over the Rust reference (always).
    pub reference: Vec<GroupMetrics>,
    /// Over PyTorch eager, when eager was measured for some problem.
    pub eager: Option<Vec<GroupMetrics>>,
    /// Over the `torch.compile`d Model, when it was measured for some problem.
    pub compile: Option<Vec<GroupMetrics>>,
    /// Wins over the reference that lose to `torch.compile` ([`compile_losses`]).
    pub compile_losses: Vec<CompileLoss>,
    /// Problems whose Model failed to compile, with why ([`compile_failures`]): not on the
    /// compile basis.
    pub compile_failures: BTreeMap<String, String>,
}

impl Summary {
    /// Every measured basis's metrics of `records` ([`summarize`]), `headline` first.
    pub fn new(records: &[Record], problems: usize, headline: Basis) -> Summary {
        let eager_problems = measured_problems(records, Basis::Eager).len();
        let compile_problems = measured_problems(records, Basis::Compile).len();
        Summary {
            headline,
            problems,
            eager_problems,
            compile_problems,
            reference: summarize(records, problems, Basis::Reference),
            eager: (eager_problems > 0).then(|| summarize(records, problems, Basis::Eager)),
            compile: (compile_problems > 0).then(|| summarize(records, problems, Basis::Compile)),
            compile_losses: compile_losses(records),
            compile_failures: compile_failures(records),
        }
    }

    /// The metrics on `basis`, when it was measured.
    pub fn metrics(&self, basis: Basis) -> Option<&[GroupMetrics]> {
        match basis {
            Basis::Reference => Some(self.reference.as_slice()),
            Basis::Eager => self.eager.as_deref(),
            Basis::Compile => self.compile.as_deref(),
        }
    }

    #[cfg(test)]
    /// Problems measured on `basis` (the run's problems for the reference).
    pub(crate) fn measured_problems(&self, basis: Basis) -> usize {
        match basis {
            Basis::Reference => self.problems,
            Basis::Eager => self.eager_problems,
            Basis::Compile => self.compile_problems,
        }
    }

    /// The headline basis: the one asked for when it was measured, else the reference.
    pub(crate) fn headline_basis(&self) -> Basis {
        if self.metrics(self.headline).is_some() {
            self.headline
        } else {
            Basis::Reference
        }
    }

    /// The bases measured, with their metrics: the headline first ([`Self::headline_basis`]),
    /// then the others in [`Basis::ALL`]'s order.
    pub fn tables(&self) -> Vec<(Basis, &[GroupMetrics])> {
        let head = self.headline_basis();
        std::iter::once(head)
            .chain(Basis::ALL.into_iter().filter(|&b| b != head))
            .filter_map(|b| Some((b, self.metrics(b)?)))
            .collect()
    }

    /// The headline basis's metrics (the first of [`Self::tables`]).
    pub(crate) fn headline_metrics(&self) -> (Basis, &[GroupMetrics]) {
        self.tables()[0]
    }
}

#[cfg(test)]
mod tests;
