//! The report's plots (docs/design.md §9), drawn with `plotters`' SVG backend: the speedups of every
//! candidate on both bases with their 95% intervals, a roofline of achieved bandwidth against
//! the measured ceilings, each record's share of the physical floor, the projection onto a
//! workload, and the input statistics the references recorded.
//!
//! One rule makes the plots checkable: every data point is one SVG `<circle>` and nothing else
//! is (intervals and rules are polylines, labels are text, legends use `●` in text), and
//! [`Plot::points`] says how many there are. The page ([`crate::report::html`]) and its browser
//! test count them.
//!
//! Text needs no system font: without plotters' `ttf` feature the layout is estimated from the
//! character count, and the browser draws the SVG text with its own fonts.
use crate::report::metrics::{with_reference_peers, Basis};
use crate::report::projection::Projection;
use crate::results::record::{Ceilings, Record, Status};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde_json::Value;

/// One plot: its SVG and how many data points (circles) it draws.
#[derive(Clone, Debug)]
pub struct Plot {
    /// File stem and element id (`speedups`, `roofline`, `inputs-embedding_bag_sum-…`).
    pub name: String,
    pub title: String,
    /// What the plot shows (HTML, already escaped where it holds data).
    pub caption: String,
    pub svg: String,
    /// Data points drawn: one `<circle>` each.
    pub points: usize,
}

/// Colours of the bases and of the reference.
pub const REFERENCE_BASIS: RGBColor = RGBColor(31, 119, 180);
pub const EAGER_BASIS: RGBColor = RGBColor(230, 110, 0);
const REFERENCE_RECORD: RGBColor = RGBColor(110, 110, 110);
const AFTER: RGBColor = RGBColor(44, 160, 44);
const RULE: RGBColor = RGBColor(150, 150, 150);
const SEPARATOR: RGBColor = RGBColor(225, 225, 225);

/// One colour per problem (by number, cycling).
pub const PALETTE: [RGBColor; 12] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(57, 59, 121),
    RGBColor(173, 73, 74),
];

/// `#rrggbb` of a colour (for the page's legends).
pub fn hex(c: RGBColor) -> String {
    format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2)
}

/// The problem's number in the catalog (0 when unknown).
pub fn problem_number(problem: &str) -> u32 {
    bench_problems::find_problem(problem).map_or(0, |p| p.number())
}

/// The problem's colour.
pub fn problem_color(problem: &str) -> RGBColor {
    PALETTE[(problem_number(problem) as usize + PALETTE.len() - 1) % PALETTE.len()]
}

/// A tick label: at most three decimals, no trailing zeros.
fn tick(v: f64) -> String {
    format!("{}", (v * 1000.0).round() / 1000.0)
}

fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow::anyhow!("drawing a plot: {e:?}")
}

fn font(size: u32) -> TextStyle<'static> {
    TextStyle::from(("sans-serif", size).into_font())
}

/// A value usable on a log axis.
fn positive(v: f64) -> Option<f64> {
    (v.is_finite() && v > 0.0).then_some(v)
}

/// A row of a [`RowChart`]: a label, bold for a heading row (a problem's name).
struct Row {
    label: String,
    heading: bool,
}

/// A data point of a [`RowChart`].
struct Mark {
    row: usize,
    /// Vertical offset inside the row, in rows (two bases side by side).
    offset: f64,
    value: f64,
    interval: Option<(f64, f64)>,
    color: RGBColor,
    filled: bool,
}

/// A chart with one labelled row per item and values along x.
struct RowChart {
    title: String,
    x_desc: String,
    rows: Vec<Row>,
    marks: Vec<Mark>,
    log: bool,
    /// Vertical rules: value, label.
    rules: Vec<(f64, String)>,
    /// Legend: colour, text (drawn as `● text`).
    legend: Vec<(RGBColor, String)>,
}

