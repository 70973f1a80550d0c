//! A run's outputs (docs/design.md §9): `results/<run-id>/` with `run.json`, `results.jsonl` (appended
//! as each record is measured), `summary.md`, `summary.csv`, and the table on stdout, of one
//! run or of several pooled ([`crate::results::pool_runs`]) for `dlrm-bench report`
//! ([`report`]). The terminal's default table fits [`TERMINAL_WIDTH`] columns
//! ([`narrow_table`]); `--wide`, `summary.md` and `summary.csv` have every column
//! ([`COLUMNS`]).
pub mod html;
pub mod metrics;
pub mod plots;
pub mod projection;
use crate::report::metrics::{
    loses_to_compile, with_reference_peers, Basis, GroupMetrics, Summary, FAST_P,
};
use crate::report::projection::{Projection, Workload};
use crate::results::pool::Pooled;
use crate::results::record::{Record, RecordLog, Status};
use anyhow::Context;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use std::path::{Path, PathBuf};

/// The line `summary.md` links the plots and the page with (after its heading).
pub fn markdown_links() -> &'static str {
    "Plots: [speedups](speedups.svg), [roofline](roofline.svg), [share of the floor]\
     (floor.svg); the whole report with input statistics: [report.html](report.html).\n\n"
}

fn f(v: Option<f64>, digits: usize) -> String {
    v.filter(|x| x.is_finite())
        .map(|x| format!("{x:.digits$}"))
        .unwrap_or_else(|| "-".into())
}

/// Column names of the per-record table (summary.md, summary.csv and `--wide`).
pub const COLUMNS: [&str; 17] = [
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
    "PyTorch ms",
    "ref / PyTorch",
    "speedup over eager",
    "torch.compile ms",
    "ref / torch.compile",
    "speedup over torch.compile",
];

/// The index in [`COLUMNS`] of the reference / eager ratio (bold in markdown when outside
/// parity).
const REF_OVER_EAGER: usize = 12;

