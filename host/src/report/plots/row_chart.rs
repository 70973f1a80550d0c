//! Charts of one row per problem (candidates as marks on a shared axis): the layout behind the speedup and floor-share plots.
use super::{err, font, problem_number, tick, RULE, SEPARATOR};
use crate::results::record::Record;
use crate::results::record::Status;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::HPos;
use plotters::style::text_anchor::Pos;
use plotters::style::text_anchor::VPos;

/// A row of a [`RowChart`]: a label, bold for a heading row (a problem's name).
pub(crate) struct Row {
    pub(super) label: String,
    pub(super) heading: bool,
}

/// A data point of a [`RowChart`].
pub(crate) struct Mark {
    pub(super) row: usize,
    /// Vertical offset inside the row, in rows (two bases side by side).
    pub(super) offset: f64,
    pub(super) value: f64,
    pub(super) interval: Option<(f64, f64)>,
    pub(super) color: RGBColor,
    pub(super) filled: bool,
}

/// A chart with one labelled row per item and values along x.
pub(crate) struct RowChart {
    pub(super) title: String,
    pub(super) x_desc: String,
    pub(super) rows: Vec<Row>,
    pub(super) marks: Vec<Mark>,
    pub(super) log: bool,
    /// Vertical rules: value, label.
    pub(super) rules: Vec<(f64, String)>,
    /// Legend: colour, text (drawn as `● text`).
    pub(super) legend: Vec<(RGBColor, String)>,
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

    pub(crate) fn render(&self) -> anyhow::Result<String> {
        let n = self.rows.len().max(1);
        let label_chars = self.rows.iter().map(|r| r.label.chars().count()).max();
        let label_w = (label_chars.unwrap_or(4) as f64 * 7.4) as u32 + 16;
        // Room at the bottom for the legend, under the axis's description.
        let (w, h) = (label_w + 640, 20 * n as u32 + 160);
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
            root.fill(&WHITE).map_err(err)?;
            let (lo, hi) = self.x_range();
            let y = |row: usize, offset: f64| (n - 1 - row) as f64 - offset;
            let mut b = ChartBuilder::on(&root);
            b.margin(12)
                .margin_top(10)
                .margin_bottom(34)
                .caption(&self.title, font(18))
                .x_label_area_size(48)
                .y_label_area_size(label_w);
            let yr = -0.6f64..(n as f64 - 0.4);
            if self.log {
                let mut chart = b
                    .build_cartesian_2d((lo..hi).log_scale(), yr)
                    .map_err(err)?;
                chart
                    .configure_mesh()
                    .disable_y_mesh()
                    // A log axis has many minor lines: drawn, they merge into a grey band.
                    .light_line_style(TRANSPARENT)
                    .label_style(font(14))
                    .axis_desc_style(font(14))
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
                    .light_line_style(TRANSPARENT)
                    .label_style(font(14))
                    .axis_desc_style(font(14))
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
                TextStyle::from(("sans-serif", 14, FontStyle::Bold).into_font())
            } else {
                font(13)
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
pub(crate) fn draw_legend(
    root: &DrawingArea<SVGBackend, Shift>,
    legend: &[(RGBColor, String)],
    h: u32,
) -> anyhow::Result<()> {
    let mut x = 14i32;
    for (color, text) in legend {
        let label = format!("● {text}");
        root.draw(&Text::new(
            label.clone(),
            (x, h as i32 - 14),
            font(13)
                .color(&color.mix(1.0))
                .pos(Pos::new(HPos::Left, VPos::Center)),
        ))
        .map_err(err)?;
        x += (label.chars().count() as f64 * 7.2) as i32 + 18;
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
pub(crate) fn problem_rows(
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