impl RowChart {
    fn x_range(&self) -> (f64, f64) {
        let mut values: Vec<f64> = self.marks.iter().map(|m| m.value).collect();
        for m in &self.marks {
            if let Some((a, b)) = m.interval {
                values.extend([a, b]);
            }
        }
        values.extend(self.rules.iter().map(|r| r.0));
        let values: Vec<f64> = values
            .into_iter()
            .filter(|v| v.is_finite() && (!self.log || *v > 0.0))
            .collect();
        let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        match (self.log, lo.is_finite()) {
            (true, true) => (lo / 1.3, hi * 1.3),
            (true, false) => (0.1, 10.0),
            (false, true) => (lo.min(0.0), hi.max(lo + 1e-9) * 1.08),
            (false, false) => (0.0, 1.0),
        }
    }

    fn render(&self) -> anyhow::Result<String> {
        let n = self.rows.len().max(1);
        let label_chars = self.rows.iter().map(|r| r.label.chars().count()).max();
        let label_w = (label_chars.unwrap_or(4) as f64 * 6.8) as u32 + 16;
        let (w, h) = (label_w + 640, 20 * n as u32 + 130);
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
            root.fill(&WHITE).map_err(err)?;
            let (lo, hi) = self.x_range();
            let y = |row: usize, offset: f64| (n - 1 - row) as f64 - offset;
            let mut b = ChartBuilder::on(&root);
            b.margin(12)
                .margin_top(10)
                .caption(&self.title, font(17))
                .x_label_area_size(44)
                .y_label_area_size(label_w);
            let yr = -0.6f64..(n as f64 - 0.4);
            if self.log {
                let mut chart = b
                    .build_cartesian_2d((lo..hi).log_scale(), yr)
                    .map_err(err)?;
                chart
                    .configure_mesh()
                    .disable_y_mesh()
                    .y_label_formatter(&|_| String::new())
                    .x_desc(&self.x_desc)
                    .x_label_formatter(&|v| tick(*v))
                    .draw()
                    .map_err(err)?;
                self.draw_rows(&root, &mut chart, &y, lo)?;
            } else {
                let mut chart = b.build_cartesian_2d(lo..hi, yr).map_err(err)?;
                chart
                    .configure_mesh()
                    .disable_y_mesh()
                    .y_label_formatter(&|_| String::new())
                    .x_desc(&self.x_desc)
                    .draw()
                    .map_err(err)?;
                self.draw_rows(&root, &mut chart, &y, lo)?;
            }
            draw_legend(&root, &self.legend, h)?;
            root.present().map_err(err)?;
        }
        Ok(svg)
    }

    fn draw_rows<'a, X>(
        &self,
        root: &DrawingArea<SVGBackend<'a>, Shift>,
        chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, RangedCoordf64>>,
        y: &dyn Fn(usize, f64) -> f64,
        lo: f64,
    ) -> anyhow::Result<()>
    where
        X: Ranged<ValueType = f64>,
    {
        let (x0, x1) = {
            let r = chart.x_range();
            (r.start, r.end)
        };
        for (i, row) in self.rows.iter().enumerate() {
            if row.heading && i > 0 {
                let yy = y(i, 0.0) + 0.5;
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(x0, yy), (x1, yy)],
                        SEPARATOR.stroke_width(1),
                    )))
                    .map_err(err)?;
            }
            let (px, py) = chart.backend_coord(&(lo, y(i, 0.0)));
            let style = if row.heading {
                TextStyle::from(("sans-serif", 13, FontStyle::Bold).into_font())
            } else {
                font(12)
            };
            let at = (px.min(chart.backend_coord(&(x0, 0.0)).0) - 8, py);
            root.draw(&Text::new(
                row.label.clone(),
                at,
                style.pos(Pos::new(HPos::Right, VPos::Center)),
            ))
            .map_err(err)?;
        }
        for (value, label) in &self.rules {
            let top = y(0, 0.0) + 0.5;
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(*value, -0.6), (*value, top + 0.1)],
                    RULE.stroke_width(1),
                )))
                .map_err(err)?;
            let (px, py) = chart.backend_coord(&(*value, top + 0.1));
            root.draw(&Text::new(
                label.clone(),
                (px + 4, py),
                font(11)
                    .color(&RULE.mix(1.0))
                    .pos(Pos::new(HPos::Left, VPos::Top)),
            ))
            .map_err(err)?;
        }
        for m in &self.marks {
            let yy = y(m.row, m.offset);
            if let Some((a, b)) = m.interval {
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(a, yy), (b, yy)],
                        m.color.stroke_width(2),
                    )))
                    .map_err(err)?;
            }
            let style = if m.filled {
                m.color.filled()
            } else {
                m.color.stroke_width(2)
            };
            chart
                .draw_series(std::iter::once(Circle::new((m.value, yy), 4, style)))
                .map_err(err)?;
        }
        Ok(())
    }
}

