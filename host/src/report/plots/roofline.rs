//! The roofline: each record's arithmetic intensity against its achieved rate, under the device's measured ceilings.
use super::{err, font, positive, problem_color, problem_number, tick, Plot, REFERENCE_RECORD};
use crate::results::record::Ceilings;
use crate::results::record::Record;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::HPos;
use plotters::style::text_anchor::Pos;
use plotters::style::text_anchor::VPos;

/// A roofline point: (logical / compulsory bytes, compulsory GB/s).
pub(crate) fn roofline_point(r: &Record) -> Option<(f64, f64)> {
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
    let ((x_lo, x_hi), (y_lo, y_hi)) = axis_ranges(&pts, hbm, l2);
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
            draw_roof(&root, &mut chart, hbm, l2, (x_lo, x_hi))?;
        }
        draw_points(&root, &mut chart, &pts)?;
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

/// The roofline chart: log-scale reuse (x) against compulsory GB/s (y).
type RooflineChart<'a> =
    ChartContext<'a, SVGBackend<'a>, Cartesian2d<LogCoord<f64>, LogCoord<f64>>>;

/// The axes' ranges, ((x_lo, x_hi), (y_lo, y_hi)): the points' (x at least 1) with room
/// around them, the roof's corners (`hbm`, `l2` in GB/s; `hbm` 0 when there is no roof)
/// included in y.
fn axis_ranges(pts: &[(&Record, (f64, f64))], hbm: f64, l2: f64) -> ((f64, f64), (f64, f64)) {
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
    (at_least_a_decade(x_lo, x_hi), at_least_a_decade(y_lo, y_hi))
}

/// `(lo, hi)` widened about its geometric middle to span at least a factor of 10: a roofline of
/// one problem (or of points close together) keeps readable axes instead of collapsing.
fn at_least_a_decade(lo: f64, hi: f64) -> (f64, f64) {
    if hi / lo >= 10.0 {
        return (lo, hi);
    }
    let middle = (lo * hi).sqrt();
    (middle / 10f64.sqrt(), middle * 10f64.sqrt())
}

/// The roof, min(`hbm`, `l2` ÷ reuse) in GB/s across the x range `(x_lo, x_hi)`, with its two
/// labels.
fn draw_roof<'a>(
    root: &DrawingArea<SVGBackend<'a>, Shift>,
    chart: &mut RooflineChart<'a>,
    hbm: f64,
    l2: f64,
    (x_lo, x_hi): (f64, f64),
) -> anyhow::Result<()> {
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
    Ok(())
}

/// Each record's point (hollow grey for the reference, filled in its problem's colour for a
/// candidate) and each problem's number beside its highest point.
fn draw_points<'a>(
    root: &DrawingArea<SVGBackend<'a>, Shift>,
    chart: &mut RooflineChart<'a>,
    pts: &[(&Record, (f64, f64))],
) -> anyhow::Result<()> {
    for (r, (x, y)) in pts {
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
    for (r, (x, y)) in pts {
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
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_narrow_range_is_widened_to_a_decade_about_its_middle() {
        let (lo, hi) = at_least_a_decade(1.0, 2.0);
        assert!((hi / lo - 10.0).abs() < 1e-9);
        assert!(((lo * hi).sqrt() - 2f64.sqrt()).abs() < 1e-9);
        assert_eq!(at_least_a_decade(0.1, 100.0), (0.1, 100.0));
    }
}
