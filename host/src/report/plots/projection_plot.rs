//! The projection plot: a workload's step time before and after, per problem.
use super::row_chart::Mark;
use super::row_chart::Row;
use super::row_chart::RowChart;
use super::{Plot, AFTER, REFERENCE_RECORD};
use crate::report::projection::Projection;

/// The workload's share of the step per problem, before and after the run's best wins.
pub fn projection(p: &Projection) -> anyhow::Result<Plot> {
    let mut rows = Vec::new();
    let mut marks = Vec::new();
    for q in &p.problems {
        let label = match &q.candidate {
            Some(c) => format!("{} ({c}, {:.3}×)", q.problem, q.speedup),
            None => format!("{} ({})", q.problem, q.basis),
        };
        let row = rows.len();
        rows.push(Row {
            label,
            heading: false,
        });
        marks.push(Mark {
            row,
            offset: -0.15,
            value: 100.0 * q.fraction,
            interval: None,
            color: REFERENCE_RECORD,
            filled: false,
        });
        marks.push(Mark {
            row,
            offset: 0.15,
            value: 100.0 * q.fraction / q.speedup,
            interval: None,
            color: AFTER,
            filled: true,
        });
    }
    let points = marks.len();
    let chart = RowChart {
        title: format!("Projection onto {}", p.workload),
        x_desc: "share of the step's GPU time (%)".into(),
        rows,
        marks,
        log: false,
        rules: vec![],
        legend: vec![
            (REFERENCE_RECORD, "before (PyTorch eager)".into()),
            (AFTER, "after (the best win)".into()),
        ],
    };
    Ok(Plot {
        name: "projection".into(),
        title: format!("Projection onto {}", p.workload),
        caption: "Each problem's share of the step before and after its fastest win replaces \
                  the eager operation (Amdahl)."
            .into(),
        svg: chart.render()?,
        points,
    })
}
