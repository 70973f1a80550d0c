//! Suite metrics over a run's records (DESIGN §8): win rate, median speedup over wins and over
//! correct candidates, geometric mean, KernelBench's fast_p, correctness rate — per candidate
//! group, on two bases ([`Basis`]): over the Rust reference (paired speedups, always there) and
//! over PyTorch eager (when eager was measured in the run). [`Summary`] holds both, headline
//! first.
use crate::record::{Record, Status};
use crate::stats;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The p values fast_p is reported at.
pub const FAST_P: [f64; 6] = [0.0, 0.5, 0.8, 1.0, 1.5, 2.0];

/// What a speedup is over.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// The Rust reference kernel, timed interleaved with the candidate on the same inputs:
    /// [`Record::speedup`], a median of paired ratios with a bootstrap 95% interval.
    #[default]
    Reference,
    /// PyTorch eager on the same inputs (KernelBench's basis): paired
    /// ([`Record::speedup_eager`]) when eager was timed interleaved with the candidate in one
    /// process, else the unpaired ratio of eager's median ([`Record::pytorch`], timed in another
    /// process) to the candidate's.
    Eager,
}

impl Basis {
    /// Both bases, in the default order.
    pub const ALL: [Basis; 2] = [Basis::Reference, Basis::Eager];

    /// `reference` or `eager` (as `--basis` takes it).
    pub fn name(self) -> &'static str {
        match self {
            Basis::Reference => "reference",
            Basis::Eager => "eager",
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
        }
    }

    /// The record's speedup on this basis. Reference: the median of [`Record::speedup`].
    /// Eager: the median of the paired [`Record::speedup_eager`] when present, else the
    /// unpaired ratio eager's median / the candidate's median (`pytorch.median_ms /
    /// timing.median_ms`), which carries no interval; `None` when eager was not measured (or
    /// the record has no timing). Candidates' records of a native run carry no `pytorch` of
    /// their own: see [`with_reference_eager`].
    pub fn speedup(&self, r: &Record) -> Option<f64> {
        match self {
            Basis::Reference => r.speedup.as_ref().map(|s| s.median),
            Basis::Eager => match &r.speedup_eager {
                Some(s) => Some(s.median),
                None => {
                    let eager = r.pytorch.as_ref()?.median_ms;
                    let own = r.timing.as_ref()?.median_ms;
                    (own > 0.0 && eager > 0.0).then(|| eager / own)
                }
            },
        }
    }

    /// Whether the record is a win on this basis. Reference: [`Record::win`] (correct — so not
    /// suspect — and the paired speedup's lower 95% bound above the run's win threshold).
    /// Eager: correct and, when paired ([`Record::speedup_eager`]), the lower 95% bound above
    /// 1; when unpaired, the ratio eager / candidate above 1 — that ratio carries no interval,
    /// so an unpaired eager win is a point estimate, not a bound.
    pub fn win(&self, r: &Record) -> bool {
        match self {
            Basis::Reference => r.win,
            Basis::Eager => {
                r.status == Status::Correct
                    && match &r.speedup_eager {
                        Some(s) => s.ci_low > 1.0,
                        None => self.speedup(r).is_some_and(|s| s > 1.0),
                    }
            }
        }
    }

    /// Whether the record has a measurement on this basis.
    fn measured(&self, r: &Record) -> bool {
        match self {
            Basis::Reference => true,
            Basis::Eager => r.pytorch.is_some() || r.speedup_eager.is_some(),
        }
    }
}

