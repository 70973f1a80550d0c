//! Suite metrics over a run's records (DESIGN §8): win rate, median speedup over wins and over
//! correct candidates, geometric mean, fast_p, correctness rate — per candidate group.
use crate::record::{Record, Status};
use crate::stats;
use serde::Serialize;
use std::collections::BTreeMap;

/// The p values fast_p is reported at.
pub const FAST_P: [f64; 6] = [0.0, 0.5, 0.8, 1.0, 1.5, 2.0];

/// Aggregates of one group of candidates (e.g. `examples`).
#[derive(Clone, Debug, Serialize)]
pub struct GroupMetrics {
    pub group: String,
    /// Problems in the run.
    pub problems: usize,
    /// Problems where some candidate of the group wins.
    pub wins: usize,
    pub win_rate: f64,
    /// Median over winning problems of the best winning speedup.
    pub median_speedup_wins: Option<f64>,
    /// Median over correct candidates.
    pub median_speedup_correct: Option<f64>,
    pub geomean_speedup_correct: Option<f64>,
    /// Share of candidates that are correct and faster than p× the reference (KernelBench).
    pub fast_p: BTreeMap<String, f64>,
    pub candidates: usize,
    pub correct: usize,
    pub correctness_rate: f64,
    pub suspect: usize,
}

/// Metrics for every candidate group of `records` (reference records excluded; skipped ones
/// do not count as attempts).
pub fn summarize(records: &[Record], problems: usize) -> Vec<GroupMetrics> {
    let mut groups: BTreeMap<&str, Vec<&Record>> = BTreeMap::new();
    for r in records
        .iter()
        .filter(|r| !r.is_reference() && r.status != Status::Skipped)
    {
        groups.entry(&r.group).or_default().push(r);
    }
    groups
        .into_iter()
        .map(|(g, rs)| group_metrics(g, &rs, problems))
        .collect()
}

fn group_metrics(group: &str, rs: &[&Record], problems: usize) -> GroupMetrics {
    let mut best_win: BTreeMap<&str, f64> = BTreeMap::new();
    for r in rs.iter().filter(|r| r.win) {
        let s = r.speedup.as_ref().map(|s| s.median).unwrap_or(0.0);
        let e = best_win.entry(&r.problem).or_insert(0.0);
        *e = e.max(s);
    }
    let correct: Vec<f64> = rs
        .iter()
        .filter(|r| r.status == Status::Correct)
        .filter_map(|r| r.speedup.as_ref().map(|s| s.median))
        .collect();
    let wins: Vec<f64> = best_win.values().copied().collect();
    let opt = |v: f64| (!v.is_nan()).then_some(v);
    let fast_p = FAST_P
        .iter()
        .map(|&p| {
            let n = correct.iter().filter(|&&s| s > p).count();
            (format!("{p}"), n as f64 / rs.len().max(1) as f64)
        })
        .collect();
    GroupMetrics {
        group: group.to_string(),
        problems,
        wins: wins.len(),
        win_rate: wins.len() as f64 / problems.max(1) as f64,
        median_speedup_wins: opt(stats::median(&wins)),
        median_speedup_correct: opt(stats::median(&correct)),
        geomean_speedup_correct: opt(stats::geomean(&correct)),
        fast_p,
        candidates: rs.len(),
        correct: correct.len(),
        correctness_rate: correct.len() as f64 / rs.len().max(1) as f64,
        suspect: rs.iter().filter(|r| r.status == Status::Suspect).count(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Speedup;

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

    #[test]
    fn win_rate_and_medians() {
        let records = vec![
            rec("a", Status::Correct, 2.0, true),
            rec("b", Status::Correct, 0.5, false),
            rec("c", Status::Incorrect, 9.0, false),
            rec("d", Status::Suspect, 50.0, false),
        ];
        let m = &summarize(&records, 4)[0];
        assert_eq!(m.wins, 1);
        assert_eq!(m.win_rate, 0.25);
        assert_eq!(m.median_speedup_wins, Some(2.0));
        assert_eq!(m.median_speedup_correct, Some(1.25));
        assert!((m.geomean_speedup_correct.unwrap() - 1.0).abs() < 1e-12);
        assert_eq!(m.correct, 2);
        assert_eq!(m.suspect, 1);
        assert_eq!(m.fast_p["0"], 0.5, "correct share");
        assert_eq!(
            m.fast_p["1"], 0.25,
            "incorrect and suspect ones never count"
        );
    }
}
