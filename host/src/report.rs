//! A run's outputs (DESIGN §9): `results/<run-id>/` with `run.json`, `results.jsonl` (appended
//! as each record is measured), `summary.md`, `summary.csv`, and the table on stdout; and
//! [`pool_runs`], which merges the records of several runs for `dlrm-bench report` ([`report`])
//! and `project`.
use crate::metrics::{Basis, GroupMetrics, Summary, FAST_P};
use crate::record::{read_records, Record, RecordLog, Status};
use anyhow::Context;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The records of several result sets (directories or `results.jsonl` files), pooled by
/// problem: each problem's native records (reference, candidates) all come from the last path
/// given that measured candidates of it (or, when none did, from the last that measured it), so
/// a candidate's time and the reference's and PyTorch's it is compared with are from one run.
/// KernelBench answers (origin `kernelbench:…`) carry their own comparisons: each (problem,
/// group) of them comes from the last path that has it, beside the native records. Ordered by
/// problem number, then as recorded.
pub fn pool_runs(paths: &[PathBuf]) -> anyhow::Result<Vec<Record>> {
    let answer = |r: &Record| r.origin.starts_with(crate::kernelbench::ORIGIN_PREFIX);
    let mut pooled: Vec<Record> = Vec::new();
    for path in paths {
        let file = if path.is_dir() {
            path.join("results.jsonl")
        } else {
            path.clone()
        };
        anyhow::ensure!(file.is_file(), "{}: no such results file", file.display());
        let found = read_records(&file);
        anyhow::ensure!(!found.is_empty(), "{}: no records", file.display());
        let (answers, native): (Vec<Record>, Vec<Record>) = found.into_iter().partition(answer);
        let replaces = |problem: &str, pooled: &[Record]| {
            native
                .iter()
                .any(|r| r.problem == problem && !r.is_reference())
                || !pooled.iter().any(|p| p.problem == problem && !answer(p))
        };
        let problems: BTreeSet<String> = native
            .iter()
            .map(|r| r.problem.clone())
            .filter(|p| replaces(p, &pooled))
            .collect();
        pooled.retain(|p| answer(p) || !problems.contains(&p.problem));
        pooled.extend(native.into_iter().filter(|r| problems.contains(&r.problem)));
        pooled.retain(|p| {
            !answer(p)
                || !answers
                    .iter()
                    .any(|a| a.problem == p.problem && a.group == p.group)
        });
        pooled.extend(answers);
    }
    let number =
        |r: &Record| bench_problems::find_problem(&r.problem).map_or(u32::MAX, |p| p.number());
    pooled.sort_by_key(number); // stable: recorded order inside a problem
    Ok(pooled)
}

/// The result sets among `paths` (directories or their results.jsonl) whose `run.json` says
/// they ran on the CPU emulator (`timings_are_gpu_timings: false`).
pub fn emulator_sets(paths: &[PathBuf]) -> Vec<PathBuf> {
    paths
        .iter()
        .filter(|path| {
            let dir = if path.is_dir() {
                path.as_path()
            } else {
                path.parent().unwrap_or(Path::new("."))
            };
            std::fs::read_to_string(dir.join("run.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                .and_then(|v| v["timings_are_gpu_timings"].as_bool())
                == Some(false)
        })
        .cloned()
        .collect()
}

/// Warns on stderr about each of [`emulator_sets`]: its timings say nothing about a GPU, so
/// neither does a projection from them.
pub fn warn_emulator_sets(paths: &[PathBuf]) {
    for path in emulator_sets(paths) {
        eprintln!(
            "warning: {} ran on the CPU emulator: its timings are NOT GPU timings, and a \
             projection from them says nothing about a GPU step",
            path.display()
        );
    }
}

fn f(v: Option<f64>, digits: usize) -> String {
    v.filter(|x| x.is_finite())
        .map(|x| format!("{x:.digits$}"))
        .unwrap_or_else(|| "-".into())
}

/// Column names of the per-record table (shared by stdout, markdown and CSV).
pub const COLUMNS: [&str; 14] = [
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
];

/// One table row per record. A candidate's speedup over eager is [`Basis::Eager`]'s: paired
/// with its interval, or the unpaired ratio to the eager time of its problem's reference.
pub fn rows(records: &[Record]) -> Vec<Vec<String>> {
    let filled = crate::metrics::with_reference_eager(records);
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
            vec![
                r.problem.clone(),
                if r.is_reference() {
                    "(reference)".into()
                } else {
                    format!("{}/{}", r.group, r.candidate)
                },
                if r.unexpected() {
                    format!(
                        "{} (EXPECTED {})",
                        r.status.name(),
                        r.expected_status.as_deref().unwrap_or("")
                    )
                } else {
                    r.status.name().into()
                },
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
                if r.is_reference() {
                    "".into()
                } else if r.win {
                    "yes".into()
                } else {
                    "no".into()
                },
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
            ]
        })
        .collect()
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
        "median speedup\n(wins)",
        "median speedup\n(correct)",
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
    };
    (title, detail)
}

