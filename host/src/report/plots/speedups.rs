//! The speedup plot (each candidate's speedup per problem, on every basis measured) and the share-of-the-floor plot.
use super::row_chart::problem_rows;
use super::row_chart::Mark;
use super::row_chart::RowChart;
use super::{
    hex, positive, problem_color, Plot, COMPILE_BASIS, EAGER_BASIS, PALETTE, REFERENCE_BASIS,
    REFERENCE_RECORD, RULE,
};
use crate::report::metrics::with_reference_peers;
use crate::report::metrics::Basis;
use crate::results::record::Record;

/// One candidate's speedup on one basis.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SpeedupPoint {
    pub basis: Basis,
    pub median: f64,
    /// The 95% interval, when the speedup is paired.
    pub interval: Option<(f64, f64)>,
    pub win: bool,
}

/// A candidate's speedups over the reference and over eager (what the speedup plot and the
/// page's table show): over the reference [`Record::speedup`] with its interval; over eager
/// [`Basis::Eager`]'s, with [`Record::speedup_eager`]'s interval when paired. `filled` is the
/// record after [`with_reference_peers`].
pub(crate) fn speedup_points(r: &Record, filled: &Record) -> Vec<SpeedupPoint> {
    let mut v = Vec::new();
    if let Some(s) = &r.speedup {
        if positive(s.median).is_some() {
            v.push(SpeedupPoint {
                basis: Basis::Reference,
                median: s.median,
                interval: Some((s.ci_low, s.ci_high)).filter(|(a, b)| *a > 0.0 && b.is_finite()),
                win: Basis::Reference.win(r),
            });
        }
    }
    if let Some(m) = Basis::Eager.speedup(filled).and_then(positive) {
        v.push(SpeedupPoint {
            basis: Basis::Eager,
            median: m,
            interval: filled
                .speedup_eager
                .as_ref()
                .map(|s| (s.ci_low, s.ci_high))
                .filter(|(a, b)| *a > 0.0 && b.is_finite()),
            win: Basis::Eager.win(filled),
        });
    }
    if let Some(m) = Basis::Compile.speedup(filled).and_then(positive) {
        v.push(SpeedupPoint {
            basis: Basis::Compile,
            median: m,
            interval: None,
            win: Basis::Compile.win(filled),
        });
    }
    v
}

/// Every candidate's speedup on every basis measured, with its 95% interval where paired;
/// filled: a win.
pub fn speedups(records: &[Record]) -> anyhow::Result<Plot> {
    let filled = with_reference_peers(records);
    let (rows, kept) = problem_rows(records, |r| !r.is_reference());
    let mut marks = Vec::new();
    for (i, r, row) in kept {
        for p in speedup_points(r, &filled[i]) {
            let (offset, color) = match p.basis {
                Basis::Reference => (-0.22, REFERENCE_BASIS),
                Basis::Eager => (0.0, EAGER_BASIS),
                Basis::Compile => (0.22, COMPILE_BASIS),
            };
            marks.push(Mark {
                row,
                offset,
                value: p.median,
                interval: p.interval,
                color,
                filled: p.win,
            });
        }
    }
    let points = marks.len();
    let chart = RowChart {
        title: "Speedup of each candidate (log scale)".into(),
        x_desc: "speedup (×, log scale)".into(),
        rows,
        marks,
        log: true,
        rules: vec![(1.0, "1×".into())],
        legend: vec![
            (REFERENCE_BASIS, "over the Rust reference".into()),
            (EAGER_BASIS, "over PyTorch eager".into()),
            (COMPILE_BASIS, "over torch.compile".into()),
            (RULE, "filled: a win; bar: 95% interval".into()),
        ],
    };
    Ok(Plot {
        name: "speedups".into(),
        title: "Speedups on both bases".into(),
        caption: format!(
            "Each candidate's speedup: <b style=\"color:{}\">●</b> over the Rust reference \
             (median of paired ratios, bar: its bootstrap 95% interval), <b style=\"color:{}\">\
             ●</b> over PyTorch eager (paired with its interval where eager was timed \
             interleaved with the candidate, else eager's median over the candidate's, no \
             interval), <b style=\"color:{}\">●</b> over the torch.compile'd Model where it was \
             timed (its median over the candidate's). A filled mark is a win on that basis; \
             hollow is not.",
            hex(REFERENCE_BASIS),
            hex(EAGER_BASIS),
            hex(COMPILE_BASIS)
        ),
        svg: chart.render()?,
        points,
    })
}

/// Each record's share of its physical floor (`Timing::floor_fraction`), in percent.
pub(crate) fn floor_share(records: &[Record]) -> anyhow::Result<Plot> {
    let share = |r: &Record| {
        r.timing
            .as_ref()
            .and_then(|t| t.floor_fraction)
            .filter(|f| f.is_finite())
    };
    let (rows, kept) = problem_rows(records, |r| share(r).is_some());
    let marks: Vec<Mark> = kept
        .iter()
        .map(|&(_, r, row)| Mark {
            row,
            offset: 0.0,
            value: 100.0 * share(r).unwrap_or(0.0),
            interval: None,
            color: if r.is_reference() {
                REFERENCE_RECORD
            } else {
                problem_color(&r.problem)
            },
            filled: !r.is_reference(),
        })
        .collect();
    let points = marks.len();
    let chart = RowChart {
        title: "Share of the physical floor reached".into(),
        x_desc: "physical floor / median time (%)".into(),
        rows,
        marks,
        log: false,
        rules: vec![(100.0, "the floor".into())],
        legend: vec![
            (REFERENCE_RECORD, "hollow: the reference".into()),
            (PALETTE[0], "filled: a candidate".into()),
        ],
    };
    Ok(Plot {
        name: "floor".into(),
        title: "Share of the physical floor".into(),
        caption: "The physical floor (max of compulsory bytes / HBM copy rate, logical bytes / \
                  L2 read rate, flops / fp32 rate, with the run's measured ceilings) over the \
                  median time: 100% is as fast as the device's measured limits allow."
            .into(),
        svg: chart.render()?,
        points,
    })
}