impl std::fmt::Display for Basis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `records` with each candidate's missing [`Record::pytorch`] taken from its problem's
/// reference record: a native run (`run --torch`, `--peer`) puts eager's time beside the
/// reference only, measured on the same inputs, so this is what [`Basis::Eager`] needs for the
/// unpaired ratio. Records that carry their own are left as they are.
pub fn with_reference_eager(records: &[Record]) -> Vec<Record> {
    let eager: BTreeMap<&str, &crate::record::PeerTime> = records
        .iter()
        .filter(|r| r.is_reference())
        .filter_map(|r| Some((r.problem.as_str(), r.pytorch.as_ref()?)))
        .collect();
    records
        .iter()
        .map(|r| {
            let mut r = r.clone();
            if r.pytorch.is_none() {
                r.pytorch = eager.get(r.problem.as_str()).map(|&p| p.clone());
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
    /// Problems counted: the run's problems on the reference basis; on the eager basis, those
    /// of them where eager was measured.
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
/// basis's denominator; the eager basis counts only the problems of `records` where eager was
/// measured. Candidates take eager's time from their problem's reference
/// ([`with_reference_eager`]).
pub fn summarize(records: &[Record], problems: usize, basis: Basis) -> Vec<GroupMetrics> {
    let filled;
    let (records, problems) = match basis {
        Basis::Reference => (records, problems),
        Basis::Eager => {
            filled = with_reference_eager(records);
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
        median_speedup_wins: opt(stats::median(&wins)),
        median_speedup_correct: opt(stats::median(&speedups)),
        geomean_speedup_correct: opt(stats::geomean(&speedups)),
        fast_p,
        candidates: rs.len(),
        correct: correct.len(),
        correctness_rate: correct.len() as f64 / rs.len().max(1) as f64,
        suspect: rs.iter().filter(|r| r.status == Status::Suspect).count(),
    }
}

/// A run's group metrics on both bases, the headline first.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// The basis asked for (`--basis`); the reference stands in when eager was not measured.
    pub headline: Basis,
    /// The run's problems.
    pub problems: usize,
    /// Problems where eager was measured (0: eager was not measured in the run).
    pub eager_problems: usize,
    /// Over the Rust reference (always).
    pub reference: Vec<GroupMetrics>,
    /// Over PyTorch eager, when eager was measured for some problem.
    pub eager: Option<Vec<GroupMetrics>>,
}

impl Summary {
    /// Both bases' metrics of `records` ([`summarize`]), `headline` first.
    pub fn new(records: &[Record], problems: usize, headline: Basis) -> Summary {
        let eager_problems = measured_problems(records, Basis::Eager).len();
        Summary {
            headline,
            problems,
            eager_problems,
            reference: summarize(records, problems, Basis::Reference),
            eager: (eager_problems > 0).then(|| summarize(records, problems, Basis::Eager)),
        }
    }

    /// The bases measured, with their metrics: the headline first (the reference when eager
    /// was asked for but not measured), then the other.
    pub fn tables(&self) -> Vec<(Basis, &[GroupMetrics])> {
        let reference = (Basis::Reference, self.reference.as_slice());
        match &self.eager {
            None => vec![reference],
            Some(e) => {
                let eager = (Basis::Eager, e.as_slice());
                match self.headline {
                    Basis::Reference => vec![reference, eager],
                    Basis::Eager => vec![eager, reference],
                }
            }
        }
    }

    /// The headline basis's metrics (the first of [`Self::tables`]).
    pub fn headline_metrics(&self) -> (Basis, &[GroupMetrics]) {
        self.tables()[0]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{PeerTime, Speedup, Timing};

    fn rec(problem: &str, status: Status, speedup: f64, win: bool) -> Record {
        let mut r = Record::new(problem, "c", "examples", "x");
        r.status = status;
        r.speedup = Some(Speedup {
            median: speedup,
            ci_low: speedup * 0.99,
            ci_high: speedup * 1.01,
            pairs: 30,
        });
        r.win = win;
        r
    }

    fn timed(mut r: Record, ms: f64) -> Record {
        r.timing = Some(Timing {
            median_ms: ms,
            ..Default::default()
        });
        r
    }

    fn eager(ms: f64) -> Option<PeerTime> {
        Some(PeerTime {
            median_ms: ms,
            reference_over_pytorch: 1.0,
            source: "test".into(),
        })
    }

    fn paired(median: f64, ci_low: f64) -> Option<Speedup> {
        Some(Speedup {
            median,
            ci_low,
            ci_high: median + 0.1,
            pairs: 40,
        })
    }

    fn reference(problem: &str, eager_ms: Option<f64>) -> Record {
        let mut r = timed(
            Record::new(problem, "reference", "reference", "reference"),
            1.0,
        );
        r.status = Status::Correct;
        r.pytorch = eager_ms.and_then(eager);
        r
    }

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-12)
    }

    #[test]
    fn win_rate_and_medians() {
        let records = vec![
            rec("a", Status::Correct, 2.0, true),
            rec("b", Status::Correct, 0.5, false),
            rec("c", Status::Incorrect, 9.0, false),
            rec("d", Status::Suspect, 50.0, false),
        ];
        let m = &summarize(&records, 4, Basis::Reference)[0];
        assert_eq!(m.basis, Basis::Reference);
        assert_eq!(m.wins, 1);
        assert_eq!(m.win_rate, 0.25);
        assert_eq!(m.median_speedup_wins, Some(2.0));
        assert_eq!(m.median_speedup_correct, Some(1.25));
        assert!((m.geomean_speedup_correct.unwrap() - 1.0).abs() < 1e-12);
        assert_eq!(m.correct, 2);
        assert_eq!(m.suspect, 1);
        assert_eq!(m.fast_p["0"], 0.5, "a and b of the 4 problems");
        assert_eq!(
            m.fast_p["1"], 0.25,
            "incorrect and suspect ones never count"
        );
    }

    #[test]
    fn eager_speedup_is_paired_when_present_else_the_unpaired_ratio() {
        let b = Basis::Eager;
        // Unpaired: eager 1.0 ms / candidate 0.5 ms = 2.
        let mut fast = timed(rec("a", Status::Correct, 1.5, true), 0.5);
        fast.pytorch = eager(1.0);
        assert_eq!(b.speedup(&fast), Some(2.0));
        assert!(b.win(&fast));
        assert_eq!(Basis::Reference.speedup(&fast), Some(1.5));
        // Unpaired 1.0 / 2.0 = 0.5: a loss to eager, though a win over the reference.
        let mut slow = timed(rec("a", Status::Correct, 1.2, true), 2.0);
        slow.pytorch = eager(1.0);
        assert_eq!(b.speedup(&slow), Some(0.5));
        assert!(!b.win(&slow));
        assert!(Basis::Reference.win(&slow));
        // Paired wins over the unpaired ratio (2.0 here): 1.2 with its lower bound 0.98 < 1.
        let mut unsure = fast.clone();
        unsure.speedup_eager = paired(1.2, 0.98);
        assert_eq!(b.speedup(&unsure), Some(1.2));
        assert!(!b.win(&unsure), "the paired lower bound is not above 1");
        let mut sure = unsure.clone();
        sure.speedup_eager = paired(1.1, 1.02);
        assert!(b.win(&sure));
        // Paired with no eager time or timing at all still counts.
        let mut python = Record::new("a", "k", "kernelbench", "x");
        python.status = Status::Correct;
        python.speedup_eager = paired(3.0, 2.5);
        assert_eq!(b.speedup(&python), Some(3.0));
        assert!(b.win(&python));
        assert_eq!(Basis::Reference.speedup(&python), None);
        // Eager not measured.
        let none = timed(rec("a", Status::Correct, 3.0, true), 0.5);
        assert_eq!(b.speedup(&none), None);
        assert!(!b.win(&none));
        // Suspect and incorrect never win, however fast.
        let mut suspect = timed(rec("a", Status::Suspect, 90.0, false), 0.01);
        suspect.pytorch = eager(1.0);
        assert_eq!(b.speedup(&suspect), Some(100.0));
        assert!(!b.win(&suspect));
        let mut wrong = suspect.clone();
        wrong.status = Status::Incorrect;
        wrong.speedup_eager = paired(5.0, 4.0);
        assert!(!b.win(&wrong));
    }

    /// Problems a, b, c have eager times (on their references); d has none. Candidates of one
    /// group: several per problem.
    fn run() -> Vec<Record> {
        let cand = |p: &str, status, ms, sp: f64, win| {
            let mut r = timed(rec(p, status, sp, win), ms);
            r.pytorch = None;
            r
        };
        let mut c1 = cand("c", Status::Correct, 0.9, 1.1, true);
        c1.speedup_eager = paired(1.5, 1.2); // the unpaired 1.0 / 0.9 is not used
        vec![
            reference("a", Some(1.0)),
            cand("a", Status::Correct, 0.5, 1.8, true), // eager 2
            cand("a", Status::Correct, 0.25, 3.6, true), // eager 4
            cand("a", Status::Suspect, 0.01, 90.0, false), // eager 100, never counts
            reference("b", Some(2.0)),
            cand("b", Status::Correct, 4.0, 0.45, false), // eager 0.5
            cand("b", Status::Incorrect, 0.5, 3.6, false), // eager 4, never counts
            reference("c", Some(1.0)),
            c1, // eager 1.5 (paired)
            reference("d", None),
            cand("d", Status::Correct, 1.0, 3.0, true), // no eager
        ]
    }

    #[test]
    fn eager_metrics_count_only_problems_where_eager_was_measured() {
        let m = &summarize(&run(), 4, Basis::Eager)[0];
        assert_eq!(m.basis, Basis::Eager);
        assert_eq!(m.problems, 3, "d had no eager time");
        assert_eq!(m.wins, 2, "a (best 4) and c (paired 1.5)");
        assert!((m.win_rate - 2.0 / 3.0).abs() < 1e-12);
        assert!(close(m.median_speedup_wins, 2.75));
        // Correct candidates with an eager speedup: 2, 4, 0.5, 1.5 (d's has none).
        assert!(close(m.median_speedup_correct, 1.75));
        assert!(close(m.geomean_speedup_correct, 6f64.powf(0.25)));
        assert_eq!((m.candidates, m.correct, m.suspect), (7, 5, 1));
        let third = 1.0 / 3.0;
        for (p, want) in [
            ("0", 1.0),
            ("0.5", 2.0 * third),
            ("0.8", 2.0 * third),
            ("1", 2.0 * third),
            ("1.5", third),
            ("2", third),
        ] {
            assert!(
                (m.fast_p[p] - want).abs() < 1e-12,
                "fast_{p}: {}",
                m.fast_p[p]
            );
        }
    }

    #[test]
    fn fast_p_is_kernelbench_s_share_of_problems_not_of_candidates() {
        let m = &summarize(&run(), 4, Basis::Reference)[0];
        assert_eq!(m.problems, 4);
        assert_eq!(m.wins, 3, "a, c, d");
        assert_eq!(m.median_speedup_wins, Some(3.0));
        assert_eq!(m.median_speedup_correct, Some(1.8));
        // a counts once though two of its candidates beat 1x (the candidate share is 4/7).
        assert_eq!(m.fast_p["1"], 0.75);
        assert_eq!(m.fast_p["2"], 0.5, "a (3.6) and d (3.0)");
        assert_eq!(m.fast_p["0"], 1.0);
        assert_eq!(m.fast_p["1.5"], 0.5, "c's 1.1 does not count");
        assert_eq!(
            m.fast_p.keys().collect::<Vec<_>>(),
            ["0", "0.5", "0.8", "1", "1.5", "2"]
        );
    }

    #[test]
    fn the_summary_puts_the_headline_first_and_drops_eager_when_unmeasured() {
        let records = run();
        let s = Summary::new(&records, 4, Basis::Eager);
        assert_eq!(s.eager_problems, 3);
        let order: Vec<Basis> = s.tables().iter().map(|t| t.0).collect();
        assert_eq!(order, [Basis::Eager, Basis::Reference]);
        assert_eq!(s.headline_metrics().1[0].problems, 3);
        let s = Summary::new(&records, 4, Basis::Reference);
        let order: Vec<Basis> = s.tables().iter().map(|t| t.0).collect();
        assert_eq!(order, [Basis::Reference, Basis::Eager]);
        // No eager anywhere: the reference alone, even when eager is asked for.
        let native: Vec<Record> = records
            .into_iter()
            .map(|mut r| {
                r.pytorch = None;
                r.speedup_eager = None;
                r
            })
            .collect();
        let s = Summary::new(&native, 4, Basis::Eager);
        assert_eq!(s.eager_problems, 0);
        assert!(s.eager.is_none());
        let order: Vec<Basis> = s.tables().iter().map(|t| t.0).collect();
        assert_eq!(order, [Basis::Reference]);
    }

    #[test]
    fn candidates_take_eager_from_their_problem_s_reference_unless_they_have_their_own() {
        let mut own = timed(rec("a", Status::Correct, 1.0, false), 1.0);
        own.pytorch = eager(5.0);
        let records = vec![
            reference("a", Some(1.0)),
            timed(rec("a", Status::Correct, 1.0, false), 0.5),
            own,
            timed(rec("b", Status::Correct, 1.0, false), 0.5),
        ];
        let filled = with_reference_eager(&records);
        let got: Vec<Option<f64>> = filled.iter().map(|r| Basis::Eager.speedup(r)).collect();
        assert_eq!(got, [Some(1.0), Some(2.0), Some(5.0), None]);
    }

    #[test]
    fn basis_names_parse() {
        assert_eq!(Basis::parse("eager"), Some(Basis::Eager));
        assert_eq!(Basis::parse("reference"), Some(Basis::Reference));
        assert_eq!(Basis::parse("torch"), None);
        assert_eq!(Basis::default(), Basis::Reference);
        assert_eq!(Basis::Eager.to_string(), "eager");
        assert_eq!(serde_json::to_string(&Basis::Eager).unwrap(), "\"eager\"");
    }
}
