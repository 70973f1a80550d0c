//! Plots of a problem's input statistics (bag lengths, index frequencies) from `run.json`'s `input_stats`.
use super::row_chart::draw_legend;
use super::{err, escape, font, Plot, PALETTE};
use plotters::prelude::*;
use serde_json::Value;

/// A series of an input-statistics array: its name and (x index, value) points.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Series {
    pub name: String,
    pub values: Vec<f64>,
}

/// An array field of a problem's input statistics, as series over labelled x positions:
/// an array of numbers is one series; an array of objects gives one series per numeric field
/// (a histogram's `lo`/`hi` make the labels instead).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StatArray {
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
pub(crate) fn stat_arrays(stats: &Value) -> Vec<StatArray> {
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
pub(crate) fn stat_plot(problem: &str, set: &str, a: &StatArray) -> anyhow::Result<Plot> {
    let n = a.labels.len().max(1);
    let (w, h) = plot_size(a, n);
    let (lo, hi) = value_range(a);
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

/// The chart's (width, height) in pixels for `n` x positions: a slot per position wide enough
/// for the longest label, within 560 to 1100 wide.
fn plot_size(a: &StatArray, n: usize) -> (u32, u32) {
    let slot = a
        .labels
        .iter()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(1) as u32
        * 8
        + 10;
    ((slot.max(24) * n as u32 + 200).clamp(560, 1100), 360u32)
}

/// The (lowest, highest) value drawn (finite, and positive on a log axis); the highest at
/// least 1e-9, the lowest infinite when none is drawn.
fn value_range(a: &StatArray) -> (f64, f64) {
    let values: Vec<f64> = a
        .series
        .iter()
        .flat_map(|s| s.values.iter().copied())
        .filter(|v| v.is_finite() && (!a.log || *v > 0.0))
        .collect();
    let hi = values.iter().copied().fold(0.0, f64::max).max(1e-9);
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    (lo, hi)
}
