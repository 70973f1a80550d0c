//! The records' table: its columns and cells, wide (summary.md, `--wide`) and narrow (the terminal, fitting [`TERMINAL_WIDTH`]) rows.
use super::cells::outside_parity;
use crate::report::f;
use crate::report::metrics::loses_to_compile;
use crate::report::metrics::with_reference_peers;
use crate::report::metrics::Basis;
use crate::results::record::Record;
use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::Table;

/// The line `summary.md` links the plots and the page with (after its heading).
pub(crate) fn markdown_links() -> &'static str {
    "Plots: [speedups](speedups.svg), [roofline](roofline.svg), [share of the floor]\
     (floor.svg); the whole report with input statistics: [report.html](report.html).\n\n"
}

/// Column names of the per-record table (summary.md, summary.csv and `--wide`).
pub(crate) const COLUMNS: [&str; 18] = [
    "problem",
    "candidate",
    "status",
    "ref ms",
    "cand ms",
    "speedup",
    "95% CI",
    "win",
    "cand GB/s (compulsory)",
    "cand GB/s (logical)",
    "% of floor",
    "% of gather floor",
    "PyTorch ms",
    "ref / PyTorch",
    "speedup over eager",
    "torch.compile ms",
    "ref / torch.compile",
    "speedup over torch.compile",
];

/// The index in [`COLUMNS`] of the reference / eager ratio (bold in markdown when outside
/// parity).
const REF_OVER_EAGER: usize = 13;

/// The win column of a win over the reference that loses to `torch.compile`
/// ([`crate::report::metrics::CompileLoss`]).
pub(crate) const LOSES_TO_COMPILE: &str = "yes (loses to compile)";

/// The win column of `r` (`filled`: `r` after [`with_reference_peers`]): empty for a reference,
/// `yes`, [`LOSES_TO_COMPILE`], or `no`.
fn win_cell(r: &Record, filled: &Record) -> String {
    if r.is_reference() {
        String::new()
    } else if r.win && loses_to_compile(filled) {
        LOSES_TO_COMPILE.into()
    } else if r.win {
        "yes".into()
    } else {
        "no".into()
    }
}

/// The status column: the status, and the one the manifest expects when it differs.
fn status_cell(r: &Record) -> String {
    if r.unexpected() {
        format!(
            "{} (EXPECTED {})",
            r.status.name(),
            r.expected_status.as_deref().unwrap_or("")
        )
    } else {
        r.status.name().into()
    }
}

fn candidate_cell(r: &Record) -> String {
    if r.is_reference() {
        "(reference)".into()
    } else {
        format!("{}/{}", r.group, r.candidate)
    }
}

