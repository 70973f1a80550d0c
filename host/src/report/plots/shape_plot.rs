//! The per-shape speedup plot: each candidate's speedup over the reference at each shape of its
//! problem, so a kernel tuned to one shape shows as one mark far from its others.
use super::row_chart::problem_rows;
use super::row_chart::Mark;
use super::row_chart::RowChart;
use super::{positive, Plot, PALETTE, RULE};
use crate::results::record::{Record, Status};

/// The plot, or `None` when no candidate was measured at more than one shape. Marks: the
/// shapes in each problem's order (colours by position; the problem's row names them), bar:
/// the shape's paired 95% interval, filled: correct there with the lower bound above 1.
pub fn shape_speedups(records: &[Record]) -> anyhow::Result<Option<Plot>> {
    let has_shapes = |r: &Record| !r.is_reference() && r.shapes.iter().any(|f| f.speedup.is_some());
    let (mut rows, kept) = problem_rows(records, has_shapes);
    if kept.is_empty() {
        return Ok(None);
    }
    let mut marks = Vec::new();
    for &(_, r, row) in &kept {
        let n = r.shapes.len().max(2) as f64;
        for (k, f) in r.shapes.iter().enumerate() {
            let Some(s) = f.speedup.as_ref().filter(|s| positive(s.median).is_some()) else {
                continue;
            };
            marks.push(Mark {
                row,
                offset: -0.3 + 0.6 * k as f64 / (n - 1.0),
                value: s.median,
                interval: Some((s.ci_low, s.ci_high)).filter(|(a, b)| *a > 0.0 && b.is_finite()),
                color: PALETTE[k % PALETTE.len()],
                filled: f.status == Status::Correct && s.ci_low > 1.0,
            });
        }
        // The heading row of the problem names its shapes in colour order.
        if let Some(heading) = rows[..row].iter_mut().rev().find(|h| h.heading) {
            if !heading.label.contains(':') {
                let names: Vec<&str> = r.shapes.iter().map(|f| f.shape.as_str()).collect();
                heading.label = format!("{}: {}", heading.label, names.join(", "));
            }
        }
    }
    let max_shapes = kept
        .iter()
        .map(|(_, r, _)| r.shapes.len())
        .max()
        .unwrap_or(0);
    let mut legend: Vec<_> = (0..max_shapes.min(PALETTE.len()))
        .map(|k| (PALETTE[k], format!("shape {}", k + 1)))
        .collect();
    legend.push((
        RULE,
        "filled: faster at that shape; bar: 95% interval".into(),
    ));
    let points = marks.len();
    let chart = RowChart {
        title: "Speedup over the reference at each shape (log scale)".into(),
        x_desc: "speedup (×, log scale)".into(),
        rows,
        marks,
        log: true,
        rules: vec![(1.0, "1×".into())],
        legend,
    };
    Ok(Some(Plot {
        name: "shape-speedups".into(),
        title: "Speedups per shape".into(),
        caption: "Each candidate's paired speedup over the Rust reference at each shape of its \
                  problem (the problem's row names its shapes in the order of the colours; \
                  shape 1 is the preset's own sizes). The tables give the geometric mean over \
                  the shapes; a mark far from its row's others is a kernel fast at one shape \
                  only."
            .into(),
        svg: chart.render()?,
        points,
    }))
}
