//! The report's plots (docs/design.md §9), drawn with `plotters`' SVG backend: the speedups of every
//! candidate on both bases with their 95% intervals, a roofline of achieved bandwidth against
//! the measured ceilings, each record's share of the physical floor, the projection onto a
//! workload, the input statistics the references recorded, and a sweep's win rates per model.
//!
//! One rule makes the plots checkable: every data point is one SVG `<circle>` and nothing else
//! is (intervals and rules are polylines, labels are text, legends use `●` in text), and
//! [`Plot::points`] says how many there are. The page ([`crate::report::html`]) and its browser
//! test count them.
//!
//! Text needs no system font: without plotters' `ttf` feature the layout is estimated from the
//! character count, and the browser draws the SVG text with its own fonts.
use plotters::prelude::*;
mod row_chart;
mod speedups;
pub use speedups::*;
mod shape_plot;
pub use shape_plot::*;
mod roofline;
pub use roofline::*;
mod projection_plot;
pub use projection_plot::*;
mod input_stats;
pub(crate) use input_stats::*;
mod sweep_plot;
pub(crate) use sweep_plot::*;

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
pub(crate) const REFERENCE_BASIS: RGBColor = RGBColor(31, 119, 180);
pub(crate) const EAGER_BASIS: RGBColor = RGBColor(230, 110, 0);
pub(crate) const COMPILE_BASIS: RGBColor = RGBColor(44, 160, 44);
const REFERENCE_RECORD: RGBColor = RGBColor(110, 110, 110);
const AFTER: RGBColor = RGBColor(44, 160, 44);
const RULE: RGBColor = RGBColor(150, 150, 150);
const SEPARATOR: RGBColor = RGBColor(225, 225, 225);

/// One colour per problem (by number, cycling).
pub(crate) const PALETTE: [RGBColor; 12] = [
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
pub(crate) fn hex(c: RGBColor) -> String {
    format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2)
}

/// The problem's number in the catalog (0 when unknown).
pub(crate) fn problem_number(problem: &str) -> u32 {
    bench_problems::find_problem(problem).map_or(0, |p| p.number())
}

/// The problem's colour.
pub(crate) fn problem_color(problem: &str) -> RGBColor {
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

/// `text` with `& < > " '` escaped, safe in HTML text and attribute values.
pub(crate) fn escape(text: &str) -> String {
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