/// One table row per record ([`COLUMNS`]). A candidate's speedups over eager and over
/// `torch.compile` are [`Basis::Eager`]'s (paired with its interval, or the unpaired ratio to
/// the eager time of its problem's reference) and [`Basis::Compile`]'s (the unpaired ratio to
/// the compiled Model's time of its problem's reference); the reference's row carries
/// PyTorch's times and the reference's ratio to them (`failed` when the Model did not compile).
pub fn rows(records: &[Record]) -> Vec<Vec<String>> {
    let filled = with_reference_peers(records);
    records
        .iter()
        .zip(&filled)
        .map(|(r, filled)| {
            let t = r.timing.as_ref();
            let rt = if r.is_reference() {
                r.timing.as_ref()
            } else {
                r.reference_timing.as_ref()
            };
            let sp = r.speedup.as_ref();
            let compile = r.pytorch_compile.as_ref();
            vec![
                r.problem.clone(),
                candidate_cell(r),
                status_cell(r),
                f(rt.map(|t| t.median_ms), 4),
                f(
                    if r.is_reference() {
                        None
                    } else {
                        t.map(|t| t.median_ms)
                    },
                    4,
                ),
                f(sp.map(|s| s.median), 3),
                sp.map(|s| format!("[{:.3}, {:.3}]", s.ci_low, s.ci_high))
                    .unwrap_or_else(|| "-".into()),
                win_cell(r, filled),
                f(t.map(|t| t.compulsory_gbps), 0),
                f(t.map(|t| t.logical_gbps), 0),
                f(t.and_then(|t| t.floor_fraction).map(|x| 100.0 * x), 1),
                f(
                    t.and_then(|t| t.gather_floor_fraction).map(|x| 100.0 * x),
                    1,
                ),
                f(r.pytorch.as_ref().map(|p| p.median_ms), 4),
                f(r.pytorch.as_ref().map(|p| p.reference_over_pytorch), 3),
                match (&r.speedup_eager, r.is_reference()) {
                    (_, true) => String::new(),
                    (Some(s), _) => format!("{:.3} [{:.3}, {:.3}]", s.median, s.ci_low, s.ci_high),
                    (None, _) => f(Basis::Eager.speedup(filled), 3),
                },
                if compile.is_none() && r.pytorch_compile_error.is_some() {
                    "failed".into()
                } else {
                    f(compile.map(|p| p.median_ms), 4)
                },
                f(compile.map(|p| p.reference_over_pytorch), 3),
                if r.is_reference() {
                    String::new()
                } else {
                    f(Basis::Compile.speedup(filled), 3)
                },
            ]
        })
        .collect()
}

/// [`rows`] for markdown: a reference / eager ratio outside parity ([`outside_parity`]) in
/// bold.
pub(crate) fn markdown_rows(records: &[Record]) -> Vec<Vec<String>> {
    let mut rows = rows(records);
    for (row, r) in rows.iter_mut().zip(records) {
        let skewed = r
            .pytorch
            .as_ref()
            .is_some_and(|p| outside_parity(p.reference_over_pytorch));
        if skewed {
            row[REF_OVER_EAGER] = format!("**{}**", row[REF_OVER_EAGER]);
        }
    }
    rows
}

/// Widest the default terminal table may be, in characters.
pub(crate) const TERMINAL_WIDTH: usize = 120;

/// The default terminal table's columns ([`narrow_table`]); line breaks keep it narrow.
pub(crate) const NARROW_COLUMNS: [&str; 8] = [
    "problem",
    "candidate",
    "status",
    "ms",
    "speedup\n[95% CI]",
    "win",
    "% of\nfloor",
    "ref /\neager",
];

/// The win column's mark, in the default terminal table, of a win over the reference that
/// loses to `torch.compile` (explained under the table).
pub(crate) const LOSES_TO_COMPILE_MARK: &str = "yes*";

/// A value with 3 significant digits after the point for small values, fewer for large ones
/// (the default terminal table's speedups).
fn compact(x: f64) -> String {
    match x.abs() {
        v if v < 10.0 => format!("{x:.3}"),
        v if v < 100.0 => format!("{x:.2}"),
        _ => format!("{x:.1}"),
    }
}

/// The rows of the default terminal table ([`NARROW_COLUMNS`]): ms is the candidate's median
/// (the reference's on its own row), the speedup is over the reference with its interval, the
/// reference / eager ratio is on the reference's row. Cells are not yet wrapped.
pub(crate) fn narrow_rows(records: &[Record]) -> Vec<Vec<String>> {
    let filled = with_reference_peers(records);
    records
        .iter()
        .zip(&filled)
        .map(|(r, filled)| {
            let t = r.timing.as_ref();
            let win = match win_cell(r, filled).as_str() {
                LOSES_TO_COMPILE => LOSES_TO_COMPILE_MARK.to_string(),
                other => other.to_string(),
            };
            vec![
                r.problem.clone(),
                candidate_cell(r),
                status_cell(r),
                f(t.map(|t| t.median_ms), 4),
                r.speedup
                    .as_ref()
                    .map(|s| {
                        format!(
                            "{} [{},{}]",
                            compact(s.median),
                            compact(s.ci_low),
                            compact(s.ci_high)
                        )
                    })
                    .unwrap_or_else(|| "-".into()),
                win,
                f(t.and_then(|t| t.floor_fraction).map(|x| 100.0 * x), 1),
                if r.is_reference() {
                    f(r.pytorch.as_ref().map(|p| p.reference_over_pytorch), 3)
                } else {
                    String::new()
                },
            ]
        })
        .collect()
}

