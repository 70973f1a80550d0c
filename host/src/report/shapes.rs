//! A problem's figures over its shapes ([`by_problem`]): a run records each candidate at each
//! shape of its problem; every table, metric and projection reads one record per (problem,
//! candidate) whose times and speedups are geometric means over the shapes, whose status is
//! `correct` only when every shape's is, and which keeps each shape's figures
//! ([`Record::shapes`]).
//!
//! The interval of a geometric-mean speedup: on the log scale, each side of each shape's paired
//! 95% interval taken as 1.96 standard errors of its own side (a skewed interval keeps its
//! skew), the shapes' errors added in quadrature: low `exp(mean ln m − √(Σ (ln m − ln lo)²) / S)`,
//! high likewise. The shapes are measured apart, so their errors are independent. A shape with
//! no usable interval leaves the mean with none (no win), and a single shape keeps its own.
use crate::report::metrics::{with_reference_peers, Basis};
use crate::results::record::{PeerTime, Record, ShapeFigure, Speedup, Status, Timing};

/// `records` (one per measured shape) as one record per (problem, origin), in the order each
/// first appears ([`crate::report::shapes`]): PyTorch's times are first put beside each
/// candidate from its shape's reference ([`with_reference_peers`]). A win over the reference
/// needs every shape correct and the geometric mean's lower bound above `win_threshold`. A
/// problem measured at one shape keeps its records as they are.
pub(crate) fn by_problem(records: &[Record], win_threshold: f64) -> Vec<Record> {
    let filled = with_reference_peers(records);
    // The shapes each problem was measured at (a candidate that failed at one shape is not
    // run at the next: its record stands for the problem).
    let mut measured: Vec<(&str, Vec<&str>)> = Vec::new();
    for r in &filled {
        match measured.iter_mut().find(|(p, _)| *p == r.problem) {
            Some((_, shapes)) if !shapes.contains(&r.shape_name()) => shapes.push(r.shape_name()),
            Some(_) => {}
            None => measured.push((&r.problem, vec![r.shape_name()])),
        }
    }
    let shapes_of = |problem: &str| {
        measured
            .iter()
            .find(|(p, _)| *p == problem)
            .map_or(1, |(_, s)| s.len())
    };
    let mut groups: Vec<Vec<&Record>> = Vec::new();
    for r in &filled {
        match groups
            .iter_mut()
            .find(|g| g[0].problem == r.problem && g[0].origin == r.origin && g[0].group == r.group)
        {
            Some(g) => g.push(r),
            None => groups.push(vec![r]),
        }
    }
    groups
        .into_iter()
        .map(|g| match g.as_slice() {
            [one] if shapes_of(&one.problem) == 1 || is_answer(one) => (*one).clone(),
            shapes => combine(shapes, shapes_of(&shapes[0].problem), win_threshold),
        })
        .collect()
}

/// A KernelBench answer: evaluated at the default shape only (its file's `get_inputs` is one
/// shape), its record kept as it is.
fn is_answer(r: &Record) -> bool {
    r.origin.starts_with(crate::kernelbench::ORIGIN_PREFIX)
}