/// What the report says when it shows no eager table.
pub fn eager_absent_note(summary: &Summary) -> Option<String> {
    summary.eager.is_none().then(|| {
        let asked = if summary.headline == Basis::Eager {
            " (--basis eager was asked for: the reference is the headline)"
        } else {
            ""
        };
        format!(
            "PyTorch eager was not measured in this run (`run --torch` or `--peer`): metrics \
             over the Rust reference only{asked}."
        )
    })
}

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
    paired lower bound above 1, or the unpaired ratio above 1.";

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

/// The tables for a terminal.
pub fn terminal_tables(records: &[Record], summary: &Summary) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_header(COLUMNS.to_vec());
    for row in rows(records) {
        t.add_row(row);
    }
    let mut s = format!(
        "{t}
"
    );
    for (basis, metrics) in summary.tables() {
        let mut m = Table::new();
        m.load_preset(UTF8_FULL_CONDENSED)
            .set_header(metric_columns(&TERMINAL_FAST_P));
        for row in metric_rows(metrics, &TERMINAL_FAST_P) {
            m.add_row(row);
        }
        let (title, detail) = basis_title(summary, basis);
        s += &format!(
            "\n{}\n{m}\n",
            wrap(&format!("{title}. {detail}"), TERMINAL_TEXT_WIDTH)
        );
    }
    if let Some(note) = eager_absent_note(summary) {
        s += &format!("{}\n", wrap(&note, TERMINAL_TEXT_WIDTH));
    }
    for text in [METRICS_NOTE.to_string(), summary_line(summary)] {
        s += &format!("{}\n", wrap(&text, TERMINAL_TEXT_WIDTH));
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
) -> std::io::Result<()> {
    std::fs::write(dir.join("summary.md"), markdown(heading, records, summary))
}