fn text_width(s: &str) -> usize {
    s.lines().map(|l| l.chars().count()).max().unwrap_or(0)
}

/// `text` broken into lines of at most `width` characters, after a space, `_` or `/` where it
/// can (a name stays readable), inside a longer word where it must.
pub(crate) fn wrap_cell(text: &str, width: usize) -> String {
    let width = width.max(1);
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    // Pieces ending at a break opportunity.
    let mut pieces: Vec<String> = Vec::new();
    let mut piece = String::new();
    for c in text.chars() {
        piece.push(c);
        if matches!(c, ' ' | '_' | '/') {
            pieces.push(std::mem::take(&mut piece));
        }
    }
    if !piece.is_empty() {
        pieces.push(piece);
    }
    for piece in pieces {
        if line.chars().count() + piece.trim_end().chars().count() > width && !line.is_empty() {
            lines.push(line.trim_end().to_string());
            line.clear();
        }
        for c in piece.chars() {
            if line.chars().count() == width && c != ' ' {
                lines.push(std::mem::take(&mut line));
            }
            line.push(c);
        }
    }
    if !line.trim_end().is_empty() || lines.is_empty() {
        lines.push(line.trim_end().to_string());
    }
    lines.join("\n")
}

/// The default terminal table: [`NARROW_COLUMNS`], the problem, candidate and status cells
/// wrapped (at `_`, `/` and spaces) so that the table fits [`TERMINAL_WIDTH`] when the other
/// columns leave room for them.
pub(crate) fn narrow_table(records: &[Record]) -> String {
    let mut rows = narrow_rows(records);
    // The problem on its first row only.
    for i in (1..rows.len()).rev() {
        if rows[i][0] == rows[i - 1][0] {
            rows[i][0].clear();
        }
    }
    let width = |rows: &[Vec<String>], c: usize| {
        rows.iter()
            .map(|r| text_width(&r[c]))
            .chain([text_width(NARROW_COLUMNS[c])])
            .max()
            .unwrap_or(0)
    };
    // comfy-table's borders and padding: 3 per column and 1.
    let budget = TERMINAL_WIDTH - (3 * NARROW_COLUMNS.len() + 1);
    let fixed: usize = (3..NARROW_COLUMNS.len()).map(|c| width(&rows, c)).sum();
    if fixed + (0..3).map(|c| width(&rows, c)).sum::<usize>() > budget {
        // Status first (at most 10), then the problem (at most half of what is left, or all
        // the candidate does not need), then the candidate: each gets what the ones before
        // it left once wrapped.
        let mut room = budget.saturating_sub(fixed);
        for row in &mut rows {
            row[2] = wrap_cell(&row[2], 10);
        }
        room = room.saturating_sub(width(&rows, 2));
        let (p, c) = (width(&rows, 0), width(&rows, 1));
        let problem = p.min((room / 2).max(room.saturating_sub(c))).max(8);
        for row in &mut rows {
            row[0] = wrap_cell(&row[0], problem);
        }
        let candidate = room.saturating_sub(width(&rows, 0)).max(8);
        for row in &mut rows {
            row[1] = wrap_cell(&row[1], candidate);
        }
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_header(NARROW_COLUMNS.to_vec());
    for row in rows {
        t.add_row(row);
    }
    t.to_string()
}

/// The full per-record table ([`COLUMNS`]) for a terminal (`--wide`).
pub(crate) fn wide_table(records: &[Record]) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_header(COLUMNS.to_vec());
    for row in rows(records) {
        t.add_row(row);
    }
    t.to_string()
}
