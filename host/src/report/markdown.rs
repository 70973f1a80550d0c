//! `summary.md`, `summary.csv` and the JSON records: the run's report as files.
use super::parity::parity_markdown;
use super::rows::markdown_links;
use super::rows::markdown_rows;
use super::rows::rows;
use super::rows::COLUMNS;
use super::terminal::absent_notes;
use super::terminal::basis_title;
use super::terminal::compile_failure_lines;
use super::terminal::compile_loss_lines;
use super::terminal::metric_columns;
use super::terminal::metric_rows;
use super::terminal::summary_line;
use super::terminal::COMPILE_FAILURES_TITLE;
use super::terminal::COMPILE_LOSSES_TITLE;
use super::terminal::METRICS_NOTE;
use crate::report::markdown_table;
use crate::report::metrics::Summary;
use crate::report::metrics::FAST_P;
use crate::results::record::Record;
use crate::results::record::Status;
use std::path::Path;

/// `summary.md`.
pub(crate) fn write_markdown(
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
    let shapes = crate::report::shapes::shape_rows(records);
    if !shapes.is_empty() {
        s += &format!("\n## Shapes\n\n{}\n\n", crate::report::shapes::SHAPES_NOTE);
        s += &markdown_table(&crate::report::shapes::SHAPE_COLUMNS, &shapes);
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
            let mut lines = r.message.lines();
            s += &format!(
                "- `{}` / `{}` ({}): {}\n",
                r.problem,
                r.candidate,
                r.status.name(),
                lines.next().unwrap_or("")
            );
            // The rest of a multi-line message (a compiler's log, a parser's hint) kept whole.
            let rest: Vec<&str> = lines.collect();
            if !rest.is_empty() {
                s += &format!("\n  ```text\n  {}\n  ```\n", rest.join("\n  "));
            }
        }
    }
    s
}

/// `summary.csv`.
pub(crate) fn write_csv(dir: &Path, records: &[Record]) -> std::io::Result<()> {
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

/// What `report --json` prints: the pooled records as measured (one per problem, shape and
/// candidate, as in `results.jsonl`) and the [`Summary`] over the shapes (and, with a
/// workload, the projection).
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