/// The text of `summary.md`: the records, then the metrics on each basis measured, the
/// headline first.
pub fn markdown(heading: &str, records: &[Record], summary: &Summary) -> String {
    let mut s = format!(
        "{heading}\n\n{}## Results\n\n",
        crate::report_html::markdown_links()
    );
    s += &markdown_table(&COLUMNS, &rows(records));
    s += &format!(
        "\n## Metrics per candidate group\n\n{}.\n",
        summary_line(summary)
    );
    for (basis, metrics) in summary.tables() {
        let (title, detail) = basis_title(summary, basis);
        s += &format!("\n### {title}\n\n{detail}\n\n");
        s += &markdown_table(&metric_columns(&FAST_P), &metric_rows(metrics, &FAST_P));
    }
    if let Some(note) = eager_absent_note(summary) {
        s += &format!("\n{note}\n");
    }
    s += &format!("\n{METRICS_NOTE}\n");
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
    let quote = |c: &str| {
        if c.contains([',', '"']) {
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
    std::fs::write(dir.join("summary.csv"), s)
}

/// `dlrm-bench report`: the tables and metrics of the pooled `results`; with `out`, also
/// `summary.md`, `summary.csv` and the pooled `results.jsonl` there (never over one of the
/// result sets read); with `workload`, the projection.
pub fn report(
    results: &[PathBuf],
    workload: Option<&Path>,
    out: Option<&Path>,
    basis: Basis,
) -> anyhow::Result<()> {
    if workload.is_some() {
        warn_emulator_sets(results);
    }
    let records = pool_runs(results)?;
    let mut problems: Vec<&str> = records.iter().map(|r| r.problem.as_str()).collect();
    problems.dedup();
    let summary = Summary::new(&records, problems.len(), basis);
    println!("{}", terminal_tables(&records, &summary));
    if let Some(kb) = crate::kernelbench::verdicts_markdown(&records) {
        println!("\nKernelBench answers: our verdict beside KernelBench's\n{kb}");
    }
    if let Some(dir) = out {
        write_pooled(dir, results, &records, &summary)?;
        println!("wrote {}", dir.display());
    }
    if let Some(w) = workload {
        println!("{}", crate::projection::project_file(w, &records, None)?);
    }
    Ok(())
}

/// The files of a pooled report in `dir`: summaries and a fresh `results.jsonl`.
fn write_pooled(
    dir: &Path,
    results: &[PathBuf],
    records: &[Record],
    summary: &Summary,
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
    write_markdown(dir, &heading, records, summary)?;
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

    fn rec(problem: &str, candidate: &str, ms: f64) -> Record {
        let mut r = Record::new(problem, candidate, "g", "test");
        r.status = Status::Correct;
        r.timing = Some(crate::record::Timing {
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
            reference.pytorch = Some(crate::record::PeerTime {
                median_ms: 0.8,
                reference_over_pytorch: 1.25,
                source: "t".into(),
            });
        }
        let sp = |median: f64| {
            Some(crate::record::Speedup {
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
                Basis::Reference => ("the Rust reference", "PyTorch eager"),
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
            assert!(!md.contains("not measured"), "{md}");
            // The records' eager column: x's unpaired 2.0; none for y.
            assert!(
                md.contains("| 0.8000 | 1.250 |  |"),
                "the reference's row: {md}"
            );
            assert!(md.contains("| - | - | 2.000 |"), "x's row: {md}");
        }
    }

    #[test]
    fn terminal_prose_is_wrapped() {
        assert_eq!(wrap("aa bb cc  dd", 5), "aa bb\ncc dd");
        assert_eq!(wrap("a verylongword b", 4), "a\nverylongword\nb");
        let records = two_problems(true);
        let t = terminal_tables(&records, &Summary::new(&records, 2, Basis::Eager));
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
        let terminal = terminal_tables(&records, &Summary::new(&records, 2, Basis::Reference));
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
            std::fs::create_dir_all(d).unwrap();
            let mut log = RecordLog::open(d).unwrap();
            for r in &recs {
                log.append(r).unwrap();
            }
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
            std::fs::create_dir_all(d).unwrap();
            let mut log = RecordLog::open(d).unwrap();
            for r in &recs {
                log.append(r).unwrap();
            }
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
        std::fs::create_dir_all(&run).unwrap();
        let mut log = RecordLog::open(&run).unwrap();
        for r in [
            rec("embedding_bag_sum", "x", 1.0),
            rec("kjt_permute", "y", 2.0),
        ] {
            log.append(&r).unwrap();
        }
        let err = report(
            &[run.join("results.jsonl")],
            None,
            Some(&run),
            Basis::Reference,
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("is one of the result sets read"),
            "{err}"
        );
        let out = dir.join("pooled");
        for _ in 0..2 {
            // Twice: the pooled results.jsonl is written afresh, not appended to.
            report(
                std::slice::from_ref(&run),
                None,
                Some(&out),
                Basis::Reference,
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