/// The win column of a win over the reference that loses to `torch.compile`
/// ([`crate::report::metrics::CompileLoss`]).
pub const LOSES_TO_COMPILE: &str = "yes (loses to compile)";

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
pub fn markdown_rows(records: &[Record]) -> Vec<Vec<String>> {
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

/// A reference within this factor of eager's time (±10%) is at parity with it.
pub const PARITY_TOLERANCE: f64 = 0.1;

/// Whether a reference / eager time ratio is outside ±[`PARITY_TOLERANCE`] (below 0.9 or above
/// 1.1): the speedups over the reference are then skewed against those over eager.
pub fn outside_parity(reference_over_eager: f64) -> bool {
    reference_over_eager.is_finite()
        && !(1.0 - PARITY_TOLERANCE..=1.0 + PARITY_TOLERANCE).contains(&reference_over_eager)
}

/// How a reference / eager time ratio `q` skews the speedups over the reference against those
/// over eager. speedup over eager = eager / cand = (eager / ref)·(ref / cand) = speedup over the
/// reference / q, so the speedups over the reference are ×q of those over eager: `q` < 1 (a
/// reference faster than eager) makes them 1/q times smaller, `q` > 1 q times larger.
pub fn skew_note(q: f64) -> String {
    let how = if q < 1.0 {
        format!("{:.2}x smaller", 1.0 / q)
    } else {
        format!("{q:.2}x larger")
    };
    format!("speedups over the reference are ×{q:.2} of those over eager ({how})")
}

/// The reference-parity section of `summary.md`: per problem whose reference has a PyTorch
/// time, the reference / eager and reference / `torch.compile` ratios, a ratio outside parity
/// in bold with the factor by which it skews the speedups over the reference; `None` when no
/// reference has one.
pub fn parity_markdown(records: &[Record]) -> Option<String> {
    let refs: Vec<&Record> = records
        .iter()
        .filter(|r| {
            r.is_reference()
                && (r.pytorch.is_some()
                    || r.pytorch_compile.is_some()
                    || r.pytorch_compile_error.is_some())
        })
        .collect();
    if refs.is_empty() {
        return None;
    }
    let rows: Vec<Vec<String>> = refs
        .iter()
        .map(|r| {
            let eager = r.pytorch.as_ref();
            let compile = r.pytorch_compile.as_ref();
            let q = eager.map(|p| p.reference_over_pytorch);
            let skewed = q.is_some_and(outside_parity);
            let bold = |s: String| if skewed { format!("**{s}**") } else { s };
            vec![
                r.problem.clone(),
                f(r.timing.as_ref().map(|t| t.median_ms), 4),
                f(eager.map(|p| p.median_ms), 4),
                bold(f(q, 3)),
                if compile.is_none() && r.pytorch_compile_error.is_some() {
                    "failed".into()
                } else {
                    f(compile.map(|p| p.median_ms), 4)
                },
                f(compile.map(|p| p.reference_over_pytorch), 3),
                match q {
                    Some(q) if skewed => skew_note(q),
                    Some(_) => "within ±10% of eager".into(),
                    None => "-".into(),
                },
            ]
        })
        .collect();
    let skewed = refs
        .iter()
        .filter_map(|r| r.pytorch.as_ref())
        .filter(|p| outside_parity(p.reference_over_pytorch))
        .count();
    let mut s = format!(
        "The Rust reference's time over PyTorch's, per problem (below 1: the reference is \
         faster). A reference outside ±10% of eager is in bold: the speedups over it are the \
         speedups over eager times that ratio ({skewed} problem(s) here).\n\n"
    );
    s += &markdown_table(
        &[
            "problem",
            "ref ms",
            "eager ms",
            "ref / eager",
            "torch.compile ms",
            "ref / torch.compile",
            "speedups over the reference",
        ],
        &rows,
    );
    Some(s)
}

/// Widest the default terminal table may be, in characters.
pub const TERMINAL_WIDTH: usize = 120;

/// The default terminal table's columns ([`narrow_table`]); line breaks keep it narrow.
pub const NARROW_COLUMNS: [&str; 8] = [
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
pub const LOSES_TO_COMPILE_MARK: &str = "yes*";

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
pub fn narrow_rows(records: &[Record]) -> Vec<Vec<String>> {
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
pub fn wrap_cell(text: &str, width: usize) -> String {
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
pub fn narrow_table(records: &[Record]) -> String {
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
pub fn wide_table(records: &[Record]) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_header(COLUMNS.to_vec());
    for row in rows(records) {
        t.add_row(row);
    }
    t.to_string()
}

/// The p values of KernelBench's fast_p in the terminal's metrics table (`summary.md` has all
/// of [`FAST_P`]).
pub const TERMINAL_FAST_P: [f64; 2] = [1.0, 2.0];

/// The metrics table's column names, with fast_p at the p values `fast`. Line breaks keep the
/// terminal's table narrow; markdown and CSV put spaces there.
pub fn metric_columns(fast: &[f64]) -> Vec<String> {
    let mut c: Vec<String> = [
        "group",
        "win rate",
        "median\nspeedup\n(wins)",
        "median\nspeedup\n(correct)",
        "geomean\n(correct)",
        "correct",
    ]
    .map(String::from)
    .to_vec();
    c.extend(fast.iter().map(|p| format!("KernelBench\nfast_{p}")));
    c.push("suspect".into());
    c
}

/// The metrics table rows (columns as [`metric_columns`] with the same `fast`).
pub fn metric_rows(metrics: &[GroupMetrics], fast: &[f64]) -> Vec<Vec<String>> {
    metrics
        .iter()
        .map(|m| {
            let mut row = vec![
                m.group.clone(),
                format!("{}/{} ({:.1}%)", m.wins, m.problems, 100.0 * m.win_rate),
                f(m.median_speedup_wins, 3),
                f(m.median_speedup_correct, 3),
                f(m.geomean_speedup_correct, 3),
                format!("{}/{}", m.correct, m.candidates),
            ];
            row.extend(fast.iter().map(|p| {
                m.fast_p
                    .get(&format!("{p}"))
                    .map_or_else(|| "-".into(), |x| format!("{x:.2}"))
            }));
            row.push(m.suspect.to_string());
            row
        })
        .collect()
}

/// The title of one basis's metrics table — what the speedups are over and whether it is the
/// headline — and a line on how they were measured (for eager, on how many problems).
pub fn basis_title(summary: &Summary, basis: Basis) -> (String, String) {
    let role = if summary.headline_metrics().0 == basis {
        "headline"
    } else {
        "also"
    };
    let title = format!("Metrics {} ({role})", basis.describe());
    let detail = match basis {
        Basis::Reference => {
            "Paired speedups: the reference timed interleaved with each candidate on the same \
             inputs."
                .to_string()
        }
        Basis::Eager => format!(
            "Eager measured for {} of {} problems (only those count here); paired where eager \
             was timed interleaved with the candidate, else eager's median / the candidate's \
             (unpaired, no interval).",
            summary.eager_problems, summary.problems
        ),
        Basis::Compile => {
            let failed = match summary.compile_failures.len() {
                0 => String::new(),
                n => format!("; {n} Model(s) failed to compile and are left out"),
            };
            format!(
                "torch.compile measured for {} of {} problems (only those count here{failed}); \
                 the compiled Model's median / the candidate's (unpaired: timed in another \
                 process, so no interval).",
                summary.compile_problems, summary.problems
            )
        }
    };
    (title, detail)
}

/// What the report says of the bases it shows no table for (eager, torch.compile), and that
/// the reference is the headline when the basis asked for was not measured.
pub fn absent_notes(summary: &Summary) -> Vec<String> {
    let asked = |basis: Basis| {
        if summary.headline == basis {
            format!(" (--basis {basis} was asked for: the reference is the headline)")
        } else {
            String::new()
        }
    };
    let mut notes = Vec::new();
    if summary.eager.is_none() {
        notes.push(format!(
            "PyTorch eager was not measured in this run (`run --torch` or `--peer`): metrics \
             over the Rust reference only{}.",
            asked(Basis::Eager)
        ));
    }
    if summary.compile.is_none() {
        let why = if summary.compile_failures.is_empty() {
            "The torch.compile'd Model was not measured in this run (`run --torch eager,compile`)"
        } else {
            "No Model compiled under torch.compile"
        };
        notes.push(format!(
            "{why}: no metrics over it{}.",
            asked(Basis::Compile)
        ));
    }
    notes
}

/// The flagged wins over the reference that lose to torch.compile, one line each (none when
/// there are none); `None` when torch.compile was not measured.
pub fn compile_loss_lines(summary: &Summary) -> Option<Vec<String>> {
    summary.compile.as_ref()?;
    Some(
        summary
            .compile_losses
            .iter()
            .map(|l| {
                format!(
                    "{} / {}/{}: {:.3}x over the reference, {:.3}x over torch.compile",
                    l.problem, l.group, l.candidate, l.speedup_reference, l.speedup_compile
                )
            })
            .collect(),
    )
}

/// The problems whose Model failed to compile, one line each with the first line of why.
pub fn compile_failure_lines(summary: &Summary) -> Vec<String> {
    summary
        .compile_failures
        .iter()
        .map(|(problem, why)| format!("{problem}: {}", why.lines().next().unwrap_or("")))
        .collect()
}

/// Heading of the flagged list.
pub const COMPILE_LOSSES_TITLE: &str = "Wins over the reference that lose to torch.compile";
/// Heading of the list of Models that failed to compile.
pub const COMPILE_FAILURES_TITLE: &str =
    "Problems whose Model failed to compile (not on the torch.compile basis)";

/// One line on the headline basis: per group its wins, median speedup over them and
/// KernelBench's fast_1.
pub fn summary_line(summary: &Summary) -> String {
    let (basis, metrics) = summary.headline_metrics();
    let groups: Vec<String> = metrics
        .iter()
        .map(|m| {
            format!(
                "{} {}/{} wins ({:.1}%), median speedup over wins {}, KernelBench fast_1 {:.2}",
                m.group,
                m.wins,
                m.problems,
                100.0 * m.win_rate,
                f(m.median_speedup_wins, 3),
                m.fast_p.get("1").copied().unwrap_or(0.0)
            )
        })
        .collect();
    let groups = if groups.is_empty() {
        "no candidates".to_string()
    } else {
        groups.join("; ")
    };
    format!("Headline, {}: {groups}", basis.describe())
}

/// What the metrics mean, under the tables.
pub const METRICS_NOTE: &str = "fast_p is KernelBench's: the fraction of the problems for \
    which the group has a correct candidate faster than p× on the table's basis (a problem \
    counts once, however many candidates answer it). A win over the reference: correct and the \
    paired speedup's lower 95% bound above the win threshold; over eager: correct and the \
    paired lower bound above 1, or the unpaired ratio above 1; over torch.compile: correct and \
    the unpaired ratio above 1.";

/// `text` broken at spaces into lines of at most `width` characters (a longer word stays whole).
fn wrap(text: &str, width: usize) -> String {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        match lines.last_mut() {
            Some(line) if line.chars().count() + 1 + word.chars().count() <= width => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines.join("\n")
}

/// Width of the terminal's prose lines (titles and notes around the metrics tables).
const TERMINAL_TEXT_WIDTH: usize = 100;

/// The tables for a terminal: the records' table ([`narrow_table`], fitting
/// [`TERMINAL_WIDTH`]; with `wide`, [`wide_table`]: every column), then the metrics on each
/// basis measured, the flagged wins that lose to torch.compile and the Models that failed to
/// compile.
pub fn terminal_tables(records: &[Record], summary: &Summary, wide: bool) -> String {
    let wrapped = |text: &str| wrap(text, TERMINAL_TEXT_WIDTH);
    let mut s = if wide {
        wide_table(records)
    } else {
        narrow_table(records)
    };
    s.push('\n');
    if !wide {
        let mut legend = String::new();
        if summary.compile.is_some() {
            legend += &format!(
                "{LOSES_TO_COMPILE_MARK}: a win over the reference that loses to \
                 torch.compile. "
            );
        }
        legend += "ms: the candidate's median (the reference's on its row); speedup over the \
                   reference. --wide: every column.";
        s += &format!("{}\n", wrapped(&legend));
    }
    for (basis, metrics) in summary.tables() {
        let mut m = Table::new();
        m.load_preset(UTF8_FULL_CONDENSED)
            .set_header(metric_columns(&TERMINAL_FAST_P));
        for row in metric_rows(metrics, &TERMINAL_FAST_P) {
            m.add_row(row);
        }
        let (title, detail) = basis_title(summary, basis);
        s += &format!("\n{}\n{m}\n", wrapped(&format!("{title}. {detail}")));
    }
    for note in absent_notes(summary) {
        s += &format!("{}\n", wrapped(&note));
    }
    if let Some(lines) = compile_loss_lines(summary) {
        let body = if lines.is_empty() {
            "none".to_string()
        } else {
            lines
                .iter()
                .map(|l| wrap(&format!("- {l}"), TERMINAL_TEXT_WIDTH))
                .collect::<Vec<_>>()
                .join("\n")
        };
        let sep = if lines.is_empty() { " " } else { "\n" };
        s += &format!("\n{COMPILE_LOSSES_TITLE}:{sep}{body}\n");
    }
    let failures = compile_failure_lines(summary);
    if !failures.is_empty() {
        s += &format!("\n{}:\n", wrapped(COMPILE_FAILURES_TITLE));
        for l in failures {
            s += &format!("{}\n", wrap(&format!("- {l}"), TERMINAL_TEXT_WIDTH));
        }
    }
    for text in [METRICS_NOTE.to_string(), summary_line(summary)] {
        s += &format!("{}\n", wrapped(&text));
    }
    s.pop();
    s
}

fn markdown_table<S: AsRef<str>>(header: &[S], rows: &[Vec<String>]) -> String {
    let header: Vec<String> = header
        .iter()
        .map(|h| h.as_ref().replace('\n', " "))
        .collect();
    let mut s = format!(
        "| {} |\n|{}\n",
        header.join(" | "),
        " --- |".repeat(header.len())
    );
    for r in rows {
        s += &format!("| {} |\n", r.join(" | "));
    }
    s
}

/// `summary.md`.
pub fn write_markdown(
    dir: &Path,
    heading: &str,
    records: &[Record],
    summary: &Summary,
    suffix: &str,
) -> std::io::Result<()> {
    let text = markdown(heading, records, summary) + suffix;
    std::fs::write(dir.join("summary.md"), text)
}

/// The text of `summary.md`: the records, then the metrics on each basis measured, the
/// headline first.
pub fn markdown(heading: &str, records: &[Record], summary: &Summary) -> String {
    let mut s = format!("{heading}\n\n{}## Results\n\n", markdown_links());
    s += &markdown_table(&COLUMNS, &markdown_rows(records));
    if let Some(parity) = parity_markdown(records) {
        s += &format!("\n## Reference parity\n\n{parity}");
    }
    s += &format!(
        "\n## Metrics per candidate group\n\n{}.\n",
        summary_line(summary)
    );
    for (basis, metrics) in summary.tables() {
        let (title, detail) = basis_title(summary, basis);
        s += &format!("\n### {title}\n\n{detail}\n\n");
        s += &markdown_table(&metric_columns(&FAST_P), &metric_rows(metrics, &FAST_P));
    }
    for note in absent_notes(summary) {
        s += &format!("\n{note}\n");
    }
    s += &format!("\n{METRICS_NOTE}\n");
    if let Some(lines) = compile_loss_lines(summary) {
        s += &format!("\n## {COMPILE_LOSSES_TITLE}\n\n");
        if lines.is_empty() {
            s += "None: every win over the reference also beats torch.compile.\n";
        } else {
            s += "Each beats the Rust reference but is slower than the `torch.compile`d Model \
                  (marked `yes (loses to compile)` in the results):\n\n";
            for l in lines {
                s += &format!("- {l}\n");
            }
        }
    }
    let failures = compile_failure_lines(summary);
    if !failures.is_empty() {
        s += &format!("\n## {COMPILE_FAILURES_TITLE}\n\n");
        for l in failures {
            s += &format!("- {l}\n");
        }
    }
    if let Some(kb) = crate::kernelbench::verdicts_markdown(records) {
        s += "\n## KernelBench answers: our verdict beside KernelBench's\n\n";
        s += &kb;
    }
    let problems: Vec<&Record> = records
        .iter()
        .filter(|r| r.status != Status::Correct && !r.message.is_empty())
        .collect();
    if !problems.is_empty() {
        s += "\n## Messages\n\n";
        for r in problems {
            s += &format!(
                "- `{}` / `{}` ({}): {}\n",
                r.problem,
                r.candidate,
                r.status.name(),
                r.message.lines().next().unwrap_or("")
            );
        }
    }
    s
}

/// `summary.csv`.
pub fn write_csv(dir: &Path, records: &[Record]) -> std::io::Result<()> {
    std::fs::write(dir.join("summary.csv"), csv(records))
}

/// The text of `summary.csv`: [`COLUMNS`], then [`rows`] (`report --csv` prints it).
pub fn csv(records: &[Record]) -> String {
    let quote = |c: &str| {
        if c.contains([',', '"', '\n']) {
            format!("\"{}\"", c.replace('"', "\"\""))
        } else {
            c.to_string()
        }
    };
    let mut s = COLUMNS
        .iter()
        .map(|c| quote(c))
        .collect::<Vec<_>>()
        .join(",")
        + "\n";
    for r in rows(records) {
        s += &(r.iter().map(|c| quote(c)).collect::<Vec<_>>().join(",") + "\n");
    }
    s
}

/// What `report --json` prints: the pooled records and the [`Summary`] (and, with a workload,
/// the projection).
pub fn json(
    records: &[Record],
    summary: &Summary,
    projection: Option<serde_json::Value>,
) -> serde_json::Value {
    let mut v = serde_json::json!({ "summary": summary, "records": records });
    if let Some(p) = projection {
        v["projection"] = p;
    }
    v
}

/// How `report` prints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReportFormat {
    /// The tables, the records' table fitting [`TERMINAL_WIDTH`].
    #[default]
    Tables,
    /// The tables with every column (`--wide`).
    Wide,
    /// `summary.csv`'s rows on stdout (`--csv`).
    Csv,
    /// The pooled records and the summary as JSON on stdout (`--json`).
    Json,
}

/// `dlrm-bench report` (without `--merge`): the pooled sets' tables (or CSV, or JSON) on stdout,
/// with the projection onto `workload` when given, and with `out` the pooled files there.
pub fn report(
    pooled: &Pooled,
    summary: &Summary,
    workload: Option<(&Workload, &Projection)>,
    out: Option<&Path>,
    format: ReportFormat,
) -> anyhow::Result<()> {
    print!(
        "{}",
        pooled_report_text(pooled, summary, workload, out, format)?
    );
    Ok(())
}

/// What every rendering of `report` starts from: the sets read and pooled once, their summary
/// on a basis, and the projection onto a workload profile when one is given (emulator sets are
/// then warned about).
pub struct PooledReport {
    pub pooled: Pooled,
    pub summary: Summary,
    workload: Option<Workload>,
    projection: Option<Projection>,
}

impl PooledReport {
    /// Reads and pools the sets at `results`, with the profile at `workload`.
    pub fn read(
        results: &[PathBuf],
        workload: Option<&Path>,
        basis: Basis,
    ) -> anyhow::Result<Self> {
        let pooled = Pooled::read(results)?;
        if workload.is_some() {
            pooled.warn_emulator();
        }
        let summary = Summary::new(&pooled.records, pooled.problem_count(), basis);
        let workload = workload.map(Workload::load).transpose()?;
        let projection = workload
            .as_ref()
            .map(|w| crate::report::projection::project(w, &pooled.records, None));
        Ok(PooledReport {
            pooled,
            summary,
            workload,
            projection,
        })
    }

    /// The workload profile and the projection onto it, when one was given.
    pub fn projected(&self) -> Option<(&Workload, &Projection)> {
        self.workload.as_ref().zip(self.projection.as_ref())
    }
}

/// [`pooled_report_text`] of the sets at `results`, with the profile at `workload`.
pub fn report_text(
    results: &[PathBuf],
    workload: Option<&Path>,
    out: Option<&Path>,
    basis: Basis,
    format: ReportFormat,
) -> anyhow::Result<String> {
    let r = PooledReport::read(results, workload, basis)?;
    pooled_report_text(&r.pooled, &r.summary, r.projected(), out, format)
}

/// What [`report`] prints on stdout (with `--csv` and `--json` nothing else: the note on
/// `--out` goes to stderr, and with `--csv` the projection too).
pub fn pooled_report_text(
    pooled: &Pooled,
    summary: &Summary,
    workload: Option<(&Workload, &Projection)>,
    out: Option<&Path>,
    format: ReportFormat,
) -> anyhow::Result<String> {
    let records = &pooled.records;
    let projection_md = workload.map(|(w, p)| p.markdown(w));
    if let Some(dir) = out {
        // The projection section, as a run with --workload appends it to its summary.md.
        let suffix = projection_md
            .as_ref()
            .map_or(String::new(), |t| format!("\n{t}\n"));
        write_pooled(dir, &pooled.paths(), records, summary, &suffix)?;
    }
    let wrote = out.map(|dir| format!("wrote {}", dir.display()));
    let mut s = String::new();
    match format {
        ReportFormat::Tables | ReportFormat::Wide => {
            s += &format!(
                "{}\n",
                terminal_tables(records, summary, format == ReportFormat::Wide)
            );
            if let Some(kb) = crate::kernelbench::verdicts_markdown(records) {
                s += &format!("\nKernelBench answers: our verdict beside KernelBench's\n{kb}\n");
            }
            if let Some(w) = wrote {
                s += &format!("{w}\n");
            }
            if let Some(text) = &projection_md {
                s += &format!("{text}\n");
            }
        }
        ReportFormat::Csv => {
            s += &csv(records);
            if let Some(w) = wrote {
                eprintln!("{w}");
            }
            if let Some(text) = &projection_md {
                eprintln!("{text}");
            }
        }
        ReportFormat::Json => {
            let projection = workload.map(|(_, p)| p.to_json());
            s += &format!(
                "{}\n",
                serde_json::to_string_pretty(&json(records, summary, projection))?
            );
            if let Some(w) = wrote {
                eprintln!("{w}");
            }
        }
    }
    Ok(s)
}

/// The files of a pooled report in `dir`: summaries and a fresh `results.jsonl`.
fn write_pooled(
    dir: &Path,
    results: &[PathBuf],
    records: &[Record],
    summary: &Summary,
    summary_suffix: &str,
) -> anyhow::Result<()> {
    let same = |p: &PathBuf| {
        let input = if p.is_dir() {
            p.clone()
        } else {
            p.parent().unwrap_or(p).to_path_buf()
        };
        input.canonicalize().ok() == dir.canonicalize().ok()
    };
    anyhow::ensure!(
        !results.iter().any(same),
        "--out {} is one of the result sets read; give a new directory",
        dir.display()
    );
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    // A fresh pooled results.jsonl (RecordLog appends).
    let _ = std::fs::remove_file(dir.join("results.jsonl"));
    let sources: Vec<String> = results.iter().map(|p| p.display().to_string()).collect();
    let heading = format!("# DLRM-Bench report\n\nPooled from: {}", sources.join(", "));
    write_markdown(dir, &heading, records, summary, summary_suffix)?;
    write_csv(dir, records)?;
    let mut log = RecordLog::open(dir)?;
    for r in records {
        log.append(r)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::pool::incomplete_run_warning;
    use crate::results::pool_runs;
    use crate::results::record::read_records;

    #[test]
    fn an_incomplete_set_of_shards_is_named_with_the_missing_ones() {
        assert_eq!(incomplete_run_warning(&[0, 1], 2), None);
        assert_eq!(incomplete_run_warning(&[0], 1), None);
        let w = incomplete_run_warning(&[1], 3).unwrap();
        assert!(w.starts_with("1 of the run's 3 shards"), "{w}");
        assert!(w.contains("shard(s) 0/3, 2/3 missing"), "{w}");
    }

    fn rec(problem: &str, candidate: &str, ms: f64) -> Record {
        let mut r = Record::new(problem, candidate, "g", "test");
        r.status = Status::Correct;
        r.timing = Some(crate::results::record::Timing {
            median_ms: ms,
            ..Default::default()
        });
        r
    }

    /// embedding_bag_sum: reference 1.0 ms, eager 0.8 ms, candidate x 0.4 ms (2.5 over the
    /// reference, a win; 0.8 / 0.4 = 2.0 over eager). kjt_permute: no eager time, candidate y
    /// 0.5 over the reference.
    fn two_problems(with_eager: bool) -> Vec<Record> {
        let mut reference = rec("embedding_bag_sum", "reference", 1.0);
        reference.group = "reference".into();
        if with_eager {
            reference.pytorch = Some(crate::results::record::PeerTime {
                median_ms: 0.8,
                reference_over_pytorch: 1.25,
                source: "t".into(),
            });
        }
        let sp = |median: f64| {
            Some(crate::results::record::Speedup {
                median,
                ci_low: median - 0.1,
                ci_high: median + 0.1,
                pairs: 30,
            })
        };
        let mut x = rec("embedding_bag_sum", "x", 0.4);
        x.speedup = sp(2.5);
        x.win = true;
        let mut kjt_reference = rec("kjt_permute", "reference", 1.0);
        kjt_reference.group = "reference".into();
        let mut y = rec("kjt_permute", "y", 2.0);
        y.speedup = sp(0.5);
        vec![reference, x, kjt_reference, y]
    }

    #[test]
    fn the_markdown_shows_both_bases_headline_first() {
        let records = two_problems(true);
        let eager_row = "| g | 1/1 (100.0%) | 2.000 | 2.000 | 2.000 | 2/2 | 1.00 | 1.00 | 1.00 | \
                         1.00 | 1.00 | 0.00 | 0 |";
        let reference_row = "| g | 1/2 (50.0%) | 2.500 | 1.500 | 1.118 | 2/2 | 1.00 | 0.50 | \
                             0.50 | 0.50 | 0.50 | 0.50 | 0 |";
        let header = "| group | win rate | median speedup (wins) | median speedup (correct) | \
                      geomean (correct) | correct | KernelBench fast_0 | KernelBench fast_0.5 | \
                      KernelBench fast_0.8 | KernelBench fast_1 | KernelBench fast_1.5 | \
                      KernelBench fast_2 | suspect |";
        for (basis, first, second) in [
            (Basis::Eager, eager_row, reference_row),
            (Basis::Reference, reference_row, eager_row),
        ] {
            let md = markdown("# h", &records, &Summary::new(&records, 2, basis));
            let (a, b) = (md.find(first), md.find(second));
            assert!(a.is_some() && b.is_some() && a < b, "{basis}: {md}");
            assert_eq!(md.matches(header).count(), 2, "{md}");
            assert!(md.contains("Eager measured for 1 of 2 problems"), "{md}");
            assert!(md.contains("fast_p is KernelBench's"), "{md}");
            let (headline, other) = match basis {
                Basis::Eager => ("PyTorch eager", "the Rust reference"),
                Basis::Reference | Basis::Compile => ("the Rust reference", "PyTorch eager"),
            };
            let headline = format!("### Metrics over {headline} (headline)\n");
            let other = format!("### Metrics over {other} (also)\n");
            assert!(md.contains(&headline) && md.contains(&other), "{md}");
            if basis == Basis::Eager {
                assert!(
                    md.contains(
                        "Headline, over PyTorch eager: g 1/1 wins (100.0%), median \
                                 speedup over wins 2.000, KernelBench fast_1 1.00."
                    ),
                    "{md}"
                );
            }
            assert!(!md.contains("PyTorch eager was not measured"), "{md}");
            // The records' eager column: x's unpaired 2.0; none for y.
            assert!(
                md.contains("| 0.8000 | **1.250** |  |"),
                "the reference's row: {md}"
            );
            assert!(md.contains("| - | - | 2.000 |"), "x's row: {md}");
        }
    }

    fn peer(ms: f64, reference_ms: f64) -> Option<crate::results::record::PeerTime> {
        Some(crate::results::record::PeerTime {
            median_ms: ms,
            reference_over_pytorch: reference_ms / ms,
            source: "t".into(),
        })
    }

    fn paired(median: f64) -> Option<crate::results::record::Speedup> {
        Some(crate::results::record::Speedup {
            median,
            ci_low: median - 0.05,
            ci_high: median + 0.05,
            pairs: 30,
        })
    }

    /// embedding_bag_sum: reference 0.65 ms, eager 1.0 ms (ref / eager 0.65), compiled Model
    /// 0.4 ms; x at 0.5 ms is 1.3x the reference (a win), 2.0x eager, 0.8x the compiled Model
    /// (a loss to the compiler). kjt_permute: reference 1.0, eager 0.95 (1.053: at parity), the
    /// Model failed to compile; y wins 2.0x over the reference. fm_interaction: reference 1.2,
    /// eager 1.0 (1.2), compiled 0.6; z at 0.3 ms, 4.0x the reference, 2.0x the compiler.
    fn compile_set() -> Vec<Record> {
        let reference = |p: &str, ms, eager_ms, compile_ms: Option<f64>| {
            let mut r = rec(p, "reference", ms);
            r.group = "reference".into();
            r.pytorch = peer(eager_ms, ms);
            r.pytorch_compile = compile_ms.and_then(|c| peer(c, ms));
            if compile_ms.is_none() {
                r.pytorch_compile_error = Some("torch.compile failed: boom\ndetails".into());
            }
            r
        };
        let cand = |p: &str, name: &str, ms, sp| {
            let mut r = rec(p, name, ms);
            r.speedup = paired(sp);
            r.win = true;
            r
        };
        vec![
            reference("embedding_bag_sum", 0.65, 1.0, Some(0.4)),
            cand("embedding_bag_sum", "x", 0.5, 1.3),
            reference("kjt_permute", 1.0, 0.95, None),
            cand("kjt_permute", "y", 0.5, 2.0),
            reference("fm_interaction", 1.2, 1.0, Some(0.6)),
            cand("fm_interaction", "z", 0.3, 4.0),
        ]
    }

    #[test]
    fn the_skew_factor_is_the_reference_over_eager_ratio() {
        // By hand: x's speedups, 1.3 over the reference and 1.0 / 0.5 = 2.0 over eager; the
        // reference at 0.65 of eager's time makes the first 0.65 times the second.
        let records = compile_set();
        let filled = with_reference_peers(&records);
        let over_eager = Basis::Eager.speedup(&filled[1]).unwrap();
        let over_reference = Basis::Reference.speedup(&filled[1]).unwrap();
        assert!((over_eager - 2.0).abs() < 1e-12);
        assert!((over_reference / over_eager - 0.65).abs() < 1e-12);
        assert_eq!(
            skew_note(0.65),
            "speedups over the reference are ×0.65 of those over eager (1.54x smaller)"
        );
        assert_eq!(
            skew_note(1.2),
            "speedups over the reference are ×1.20 of those over eager (1.20x larger)"
        );
        assert!(outside_parity(0.65) && outside_parity(1.2) && outside_parity(0.899));
        assert!(!outside_parity(0.9) && !outside_parity(1.0) && !outside_parity(1.1));
        assert!(!outside_parity(1.053) && !outside_parity(f64::NAN));
    }

    #[test]
    fn the_markdown_bolds_a_reference_off_parity_and_states_the_skew() {
        let records = compile_set();
        let md = markdown(
            "# h",
            &records,
            &Summary::new(&records, 3, Basis::Reference),
        );
        // Results: the ratio in bold where off parity, plain where at parity.
        assert!(
            md.contains("| 1.0000 | **0.650** |  | 0.4000 | 1.625 |  |"),
            "{md}"
        );
        assert!(md.contains("| 0.9500 | 1.053 |  | failed | - |  |"), "{md}");
        assert!(
            md.contains("| 1.0000 | **1.200** |  | 0.6000 | 2.000 |  |"),
            "{md}"
        );
        // The parity section.
        assert!(md.contains("## Reference parity\n"), "{md}");
        assert!(md.contains("(2 problem(s) here)"), "{md}");
        for row in [
            "| embedding_bag_sum | 0.6500 | 1.0000 | **0.650** | 0.4000 | 1.625 | speedups over \
             the reference are ×0.65 of those over eager (1.54x smaller) |",
            "| kjt_permute | 1.0000 | 0.9500 | 1.053 | failed | - | within ±10% of eager |",
            "| fm_interaction | 1.2000 | 1.0000 | **1.200** | 0.6000 | 2.000 | speedups over the \
             reference are ×1.20 of those over eager (1.20x larger) |",
        ] {
            assert!(md.contains(row), "{row}\n{md}");
        }
        // Without any PyTorch time there is no parity section.
        let md = markdown(
            "# h",
            &two_problems(false),
            &Summary::new(&two_problems(false), 2, Basis::Reference),
        );
        assert!(!md.contains("Reference parity"), "{md}");
    }

    #[test]
    fn wins_that_lose_to_compile_are_flagged_and_failed_models_named() {
        let records = compile_set();
        let summary = Summary::new(&records, 3, Basis::Compile);
        let md = markdown("# h", &records, &summary);
        // x's row: a win over the reference that loses to the compiler, 0.8 over it.
        assert!(
            md.contains("| yes (loses to compile) | 0 | 0 | - | - | - | 2.000 | - | - | 0.800 |"),
            "{md}"
        );
        assert!(
            md.contains("| yes | 0 | 0 | - | - | - | 3.333 | - | - | 2.000 |"),
            "{md}"
        );
        assert!(
            md.contains("| yes | 0 | 0 | - | - | - | 1.900 | - | - | - |"),
            "{md}"
        );
        assert!(
            md.contains(
                "## Wins over the reference that lose to torch.compile\n\nEach beats the Rust \
                 reference but is slower than the `torch.compile`d Model (marked `yes (loses to \
                 compile)` in the results):\n\n- embedding_bag_sum / g/x: 1.300x over the \
                 reference, 0.800x over torch.compile\n"
            ),
            "{md}"
        );
        assert!(
            md.contains(
                "## Problems whose Model failed to compile (not on the torch.compile basis)\n\n\
                 - kjt_permute: torch.compile failed: boom\n"
            ),
            "{md}"
        );
        // The compile basis is the headline, over embedding_bag_sum and fm_interaction: x 0.8,
        // z 2.0 (y's problem has no compiled time). Win 1/2; median over wins 2.0; median of
        // the correct 1.4; geomean sqrt(1.6) = 1.265; fast_0.8 and fast_1: z only; fast_2:
        // none (2.0 is not faster than 2x).
        assert!(
            md.contains("### Metrics over torch.compile (headline)\n\ntorch.compile measured for 2 of 3 problems (only those count here; 1 Model(s) failed to compile and are left out)"),
            "{md}"
        );
        assert!(
            md.contains(
                "| g | 1/2 (50.0%) | 2.000 | 1.400 | 1.265 | 3/3 | 1.00 | 1.00 | 0.50 | 0.50 | \
                 0.50 | 0.00 | 0 |"
            ),
            "{md}"
        );
        assert!(
            md.find("over torch.compile (headline)") < md.find("over the Rust reference (also)")
        );
        assert!(md.find("over the Rust reference (also)") < md.find("over PyTorch eager (also)"));
        assert!(!md.contains("was not measured"), "{md}");
        // The terminal: x marked, the lists under the tables.
        let t = terminal_tables(&records, &summary, false);
        assert!(t.contains(LOSES_TO_COMPILE_MARK), "{t}");
        assert!(
            t.contains("yes*: a win over the reference that loses to torch.compile"),
            "{t}"
        );
        assert!(
            t.contains(
                "Wins over the reference that lose to torch.compile:\n- embedding_bag_sum / g/x: \
                 1.300x over the reference, 0.800x over torch.compile\n"
            ),
            "{t}"
        );
        assert!(
            t.contains("\n- kjt_permute: torch.compile failed: boom\n"),
            "{t}"
        );
        assert!(
            t.contains("Headline, over torch.compile: g 1/2 wins (50.0%)"),
            "{t}"
        );
        // No loss: said so.
        let mut fine = records.clone();
        fine[0].pytorch_compile = peer(1.0, 0.65);
        let md = markdown("# h", &fine, &Summary::new(&fine, 3, Basis::Reference));
        assert!(
            md.contains("None: every win over the reference also beats torch.compile."),
            "{md}"
        );
        assert!(!md.contains(LOSES_TO_COMPILE), "{md}");
        // Not measured: no list, a note, and the reference stands in for --basis compile.
        let plain = two_problems(true);
        let md = markdown("# h", &plain, &Summary::new(&plain, 2, Basis::Compile));
        assert!(!md.contains(COMPILE_LOSSES_TITLE), "{md}");
        assert!(
            md.contains("The torch.compile'd Model was not measured in this run"),
            "{md}"
        );
        assert!(md.contains("--basis compile was asked for"), "{md}");
        assert!(
            md.contains("### Metrics over the Rust reference (headline)"),
            "{md}"
        );
    }

    #[test]
    fn cells_wrap_at_underscores_slashes_and_spaces() {
        assert_eq!(
            wrap_cell("embedding_backward_rowwise_adagrad", 20),
            "embedding_backward_\nrowwise_adagrad"
        );
        assert_eq!(
            wrap_cell("examples/hash_ids_fused_zero_warp_update", 22),
            "examples/hash_ids_\nfused_zero_warp_update"
        );
        assert_eq!(
            wrap_cell("incorrect (EXPECTED correct)", 10),
            "incorrect\n(EXPECTED\ncorrect)"
        );
        assert_eq!(wrap_cell("abcdefghij", 4), "abcd\nefgh\nij");
        assert_eq!(wrap_cell("short", 10), "short");
        assert_eq!(wrap_cell("", 10), "");
    }

    /// The committed H200 result set (12 problems, 31 records), with a torch.compile time on
    /// every reference but one (whose Model failed), a win that loses to it and an unexpected
    /// status: the widest cells a real run has.
    fn h200_set() -> Vec<Record> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../results/20261201T193405Z-gpu-full/results.jsonl");
        let mut records = read_records(&path);
        assert_eq!(records.len(), 31, "{}", path.display());
        for r in records.iter_mut().filter(|r| r.is_reference()) {
            let ms = r.timing.as_ref().unwrap().median_ms;
            if r.problem == "kjt_permute" {
                r.pytorch_compile_error = Some("torch.compile failed: graph break".into());
            } else {
                r.pytorch_compile = peer(ms * 0.9, ms);
            }
        }
        // embedding_bag_sum's triton_row_tiles (0.406 ms) wins over the reference (1.83x) but
        // the compiled Model takes 0.67 ms... make it 0.3 ms: a loss to the compiler.
        let reference = records
            .iter_mut()
            .find(|r| r.problem == "embedding_bag_sum")
            .unwrap();
        reference.pytorch_compile = peer(0.3, 0.7442);
        let odd = records
            .iter_mut()
            .find(|r| r.candidate == "feature_copy")
            .unwrap();
        odd.status = Status::OutOfBoundsWrite;
        odd.expected_status = Some("correct".into());
        records
    }

    #[test]
    fn the_default_terminal_table_fits_120_columns_and_wide_has_every_column() {
        let records = h200_set();
        let summary = Summary::new(&records, 12, Basis::Compile);
        assert!(summary
            .compile_losses
            .iter()
            .any(|l| l.candidate == "triton_row_tiles"));
        let narrow = terminal_tables(&records, &summary, false);
        for line in narrow.lines() {
            assert!(
                line.chars().count() <= TERMINAL_WIDTH,
                "{} chars: {line}\n{narrow}",
                line.chars().count()
            );
        }
        let table = narrow_table(&records);
        let header: String = table.lines().take(3).collect::<Vec<_>>().join("\n");
        for c in [
            "problem",
            "candidate",
            "status",
            "ms",
            "speedup",
            "win",
            "% of",
            "ref /",
        ] {
            assert!(header.contains(c), "{c}: {header}");
        }
        assert_eq!(table.matches(LOSES_TO_COMPILE_MARK).count(), 1, "{table}");
        assert!(table.contains("21.24 [21.07,21.38]"), "{table}");
        assert!(table.contains("EXPECTED"), "{table}");
        // Every record has its row: each row starts on a line whose ms cell is filled.
        let body: Vec<&str> = table.lines().filter(|l| l.contains('.')).collect();
        assert!(body.len() >= records.len(), "{table}");
        // --wide: every column of summary.md, wider than 120.
        let wide = terminal_tables(&records, &summary, true);
        let first = wide.lines().next().unwrap();
        assert!(first.chars().count() > TERMINAL_WIDTH);
        for c in COLUMNS {
            let word = c.split(' ').next().unwrap();
            assert!(wide.contains(word), "{c}");
        }
        assert!(wide.contains("speedup over torch.compile") && wide.contains(LOSES_TO_COMPILE));
        assert!(!narrow.contains("cand GB/s") && wide.contains("cand GB/s (compulsory)"));
        let columns = |t: &str| t.lines().nth(1).unwrap().matches('┆').count() + 1;
        assert_eq!(columns(&table), NARROW_COLUMNS.len());
        assert_eq!(columns(&wide_table(&records)), COLUMNS.len());
    }

    /// Splits CSV text into rows of fields (RFC 4180 quoting).
    fn parse_csv(text: &str) -> Vec<Vec<String>> {
        let mut rows = Vec::new();
        let (mut row, mut field, mut quoted) = (Vec::new(), String::new(), false);
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match (c, quoted) {
                ('"', true) if chars.peek() == Some(&'"') => {
                    field.push('"');
                    chars.next();
                }
                ('"', _) => quoted = !quoted,
                (',', false) => row.push(std::mem::take(&mut field)),
                ('\n', false) => {
                    row.push(std::mem::take(&mut field));
                    rows.push(std::mem::take(&mut row));
                }
                (c, _) => field.push(c),
            }
        }
        assert!(
            !quoted && field.is_empty() && row.is_empty(),
            "a torn last row"
        );
        rows
    }

    #[test]
    fn report_csv_and_json_print_parseable_records() {
        let dir = std::env::temp_dir().join(format!("dlrm-report-csv-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut records = compile_set();
        records[1].message = "a \"quoted\", message".into();
        records[3].candidate = "y,comma".into();
        write_set(&dir, &records);
        let text = |format| {
            report_text(
                std::slice::from_ref(&dir),
                None,
                None,
                Basis::Compile,
                format,
            )
            .unwrap()
        };
        let csv_rows = parse_csv(&text(ReportFormat::Csv));
        assert_eq!(csv_rows[0], COLUMNS);
        assert_eq!(csv_rows.len(), 1 + records.len());
        assert!(csv_rows.iter().all(|r| r.len() == COLUMNS.len()));
        // Pooled in catalog order: embedding_bag_sum, kjt_permute, fm_interaction.
        assert_eq!(csv_rows[2][1], "g/x");
        assert_eq!(csv_rows[2][7], LOSES_TO_COMPILE);
        assert_eq!(csv_rows[2][16], "0.800");
        assert!(csv_rows.iter().any(|r| r[1] == "g/y,comma"));
        assert_eq!(
            text(ReportFormat::Csv),
            csv(&pool_runs(std::slice::from_ref(&dir)).unwrap())
        );
        let v: serde_json::Value = serde_json::from_str(&text(ReportFormat::Json)).unwrap();
        let back: Vec<Record> = serde_json::from_value(v["records"].clone()).unwrap();
        assert_eq!(back.len(), records.len());
        assert_eq!(back[1].message, "a \"quoted\", message");
        assert_eq!(v["summary"]["headline"], "compile");
        assert_eq!(v["summary"]["compile_problems"], 2);
        assert_eq!(v["summary"]["compile"][0]["wins"], 1);
        assert_eq!(v["summary"]["compile_losses"][0]["candidate"], "x");
        assert_eq!(
            v["summary"]["compile_failures"]["kjt_permute"],
            "torch.compile failed: boom\ndetails"
        );
        assert!(v.get("projection").is_none());
        // The tables are not in either.
        for format in [ReportFormat::Csv, ReportFormat::Json] {
            assert!(!text(format).contains('│'));
        }
        assert!(text(ReportFormat::Tables).contains('│'));
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn report_out_with_a_workload_puts_the_projection_in_summary_md() {
        let base = std::env::temp_dir().join(format!("dlrm-report-proj-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let (set, out) = (base.join("set"), base.join("pooled"));
        write_set(&set, &two_problems(true));
        let workload = base.join("w.toml");
        std::fs::write(
            &workload,
            "name = \"w\"\ndescription = \"d\"\nsource = \"test\"\n[fractions]\nembedding_bag_sum = 0.5\n",
        )
        .unwrap();
        let text = report_text(
            std::slice::from_ref(&set),
            Some(&workload),
            Some(&out),
            Basis::Reference,
            ReportFormat::Tables,
        )
        .unwrap();
        let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
        let section = &md[md.find("## End-to-end projection: w").expect("the section")..];
        // Candidate x: 2.0x over eager on half the step: 1 / (0.5 + 0.5 / 2) = 1.333x.
        assert!(
            section.contains("projected step speedup 1.333x"),
            "{section}"
        );
        assert!(text.contains("projected step speedup 1.333x"), "{text}");
        std::fs::remove_dir_all(&base).ok();
    }

    #[test]
    fn terminal_prose_is_wrapped() {
        assert_eq!(wrap("aa bb cc  dd", 5), "aa bb\ncc dd");
        assert_eq!(wrap("a verylongword b", 4), "a\nverylongword\nb");
        let records = two_problems(true);
        let t = terminal_tables(&records, &Summary::new(&records, 2, Basis::Eager), false);
        let after_tables = &t[t.rfind('┘').unwrap() + '┘'.len_utf8()..];
        assert!(after_tables.contains("fast_p is KernelBench's"), "{t}");
        for line in after_tables.lines() {
            assert!(line.chars().count() <= TERMINAL_TEXT_WIDTH, "{line}");
        }
    }

    #[test]
    fn without_eager_the_markdown_has_the_reference_table_and_says_so() {
        let records = two_problems(false);
        let md = markdown("# h", &records, &Summary::new(&records, 2, Basis::Eager));
        assert_eq!(md.matches("### Metrics over").count(), 1, "{md}");
        assert!(
            md.contains("### Metrics over the Rust reference (headline)\n"),
            "{md}"
        );
        assert!(
            md.contains("PyTorch eager was not measured in this run"),
            "{md}"
        );
        assert!(md.contains("--basis eager was asked for"), "{md}");
        assert!(md.contains("| g | 1/2 (50.0%) | 2.500 |"), "{md}");
        let terminal = terminal_tables(
            &records,
            &Summary::new(&records, 2, Basis::Reference),
            false,
        );
        assert!(
            terminal.contains("PyTorch eager was not measured"),
            "{terminal}"
        );
        assert!(terminal.contains("KernelBench"), "{terminal}");
        assert!(
            !terminal.contains("--basis eager was asked for"),
            "{terminal}"
        );
    }

    /// A result set of `recs` in `dir`.
    fn write_set(dir: &Path, recs: &[Record]) {
        std::fs::create_dir_all(dir).unwrap();
        let mut log = RecordLog::open(dir).unwrap();
        for r in recs {
            log.append(r).unwrap();
        }
    }

    #[test]
    fn pooled_runs_take_each_problem_from_its_last_run_in_catalog_order() {
        let dir = std::env::temp_dir().join(format!("dlrm-pool-{}", std::process::id()));
        let (a, b) = (dir.join("a"), dir.join("b"));
        for (d, recs) in [
            (
                &a,
                vec![
                    rec("unique_indices", "x", 2.0),
                    rec("embedding_bag_sum", "x", 1.0),
                    rec("unique_indices", "w", 9.0),
                ],
            ),
            (
                &b,
                vec![
                    rec("unique_indices", "x", 1.5),
                    rec("dot_interaction", "y", 3.0),
                ],
            ),
        ] {
            write_set(d, &recs);
        }
        let pooled = pool_runs(&[a.clone(), b.join("results.jsonl")]).unwrap();
        let got: Vec<(&str, &str, f64)> = pooled
            .iter()
            .map(|r| {
                let ms = r.timing.as_ref().unwrap().median_ms;
                (r.problem.as_str(), r.candidate.as_str(), ms)
            })
            .collect();
        // unique_indices comes wholly from run b: its `w` record from run a is gone.
        assert_eq!(
            got,
            [
                ("embedding_bag_sum", "x", 1.0),
                ("unique_indices", "x", 1.5),
                ("dot_interaction", "y", 3.0)
            ]
        );
        let missing = pool_runs(&[dir.join("nope")]).unwrap_err().to_string();
        assert!(missing.contains("nope") && missing.contains("no such results file"));
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn the_shards_of_one_run_pool_as_their_merge() {
        let dir = std::env::temp_dir().join(format!("dlrm-pool-shards-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let reference = |problem, ms| {
            let mut r = rec(problem, "reference", ms);
            r.group = "reference".into();
            r
        };
        // Shard `index` of 2 of the run `secret` names: its run.json as `run --shard` writes it.
        let shard = |name: &str, secret: u64, index: usize, recs: Vec<Record>| {
            let d = dir.join(name);
            write_set(&d, &recs);
            let mut run = crate::results::meta::sample_run_json();
            run["run_id"] = serde_json::json!(name);
            run["secret_seed"] = serde_json::json!(crate::runner::shard::SECRET_WITH_MERGE);
            run["secret_seed_sha256"] =
                serde_json::json!(crate::runner::shard::secret_digest(secret));
            run["shard"] = serde_json::json!({"index": index, "count": 2, "items": 7,
                "first_item": 0, "end_item": 7});
            run["problems"] =
                serde_json::json!([{"name": "embedding_bag_sum"}, {"name": "kjt_permute"}]);
            crate::results::run_dir::write_json(&d.join("run.json"), &run).unwrap();
            d
        };
        // The split runs through embedding_bag_sum: both shards measured its reference.
        let s0 = shard(
            "s0",
            7,
            0,
            vec![
                reference("embedding_bag_sum", 1.0),
                rec("embedding_bag_sum", "a", 0.5),
                rec("embedding_bag_sum", "b", 0.6),
            ],
        );
        let s1 = shard(
            "s1",
            7,
            1,
            vec![
                reference("embedding_bag_sum", 1.1),
                rec("embedding_bag_sum", "c", 0.7),
                reference("kjt_permute", 2.0),
                rec("kjt_permute", "d", 1.5),
            ],
        );
        let got = |paths: &[PathBuf]| -> Vec<(String, String, f64)> {
            pool_runs(paths)
                .unwrap()
                .iter()
                .map(|r| {
                    let ms = r.timing.as_ref().unwrap().median_ms;
                    (r.problem.clone(), r.candidate.clone(), ms)
                })
                .collect()
        };
        let whole = |v: &[(&str, &str, f64)]| -> Vec<(String, String, f64)> {
            v.iter()
                .map(|(p, c, ms)| (p.to_string(), c.to_string(), *ms))
                .collect()
        };
        let merged = whole(&[
            ("embedding_bag_sum", "reference", 1.0),
            ("embedding_bag_sum", "a", 0.5),
            ("embedding_bag_sum", "b", 0.6),
            ("embedding_bag_sum", "c", 0.7),
            ("kjt_permute", "reference", 2.0),
            ("kjt_permute", "d", 1.5),
        ]);
        // In either order, and with a shard given twice (or as its results.jsonl).
        assert_eq!(got(&[s0.clone(), s1.clone()]), merged);
        assert_eq!(got(&[s1.clone(), s0.clone()]), merged);
        assert_eq!(
            got(&[s0.clone(), s1.join("results.jsonl"), s0.clone()]),
            merged
        );
        // The merge's records are the same.
        let out = dir.join("merged");
        let records = crate::cmd::merge::merge(&[s0.clone(), s1.clone()], &out, None).unwrap();
        let from_merge: Vec<(String, String, f64)> = records
            .iter()
            .map(|r| {
                let ms = r.timing.as_ref().unwrap().median_ms;
                (r.problem.clone(), r.candidate.clone(), ms)
            })
            .collect();
        assert_eq!(from_merge, merged);
        // One shard alone is what it holds.
        assert_eq!(
            got(std::slice::from_ref(&s1)),
            whole(&[
                ("embedding_bag_sum", "reference", 1.1),
                ("embedding_bag_sum", "c", 0.7),
                ("kjt_permute", "reference", 2.0),
                ("kjt_permute", "d", 1.5),
            ])
        );
        // The shards together are one run of the pool: a later run replaces the problems it
        // measured candidates of, a shard of another run (another secret seed) is another run.
        let later = dir.join("later");
        write_set(
            &later,
            &[reference("kjt_permute", 2.2), rec("kjt_permute", "e", 1.0)],
        );
        let other = shard("other", 8, 1, vec![rec("embedding_bag_sum", "f", 0.9)]);
        assert_eq!(
            got(&[s0.clone(), s1.clone(), later, other]),
            whole(&[
                ("embedding_bag_sum", "f", 0.9),
                ("kjt_permute", "reference", 2.2),
                ("kjt_permute", "e", 1.0),
            ])
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn kernelbench_answers_pool_beside_the_native_records_of_another_run() {
        let dir = std::env::temp_dir().join(format!("dlrm-pool-kb-{}", std::process::id()));
        let (native, kb, kb2) = (dir.join("native"), dir.join("kb"), dir.join("kb2"));
        let reference = |ms| {
            let mut r = rec("embedding_bag_sum", "reference", ms);
            r.group = "reference".into();
            r
        };
        let answer = |group: &str, ms| {
            let mut r = rec("embedding_bag_sum", "01_embedding_bag_sum", ms);
            r.group = group.into();
            r.origin = format!("kernelbench:/a/{group}/01_embedding_bag_sum.py");
            r
        };
        for (d, recs) in [
            (
                &native,
                vec![reference(1.0), rec("embedding_bag_sum", "x", 0.5)],
            ),
            // The answers' run measured the reference again, and no native candidate.
            (
                &kb,
                vec![
                    reference(1.1),
                    answer("model_a", 0.7),
                    answer("model_b", 2.0),
                ],
            ),
            // A later run of model_b alone replaces model_b's answer, not model_a's.
            (&kb2, vec![reference(1.2), answer("model_b", 0.9)]),
        ] {
            write_set(d, &recs);
        }
        let pooled = pool_runs(&[native.clone(), kb.clone(), kb2.clone()]).unwrap();
        let got: Vec<(&str, &str, f64)> = pooled
            .iter()
            .map(|r| {
                let ms = r.timing.as_ref().unwrap().median_ms;
                (r.group.as_str(), r.candidate.as_str(), ms)
            })
            .collect();
        assert_eq!(
            got,
            [
                ("reference", "reference", 1.0),
                ("g", "x", 0.5),
                ("model_a", "01_embedding_bag_sum", 0.7),
                ("model_b", "01_embedding_bag_sum", 0.9),
            ]
        );
        // Alone, the answers' run gives its own reference.
        let alone = pool_runs(std::slice::from_ref(&kb)).unwrap();
        assert_eq!(alone[0].timing.as_ref().unwrap().median_ms, 1.1);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_pooled_report_goes_to_a_new_directory_never_over_a_set_it_read() {
        let dir = std::env::temp_dir().join(format!("dlrm-report-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let run = dir.join("run");
        write_set(
            &run,
            &[
                rec("embedding_bag_sum", "x", 1.0),
                rec("kjt_permute", "y", 2.0),
            ],
        );
        let err = report_text(
            &[run.join("results.jsonl")],
            None,
            Some(&run),
            Basis::Reference,
            ReportFormat::Tables,
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("is one of the result sets read"),
            "{err}"
        );
        let out = dir.join("pooled");
        for _ in 0..2 {
            // Twice: the pooled results.jsonl is written afresh, not appended to.
            report_text(
                std::slice::from_ref(&run),
                None,
                Some(&out),
                Basis::Reference,
                ReportFormat::Tables,
            )
            .unwrap();
            assert_eq!(read_records(&out.join("results.jsonl")).len(), 2);
        }
        let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
        let heading = format!("# DLRM-Bench report\n\nPooled from: {}\n", run.display());
        assert!(md.starts_with(&heading), "{md}");
        assert!(out.join("summary.csv").is_file());
        std::fs::remove_dir_all(&dir).ok();
    }
}