/// `● text` entries along the bottom edge.
fn draw_legend(
    root: &DrawingArea<SVGBackend, Shift>,
    legend: &[(RGBColor, String)],
    h: u32,
) -> anyhow::Result<()> {
    let mut x = 14i32;
    for (color, text) in legend {
        let label = format!("● {text}");
        root.draw(&Text::new(
            label.clone(),
            (x, h as i32 - 12),
            font(12)
                .color(&color.mix(1.0))
                .pos(Pos::new(HPos::Left, VPos::Center)),
        ))
        .map_err(err)?;
        x += (label.chars().count() as f64 * 6.8) as i32 + 18;
    }
    Ok(())
}

fn candidate_label(r: &Record) -> String {
    let mut s = if r.is_reference() {
        "(reference)".to_string()
    } else {
        format!("{}/{}", r.group, r.candidate)
    };
    if r.status != Status::Correct {
        s += &format!(" [{}]", r.status.name());
    }
    s
}

/// Rows of `records` grouped by problem: a heading row per problem, then one row per record
/// that `keep` keeps. Returns the rows and, per kept record, its row.
fn problem_rows(
    records: &[Record],
    keep: impl Fn(&Record) -> bool,
) -> (Vec<Row>, Vec<(usize, &Record, usize)>) {
    let mut rows = Vec::new();
    let mut kept = Vec::new();
    let mut last: Option<&str> = None;
    for (i, r) in records.iter().enumerate() {
        if !keep(r) {
            continue;
        }
        if last != Some(r.problem.as_str()) {
            rows.push(Row {
                label: format!("{} {}", problem_number(&r.problem), r.problem),
                heading: true,
            });
            last = Some(&r.problem);
        }
        kept.push((i, r, rows.len()));
        rows.push(Row {
            label: candidate_label(r),
            heading: false,
        });
    }
    (rows, kept)
}

/// One candidate's speedup on one basis.
#[derive(Clone, Debug, PartialEq)]
pub struct SpeedupPoint {
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
pub fn speedup_points(r: &Record, filled: &Record) -> Vec<SpeedupPoint> {
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
    v
}

/// Every candidate's speedup on both bases with its 95% interval; filled: a win.
pub fn speedups(records: &[Record]) -> anyhow::Result<Plot> {
    let filled = with_reference_peers(records);
    let (rows, kept) = problem_rows(records, |r| !r.is_reference());
    let mut marks = Vec::new();
    for (i, r, row) in kept {
        for p in speedup_points(r, &filled[i]) {
            let (offset, color) = match p.basis {
                Basis::Reference => (-0.18, REFERENCE_BASIS),
                _ => (0.18, EAGER_BASIS),
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
             interval). A filled mark is a win on that basis; hollow is not.",
            hex(REFERENCE_BASIS),
            hex(EAGER_BASIS)
        ),
        svg: chart.render()?,
        points,
    })
}

