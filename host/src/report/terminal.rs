//! What the terminal shows beside the records: why records are not correct, the metrics tables per basis, their titles and notes, the one-line summary.
use super::cells::f;
use super::reasons::{reason_lines, skipped_note};
use super::rows::narrow_table;
use super::rows::wide_table;
use super::rows::LOSES_TO_COMPILE_MARK;
use crate::report::metrics::Basis;
use crate::report::metrics::GroupMetrics;
use crate::report::metrics::Summary;
use crate::results::record::Record;
use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::Table;

/// The p values of KernelBench's fast_p in the terminal's metrics table (`summary.md` has all
/// of [`FAST_P`]).
pub(crate) const TERMINAL_FAST_P: [f64; 2] = [1.0, 2.0];

/// The metrics table's column names, with fast_p at the p values `fast`. Line breaks keep the
/// terminal's table narrow; markdown and CSV put spaces there.
pub(crate) fn metric_columns(fast: &[f64]) -> Vec<String> {
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
pub(crate) fn metric_rows(metrics: &[GroupMetrics], fast: &[f64]) -> Vec<Vec<String>> {
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
pub(crate) fn basis_title(summary: &Summary, basis: Basis) -> (String, String) {
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
pub(crate) fn absent_notes(summary: &Summary) -> Vec<String> {
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
pub(crate) fn compile_loss_lines(summary: &Summary) -> Option<Vec<String>> {
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
pub(crate) fn compile_failure_lines(summary: &Summary) -> Vec<String> {
    summary
        .compile_failures
        .iter()
        .map(|(problem, why)| format!("{problem}: {}", why.lines().next().unwrap_or("")))
        .collect()
}

/// Heading of the flagged list.
pub(crate) const COMPILE_LOSSES_TITLE: &str = "Wins over the reference that lose to torch.compile";
/// Heading of the list of Models that failed to compile.
pub(crate) const COMPILE_FAILURES_TITLE: &str =
    "Problems whose Model failed to compile (not on the torch.compile basis)";

/// One line on the headline basis: per group its wins, median speedup over them and
/// KernelBench's fast_1.
pub(crate) fn summary_line(summary: &Summary) -> String {
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
pub(crate) const METRICS_NOTE: &str = "fast_p is KernelBench's: the fraction of the problems for \
    which the group has a correct candidate faster than p× on the table's basis (a problem \
    counts once, however many candidates answer it). A win over the reference: correct and the \
    paired speedup's lower 95% bound above the win threshold; over eager: correct and the \
    paired lower bound above 1, or, timed in another process, PyTorch's p10 over the \
    candidate's p90 above 1 (the ratio of medians where the record has no spread); over \
    torch.compile: correct and the same unpaired rule.";

/// `text` broken at spaces into lines of at most `width` characters (a longer word stays whole).
pub(crate) fn wrap(text: &str, width: usize) -> String {
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
pub(crate) const TERMINAL_TEXT_WIDTH: usize = 100;

/// The tables for a terminal: the records' table ([`narrow_table`], fitting
/// [`TERMINAL_WIDTH`]; with `wide`, [`wide_table`]: every column), then the metrics on each
/// basis measured, the flagged wins that lose to torch.compile and the Models that failed to
/// compile.
pub(crate) fn terminal_tables(records: &[Record], summary: &Summary, wide: bool) -> String {
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
    if records.iter().any(|r| !r.shapes.is_empty()) {
        s += &format!(
            "{}\n",
            wrapped(
                "Each row is over the problem's shapes: geometric means, correct only at every \
                 shape. Each shape's figures: summary.md, section Shapes."
            )
        );
    }
    let reasons = reason_lines(records);
    if !reasons.is_empty() {
        s += "\nWhy not correct (every message whole: summary.md, section Messages):\n";
        for l in reasons {
            s += &format!("{}\n", wrap(&format!("- {l}"), TERMINAL_TEXT_WIDTH));
        }
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
    for note in absent_notes(summary)
        .into_iter()
        .chain(skipped_note(records))
    {
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