/// The shapes' records of one (problem, origin) as one; `measured` is how many shapes the
/// problem was measured at. Correct only when correct at every one of them: a candidate
/// correct at fewer (an interrupted run) is `skipped`, saying which shapes are missing.
fn combine(shapes: &[&Record], measured: usize, win_threshold: f64) -> Record {
    let first = shapes[0];
    let failed = shapes.iter().find(|r| r.status != Status::Correct);
    let mut r = Record {
        shape: None,
        status: failed.map_or(Status::Correct, |f| f.status),
        message: failed.map_or(String::new(), |f| {
            let everywhere = shapes.len() == measured
                && shapes
                    .iter()
                    .all(|s| s.status == f.status && s.message == f.message);
            match everywhere {
                true => f.message.clone(),
                false => format!("shape {}: {}", f.shape_name(), f.message),
            }
        }),
        checks: shapes
            .iter()
            .flat_map(|s| {
                s.checks.iter().cloned().map(|mut c| {
                    c.set = format!("{}/{}", s.shape_name(), c.set);
                    c
                })
            })
            .collect(),
        floor_ms: geomean_of(shapes, |s| s.floor_ms),
        timing: timing_of(shapes, |s| s.timing.as_ref()),
        reference_timing: timing_of(shapes, |s| s.reference_timing.as_ref()),
        speedup: speedup_of(shapes, |s| s.speedup.as_ref()),
        speedup_eager: speedup_of(shapes, |s| s.speedup_eager.as_ref()),
        pytorch: peer_of(shapes, |s| s.pytorch.as_ref()),
        pytorch_compile: peer_of(shapes, |s| s.pytorch_compile.as_ref()),
        pytorch_compile_error: shapes.iter().find_map(|s| s.pytorch_compile_error.clone()),
        phases: shapes
            .iter()
            .filter_map(|s| s.phases.as_ref())
            .fold(None, |acc, p| {
                let mut acc = acc.unwrap_or_default();
                crate::runner::activity::PhaseTimes::add(&mut acc, p);
                Some(acc)
            }),
        timed_runs_checked: shapes.iter().map(|s| s.timed_runs_checked).sum(),
        shapes: shapes.iter().map(|s| figure(s)).collect(),
        ..first.clone()
    };
    if r.status == Status::Correct && shapes.len() < measured {
        r.status = Status::Skipped;
        r.message = format!(
            "measured at {} of the problem's {measured} shapes ({}): no verdict until every \
             shape is (resume the run)",
            shapes.len(),
            shapes
                .iter()
                .map(|s| s.shape_name())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    r.win =
        r.status == Status::Correct && r.speedup.as_ref().is_some_and(|s| s.ci_low > win_threshold);
    r
}

/// One shape's figures, for the per-shape tables and plot.
fn figure(r: &Record) -> ShapeFigure {
    ShapeFigure {
        shape: r.shape_name().to_string(),
        status: r.status,
        median_ms: r.timing.as_ref().map(|t| t.median_ms),
        speedup: r.speedup.clone(),
        over_eager: Basis::Eager.speedup(r),
        over_compile: Basis::Compile.speedup(r),
        floor_fraction: r.timing.as_ref().and_then(|t| t.floor_fraction),
    }
}

/// The geometric mean of `values`, when every one is finite and positive.
fn geomean(values: impl IntoIterator<Item = Option<f64>>) -> Option<f64> {
    let mut n = 0.0;
    let mut logs = 0.0;
    for v in values {
        let v = v.filter(|v| v.is_finite() && *v > 0.0)?;
        logs += v.ln();
        n += 1.0;
    }
    (n > 0.0).then(|| (logs / n).exp())
}

fn geomean_of(shapes: &[&Record], f: impl Fn(&Record) -> Option<f64>) -> Option<f64> {
    geomean(shapes.iter().map(|s| f(s)))
}

/// Each field the geometric mean over the shapes (`None` unless every shape has a timing);
/// `samples` the fewest of any shape.
fn timing_of(shapes: &[&Record], f: impl Fn(&Record) -> Option<&Timing>) -> Option<Timing> {
    let ts: Vec<&Timing> = shapes.iter().map(|s| f(s)).collect::<Option<_>>()?;
    let g = |field: fn(&Timing) -> f64| geomean(ts.iter().map(|t| Some(field(t))));
    Some(Timing {
        median_ms: g(|t| t.median_ms)?,
        p10_ms: g(|t| t.p10_ms)?,
        p90_ms: g(|t| t.p90_ms)?,
        samples: ts.iter().map(|t| t.samples).min().unwrap_or(0),
        compulsory_gbps: g(|t| t.compulsory_gbps).unwrap_or(0.0),
        logical_gbps: g(|t| t.logical_gbps).unwrap_or(0.0),
        gflops: g(|t| t.gflops).unwrap_or(0.0),
        floor_fraction: geomean(ts.iter().map(|t| t.floor_fraction)),
        gather_floor_fraction: geomean(ts.iter().map(|t| t.gather_floor_fraction)),
    })
}

/// The geometric mean of the shapes' paired speedups with its interval (module docs), each
/// side from the shapes' own distances to their bounds on the log scale (a skewed interval
/// keeps its skew); `None` unless every shape has one. A shape without a usable interval
/// (bounds not finite and positive around the median: what "no interval, no win" is written
/// as) leaves the mean without one: bounds 0.
fn speedup_of(shapes: &[&Record], f: impl Fn(&Record) -> Option<&Speedup>) -> Option<Speedup> {
    let ss: Vec<&Speedup> = shapes.iter().map(|s| f(s)).collect::<Option<_>>()?;
    if let [one] = ss.as_slice() {
        return Some((*one).clone());
    }
    let median = geomean(ss.iter().map(|s| Some(s.median)))?;
    let pairs = ss.iter().map(|s| s.pairs).min().unwrap_or(0);
    let usable = |s: &Speedup| {
        [s.ci_low, s.median, s.ci_high]
            .iter()
            .all(|v| v.is_finite() && *v > 0.0)
            && s.ci_low <= s.median
            && s.median <= s.ci_high
    };
    if !ss.iter().all(|s| usable(s)) {
        return Some(Speedup {
            median,
            ci_low: 0.0,
            ci_high: 0.0,
            pairs,
        });
    }
    let n = ss.len() as f64;
    let side = |d: fn(&Speedup) -> f64| {
        let var: f64 = ss.iter().map(|s| d(s).powi(2)).sum();
        var.sqrt() / n
    };
    // Per shape, the distance from the median to each bound on the log scale.
    let below = side(|s| s.median.ln() - s.ci_low.ln());
    let above = side(|s| s.ci_high.ln() - s.median.ln());
    Some(Speedup {
        median,
        ci_low: median * (-below).exp(),
        ci_high: median * above.exp(),
        pairs,
    })
}

/// PyTorch's times over the shapes: each the geometric mean (`None` unless every shape has
/// one; the spread only when every shape gave it).
fn peer_of(shapes: &[&Record], f: impl Fn(&Record) -> Option<&PeerTime>) -> Option<PeerTime> {
    let ps: Vec<&PeerTime> = shapes.iter().map(|s| f(s)).collect::<Option<_>>()?;
    Some(PeerTime {
        median_ms: geomean(ps.iter().map(|p| Some(p.median_ms)))?,
        reference_over_pytorch: geomean(ps.iter().map(|p| Some(p.reference_over_pytorch)))
            .unwrap_or(f64::NAN),
        source: ps[0].source.clone(),
        p10_ms: geomean(ps.iter().map(|p| p.p10_ms)),
        p90_ms: geomean(ps.iter().map(|p| p.p90_ms)),
    })
}

/// Columns of the per-shape table ([`shape_rows`]).
pub(crate) const SHAPE_COLUMNS: [&str; 9] = [
    "problem",
    "candidate",
    "shape",
    "status",
    "cand ms",
    "speedup",
    "95% CI",
    "over eager",
    "over torch.compile",
];

/// The per-shape table: a row per shape of each candidate measured at more than one shape
/// (the reference's rows say its time only); empty when no problem had several.
pub(crate) fn shape_rows(records: &[Record]) -> Vec<Vec<String>> {
    let x = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
    let mut rows = Vec::new();
    let shown = |r: &&Record| {
        !r.shapes.is_empty() && !matches!(r.status, Status::Skipped | Status::InvalidManifest)
    };
    for r in records.iter().filter(shown) {
        let candidate = match r.is_reference() {
            true => "(reference)".to_string(),
            false => format!("{}/{}", r.group, r.candidate),
        };
        for f in &r.shapes {
            let (speedup, ci) = match (&f.speedup, r.is_reference()) {
                (Some(s), false) => (
                    format!("{:.3}", s.median),
                    format!("[{:.3}, {:.3}]", s.ci_low, s.ci_high),
                ),
                _ => ("-".into(), "-".into()),
            };
            rows.push(vec![
                r.problem.clone(),
                candidate.clone(),
                f.shape.clone(),
                f.status.name().to_string(),
                f.median_ms.map_or("-".into(), |m| format!("{m:.4}")),
                speedup,
                ci,
                x(f.over_eager),
                x(f.over_compile),
            ]);
        }
    }
    rows
}

/// What the per-shape table says, above it.
pub(crate) const SHAPES_NOTE: &str = "Each problem is checked and timed at each of its \
    shapes (`dlrm-bench list --shapes`); the tables above give, per candidate, the geometric \
    mean over the shapes (its interval from the shapes' paired intervals), and a candidate is \
    correct only when it is correct at every shape. Here each shape's own figures.";

#[cfg(test)]
mod tests;