/// Each record's share of its physical floor (`Timing::floor_fraction`), in percent.
pub fn floor_share(records: &[Record]) -> anyhow::Result<Plot> {
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

/// A roofline point: (logical / compulsory bytes, compulsory GB/s).
pub fn roofline_point(r: &Record) -> Option<(f64, f64)> {
    let t = r.timing.as_ref()?;
    let c = positive(t.compulsory_gbps)?;
    let l = positive(t.logical_gbps)?;
    Some((l / c, c))
}

/// Achieved compulsory bandwidth against the bytes' reuse, under the roof the measured
/// ceilings make: min(HBM copy, L2 read / reuse).
pub fn roofline(records: &[Record], ceilings: Option<&Ceilings>) -> anyhow::Result<Plot> {
    let pts: Vec<(&Record, (f64, f64))> = records
        .iter()
        .filter_map(|r| Some((r, roofline_point(r)?)))
        .collect();
    let ceilings = ceilings.filter(|c| c.hbm_bytes_per_s > 0.0 && c.l2_bytes_per_s > 0.0);
    let (hbm, l2) = ceilings.map_or((0.0, 0.0), |c| {
        (c.hbm_bytes_per_s / 1e9, c.l2_bytes_per_s / 1e9)
    });
    let xs: Vec<f64> = pts.iter().map(|p| p.1 .0).collect();
    let mut ys: Vec<f64> = pts.iter().map(|p| p.1 .1).collect();
    let min = |v: &[f64], d: f64| v.iter().copied().fold(f64::INFINITY, f64::min).min(d);
    let max = |v: &[f64], d: f64| v.iter().copied().fold(f64::NEG_INFINITY, f64::max).max(d);
    let (x_lo, x_hi) = (min(&xs, 1.0) / 1.5, max(&xs, 1.0) * 1.5);
    if hbm > 0.0 {
        ys.extend([hbm, l2 / x_hi]);
    }
    let (y_lo, y_hi) = (min(&ys, f64::INFINITY) / 1.6, max(&ys, 1.0) * 1.6);
    let y_lo = if y_lo.is_finite() { y_lo } else { 1.0 };
    let (w, h) = (980u32, 620u32);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(14)
            .caption(
                "Roofline: achieved bandwidth under the measured ceilings",
                font(17),
            )
            .x_label_area_size(46)
            .y_label_area_size(70)
            .build_cartesian_2d((x_lo..x_hi).log_scale(), (y_lo..y_hi).log_scale())
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("reuse: logical bytes / compulsory bytes (log)")
            .y_desc("compulsory GB/s (log)")
            .x_label_formatter(&|v| tick(*v))
            .y_label_formatter(&|v| format!("{v:.0}"))
            .draw()
            .map_err(err)?;
        if hbm > 0.0 {
            let knee = l2 / hbm;
            let mut roof: Vec<(f64, f64)> = vec![(x_lo, hbm)];
            if knee > x_lo && knee < x_hi {
                roof.push((knee, hbm));
            }
            let steps = 40;
            for i in 0..=steps {
                let x = x_lo * (x_hi / x_lo).powf(i as f64 / steps as f64);
                if x > knee {
                    roof.push((x, l2 / x));
                }
            }
            chart
                .draw_series(LineSeries::new(roof, BLACK.stroke_width(2)))
                .map_err(err)?;
            let (px, py) = chart.backend_coord(&(x_lo, hbm));
            root.draw(&Text::new(
                format!("HBM copy {hbm:.0} GB/s"),
                (px + 6, py - 4),
                font(12).pos(Pos::new(HPos::Left, VPos::Bottom)),
            ))
            .map_err(err)?;
            let xl = (knee * 1.6).min(x_hi / 1.4);
            let (px, py) = chart.backend_coord(&(xl, l2 / xl));
            root.draw(&Text::new(
                format!("L2 read {l2:.0} GB/s ÷ reuse"),
                (px + 8, py - 4),
                font(12).pos(Pos::new(HPos::Left, VPos::Bottom)),
            ))
            .map_err(err)?;
        }
        for (r, (x, y)) in &pts {
            let c = if r.is_reference() {
                REFERENCE_RECORD
            } else {
                problem_color(&r.problem)
            };
            let style = if r.is_reference() {
                c.stroke_width(2)
            } else {
                c.filled()
            };
            chart
                .draw_series(std::iter::once(Circle::new((*x, *y), 4, style)))
                .map_err(err)?;
        }
        // The problem's number beside its highest point.
        let mut tops: Vec<(&str, f64, f64)> = Vec::new();
        for (r, (x, y)) in &pts {
            match tops.iter_mut().find(|t| t.0 == r.problem) {
                Some(t) if *y > t.2 => *t = (&r.problem, *x, *y),
                Some(_) => {}
                None => tops.push((&r.problem, *x, *y)),
            }
        }
        for (p, x, y) in tops {
            let (px, py) = chart.backend_coord(&(x, y));
            root.draw(&Text::new(
                problem_number(p).to_string(),
                (px + 7, py - 7),
                font(12)
                    .color(&problem_color(p).mix(1.0))
                    .pos(Pos::new(HPos::Left, VPos::Bottom)),
            ))
            .map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    let roof_note = if hbm > 0.0 {
        format!(
            "The roof is what the run's measured ceilings allow: min(HBM copy {hbm:.0} GB/s, \
             L2 read {l2:.0} GB/s ÷ reuse)."
        )
    } else {
        "No ceilings were measured in this run: no roof.".into()
    };
    Ok(Plot {
        name: "roofline".into(),
        title: "Roofline".into(),
        caption: format!(
            "Each timed record: its compulsory bytes per second (y) against how often its \
             logical bytes re-read them (x, logical GB/s ÷ compulsory GB/s). {roof_note} \
             Distance below the roof is the share of the floor not reached (flops bind \
             nowhere here: they would lower the roof). Hollow grey: the reference; filled, \
             in the problem's colour: a candidate; the number is the problem's."
        ),
        svg,
        points: pts.len(),
    })
}

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

/// A series of an input-statistics array: its name and (x index, value) points.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub name: String,
    pub values: Vec<f64>,
}

/// An array field of a problem's input statistics, as series over labelled x positions:
/// an array of numbers is one series; an array of objects gives one series per numeric field
/// (a histogram's `lo`/`hi` make the labels instead).
#[derive(Clone, Debug, PartialEq)]
pub struct StatArray {
    pub field: String,
    pub labels: Vec<String>,
    pub series: Vec<Series>,
    /// Drawn on a log axis (several series, or a range over 1000×): zeros are not drawn.
    pub log: bool,
}

impl StatArray {
    /// The points drawn: every value, or on a log axis every positive one.
    pub fn points(&self) -> usize {
        self.series
            .iter()
            .flat_map(|s| &s.values)
            .filter(|v| v.is_finite() && (!self.log || **v > 0.0))
            .count()
    }
}

/// The array fields of one input set's `stats` object.
pub fn stat_arrays(stats: &Value) -> Vec<StatArray> {
    let Some(obj) = stats.as_object() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (field, v) in obj {
        let Some(items) = v.as_array().filter(|a| !a.is_empty()) else {
            continue;
        };
        let (labels, series) = if items.iter().all(Value::is_number) {
            let values = items.iter().filter_map(Value::as_f64).collect::<Vec<_>>();
            let labels = (0..values.len()).map(|i| i.to_string()).collect();
            (
                labels,
                vec![Series {
                    name: field.clone(),
                    values,
                }],
            )
        } else if items.iter().all(Value::is_object) {
            let mut names: Vec<String> = Vec::new();
            for it in items {
                for (k, x) in it.as_object().into_iter().flatten() {
                    if x.is_number() && k != "lo" && k != "hi" && !names.contains(k) {
                        names.push(k.clone());
                    }
                }
            }
            let labels = items
                .iter()
                .enumerate()
                .map(|(i, it)| match (it["lo"].as_f64(), it["hi"].as_f64()) {
                    (Some(lo), Some(hi)) if lo == hi => format!("{lo}"),
                    (Some(lo), Some(hi)) => format!("{lo}–{hi}"),
                    _ => i.to_string(),
                })
                .collect();
            let series = names
                .into_iter()
                .map(|k| Series {
                    values: items
                        .iter()
                        .map(|it| it[&k].as_f64().unwrap_or(f64::NAN))
                        .collect(),
                    name: k,
                })
                .collect();
            (labels, series)
        } else {
            continue;
        };
        let all: Vec<f64> = series
            .iter()
            .flat_map(|s: &Series| s.values.iter().copied())
            .filter(|v| v.is_finite() && *v > 0.0)
            .collect();
        let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = all.iter().copied().fold(0.0, f64::max);
        let log = series.len() > 1 || (lo.is_finite() && hi / lo > 1000.0);
        out.push(StatArray {
            field: field.clone(),
            labels,
            series,
            log,
        });
    }
    out
}

/// One input-statistics array of `problem` (set `set`) as a lollipop chart.
pub fn stat_plot(problem: &str, set: &str, a: &StatArray) -> anyhow::Result<Plot> {
    let n = a.labels.len().max(1);
    let slot = a
        .labels
        .iter()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(1) as u32
        * 8
        + 10;
    let (w, h) = ((slot.max(24) * n as u32 + 200).clamp(560, 1100), 360u32);
    let values: Vec<f64> = a
        .series
        .iter()
        .flat_map(|s| s.values.iter().copied())
        .filter(|v| v.is_finite() && (!a.log || *v > 0.0))
        .collect();
    let hi = values.iter().copied().fold(0.0, f64::max).max(1e-9);
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let title = format!("{problem}: {} ({set})", a.field);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut b = ChartBuilder::on(&root);
        b.margin(12)
            .caption(&title, font(15))
            .x_label_area_size(50)
            .y_label_area_size(72);
        let xr = (0..n as i32).into_segmented();
        let labels = a.labels.clone();
        let xfmt = move |v: &SegmentValue<i32>| match v {
            SegmentValue::CenterOf(i) => labels.get(*i as usize).cloned().unwrap_or_default(),
            _ => String::new(),
        };
        let step = n.div_ceil(24).max(1);
        let colors = |k: usize| PALETTE[k % PALETTE.len()];
        let x_desc = if a.labels.iter().any(|l| l.contains('–')) {
            "bucket"
        } else {
            "index"
        };
        macro_rules! draw {
            ($chart:expr, $base:expr) => {{
                let mut chart = $chart;
                chart
                    .configure_mesh()
                    .disable_x_mesh()
                    .x_labels(n + 1)
                    .x_label_formatter(&|v| {
                        match v {
                            SegmentValue::CenterOf(i) if (*i as usize) % step != 0 => {
                                return String::new()
                            }
                            _ => {}
                        }
                        xfmt(v)
                    })
                    .x_desc(x_desc)
                    .y_label_formatter(&|v| format!("{v}"))
                    .draw()
                    .map_err(err)?;
                for (si, s) in a.series.iter().enumerate() {
                    let c = colors(si);
                    for (i, &v) in s.values.iter().enumerate() {
                        if !(v.is_finite() && (!a.log || v > 0.0)) {
                            continue;
                        }
                        let x = SegmentValue::CenterOf(i as i32);
                        chart
                            .draw_series(std::iter::once(PathElement::new(
                                vec![(x.clone(), $base), (x.clone(), v)],
                                c.mix(0.5).stroke_width(2),
                            )))
                            .map_err(err)?;
                        chart
                            .draw_series(std::iter::once(Circle::new((x, v), 4, c.filled())))
                            .map_err(err)?;
                    }
                }
            }};
        }
        if a.log {
            let base = lo / 2.0;
            draw!(
                b.build_cartesian_2d(xr, (base..hi * 2.0).log_scale())
                    .map_err(err)?,
                base
            );
        } else {
            draw!(b.build_cartesian_2d(xr, 0f64..hi * 1.1).map_err(err)?, 0.0);
        }
        let legend: Vec<(RGBColor, String)> = a
            .series
            .iter()
            .enumerate()
            .map(|(i, s)| (colors(i), s.name.clone()))
            .collect();
        if a.series.len() > 1 {
            draw_legend(&root, &legend, h)?;
        }
        root.present().map_err(err)?;
    }
    let names: Vec<&str> = a.series.iter().map(|s| s.name.as_str()).collect();
    Ok(Plot {
        name: format!("inputs-{problem}-{}", a.field),
        title,
        caption: format!(
            "<code>{}</code> of input set {}: {}{}.",
            escape(&a.field),
            escape(set),
            escape(&names.join(", ")),
            if a.log {
                " (log scale; zeros not drawn)"
            } else {
                ""
            }
        ),
        svg,
        points: a.points(),
    })
}

/// `text` with `& < > " '` escaped, safe in HTML text and attribute values.
pub fn escape(text: &str) -> String {
    let mut s = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => s.push_str("&amp;"),
            '<' => s.push_str("&lt;"),
            '>' => s.push_str("&gt;"),
            '"' => s.push_str("&quot;"),
            '\'' => s.push_str("&#39;"),
            c => s.push(c),
        }
    }
    s
}
