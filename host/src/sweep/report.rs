//! `dlrm-bench sweep report`: one row per model over its k samples, from the sweep's
//! `answers.jsonl` and the records `sweep score` wrote under `results/`. An answer that was not
//! extracted, or has no record, counts as not correct.
//!
//! * correct %: answers whose record is `correct`, of all the model's answers;
//! * pass@1 and pass@k: the unbiased estimator `1 - C(n-c, k) / C(n, k)` per problem (n
//!   samples, c correct), averaged over the model's problems;
//! * win rate: problems any of whose k samples wins (the speedup's lower bound above 1), of the
//!   model's problems — per basis (the Rust reference, PyTorch eager, and the `torch.compile`d
//!   Model when the scoring measured it);
//! * fast_1: answers correct and faster than the basis (KernelBench's fast_p at p = 1);
//! * median speedup over the correct answers;
//! * tokens and cost (the config's prices) per correct answer and per win;
//! * answers KernelBench's own check passes and the suite rejects, by the suite's status.
use super::config::{ModelConfig, SweepConfig};
use super::generate::{read_index, AnswerRecord};
use crate::evaluate::quantiles::median;
use crate::report::markdown_table;
use crate::report::metrics::{with_reference_peers, Basis};
use crate::report::plots::{sweep_win_rates, ModelWins, Plot};
use crate::report::projection::{project, Projection, Workload};
use crate::results::record::{Record, Status};
use anyhow::Context;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One model's row.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ModelRow {
    pub model: String,
    pub samples: u32,
    pub problems: usize,
    pub answers: usize,
    pub extracted: usize,
    pub correct: usize,
    pub pass_at_1: f64,
    pub pass_at_k: f64,
    /// Problems won by any sample, per basis, of `problems`.
    pub wins_reference: usize,
    pub wins_eager: usize,
    /// `None` when no answer's scoring timed the `torch.compile`d Model.
    pub wins_compile: Option<usize>,
    pub fast_1_reference: f64,
    pub median_speedup_reference: Option<f64>,
    pub median_speedup_eager: Option<f64>,
    pub median_speedup_compile: Option<f64>,
    pub tokens: u64,
    pub cost_usd: f64,
    /// The suite's status of answers KernelBench's check passed but the suite did not.
    pub kernelbench_only: BTreeMap<String, usize>,
    /// Median speedup over PyTorch eager of the answers that win over it.
    pub median_eager_win: Option<f64>,
    /// With a workload profile: the share of its step time the model's best wins would save
    /// (1 - the new time share), and the step's addressable fraction.
    pub projected_time_saved: Option<f64>,
    pub addressable: Option<f64>,
}

/// `1 - C(n-c, k) / C(n, k)`: the chance that k of n samples, c of them correct, hold a
/// correct one (Chen et al. 2021), as a product to stay exact for large n.
pub fn pass_at_k(n: u32, c: u32, k: u32) -> f64 {
    if n == 0 || k == 0 {
        return 0.0;
    }
    if n - c.min(n) < k {
        return 1.0;
    }
    let mut miss = 1.0;
    for i in (n - c + 1)..=n {
        miss *= 1.0 - k as f64 / i as f64;
    }
    1.0 - miss
}

/// The records of every result set under `dir/results`.
fn scored_records(dir: &Path) -> anyhow::Result<Vec<Record>> {
    let root = dir.join("results");
    let mut sets: Vec<PathBuf> = match std::fs::read_dir(&root) {
        Ok(entries) => entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join("results.jsonl").is_file())
            .collect(),
        Err(_) => Vec::new(),
    };
    sets.sort();
    if sets.is_empty() {
        return Ok(Vec::new());
    }
    crate::results::pool_runs(&sets, false).with_context(|| root.display().to_string())
}

/// The record of an extracted answer: its group is `<model>-s<k>`, its problem the answer's
/// (an answer with no files has none, whatever an earlier scoring left).
fn record_of<'r>(records: &'r [Record], a: &AnswerRecord) -> Option<&'r Record> {
    a.path.as_ref()?;
    let group = format!("{}-s{}", a.model, a.sample);
    records
        .iter()
        .find(|r| r.group == group && r.problem == a.problem && !r.is_reference())
}

/// The rows of the sweep in `dir`, projected onto `workload` when given.
pub fn rows(dir: &Path, workload: Option<&Workload>) -> anyhow::Result<Vec<ModelRow>> {
    let cfg = SweepConfig::load(&dir.join("sweep.toml"))?;
    let answers = read_index(dir)?;
    let records = with_reference_peers(&scored_records(dir)?);
    Ok(cfg
        .models
        .iter()
        .map(|m| {
            let mut r = row(m, &answers, &records);
            if let Some(w) = workload {
                let p = project_model(w, &m.name, &records);
                r.projected_time_saved = Some(p.time_saved());
                r.addressable = Some(p.addressable);
            }
            r
        })
        .collect())
}

/// The projection of model `model`'s wins (any sample's; the best per problem) onto `w`.
fn project_model(w: &Workload, model: &str, records: &[Record]) -> Projection {
    let of_model = |g: &str| {
        g.rsplit_once("-s").is_some_and(|(m, k)| {
            m == model && !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit())
        })
    };
    let mine: Vec<Record> = records
        .iter()
        .filter(|r| r.is_reference() || of_model(&r.group))
        .cloned()
        .collect();
    project(w, &mine, None)
}

fn row(m: &ModelConfig, answers: &[AnswerRecord], records: &[Record]) -> ModelRow {
    let mine: Vec<(&AnswerRecord, Option<&Record>)> = answers
        .iter()
        .filter(|a| a.model == m.name)
        .map(|a| (a, record_of(records, a)))
        .collect();
    let correct = |r: Option<&Record>| r.is_some_and(|r| r.status == Status::Correct);
    let mut by_problem: BTreeMap<&str, Vec<Option<&Record>>> = BTreeMap::new();
    for (a, r) in &mine {
        by_problem.entry(&a.problem).or_default().push(*r);
    }
    let k = m.samples;
    let pass = |kk: u32| {
        let per: Vec<f64> = by_problem
            .values()
            .map(|rs| {
                let c = rs.iter().filter(|r| correct(**r)).count() as u32;
                pass_at_k(rs.len() as u32, c, kk.min(rs.len() as u32))
            })
            .collect();
        mean(&per)
    };
    let won = |b: Basis| {
        by_problem
            .values()
            .filter(|rs| rs.iter().flatten().any(|r| b.win(r)))
            .count()
    };
    let speedups = |b: Basis| -> Vec<f64> {
        mine.iter()
            .filter_map(|(_, r)| r.filter(|r| r.status == Status::Correct))
            .filter_map(|r| b.speedup(r))
            .collect()
    };
    let reference = speedups(Basis::Reference);
    let eager = speedups(Basis::Eager);
    let compiled = mine
        .iter()
        .any(|(_, r)| r.is_some_and(|r| r.pytorch_compile.is_some()));
    let (tokens_in, tokens_out) = mine.iter().fold((0u64, 0u64), |(i, o), (a, _)| {
        (
            i + a.prompt_tokens.unwrap_or(0),
            o + a.completion_tokens.unwrap_or(0),
        )
    });
    let mut kernelbench_only = BTreeMap::new();
    for r in mine.iter().filter_map(|(_, r)| *r) {
        let passed = r.kernelbench.as_ref().is_some_and(|v| v.passed);
        if passed && r.status != Status::Correct {
            let status = serde_json::to_value(r.status).unwrap_or_default();
            let status = status.as_str().unwrap_or("?").to_string();
            *kernelbench_only.entry(status).or_insert(0) += 1;
        }
    }
    let answers_n = mine.len();
    ModelRow {
        model: m.name.clone(),
        samples: k,
        problems: by_problem.len(),
        answers: answers_n,
        extracted: mine.iter().filter(|(a, _)| a.path.is_some()).count(),
        correct: mine.iter().filter(|(_, r)| correct(*r)).count(),
        pass_at_1: pass(1),
        pass_at_k: pass(k),
        wins_reference: won(Basis::Reference),
        wins_eager: won(Basis::Eager),
        wins_compile: compiled.then(|| won(Basis::Compile)),
        fast_1_reference: reference.iter().filter(|&&s| s > 1.0).count() as f64
            / answers_n.max(1) as f64,
        median_speedup_reference: opt_median(&reference),
        median_speedup_eager: opt_median(&eager),
        median_speedup_compile: opt_median(&speedups(Basis::Compile)),
        tokens: tokens_in + tokens_out,
        cost_usd: (tokens_in as f64 * m.price_in_per_mtok
            + tokens_out as f64 * m.price_out_per_mtok)
            / 1e6,
        kernelbench_only,
        median_eager_win: opt_median(
            &mine
                .iter()
                .filter_map(|(_, r)| r.filter(|r| Basis::Eager.win(r)))
                .filter_map(|r| Basis::Eager.speedup(r))
                .collect::<Vec<_>>(),
        ),
        projected_time_saved: None,
        addressable: None,
    }
}

fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

fn opt_median(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| median(xs))
}

/// The report as markdown: the per-model table, then what KernelBench alone passed.
pub fn markdown(rows: &[ModelRow]) -> String {
    let pct = |a: usize, b: usize| format!("{:.1}%", 100.0 * a as f64 / b.max(1) as f64);
    let x = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.3}x"));
    let per = |cost: f64, n: usize| {
        if n == 0 {
            "-".to_string()
        } else {
            format!("${:.4}", cost / n as f64)
        }
    };
    let header = [
        "model",
        "k",
        "answers",
        "extracted",
        "correct",
        "pass@1",
        "pass@k",
        "win rate (reference)",
        "win rate (eager)",
        "win rate (torch.compile)",
        "fast_1",
        "median speedup (reference)",
        "median speedup (eager)",
        "median speedup (torch.compile)",
        "tokens",
        "cost",
        "cost / correct",
        "cost / win",
    ];
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.model.clone(),
                r.samples.to_string(),
                r.answers.to_string(),
                r.extracted.to_string(),
                pct(r.correct, r.answers),
                format!("{:.3}", r.pass_at_1),
                format!("{:.3}", r.pass_at_k),
                format!(
                    "{} ({}/{})",
                    pct(r.wins_reference, r.problems),
                    r.wins_reference,
                    r.problems
                ),
                format!(
                    "{} ({}/{})",
                    pct(r.wins_eager, r.problems),
                    r.wins_eager,
                    r.problems
                ),
                r.wins_compile.map_or("- (not timed)".into(), |w| {
                    format!("{} ({w}/{})", pct(w, r.problems), r.problems)
                }),
                format!("{:.3}", r.fast_1_reference),
                x(r.median_speedup_reference),
                x(r.median_speedup_eager),
                x(r.median_speedup_compile),
                r.tokens.to_string(),
                format!("${:.4}", r.cost_usd),
                per(r.cost_usd, r.correct),
                per(r.cost_usd, r.wins_reference),
            ]
        })
        .collect();
    let mut s = markdown_table(&header, &body);
    s += &published_table(rows);
    let flagged: Vec<String> = rows
        .iter()
        .filter(|r| !r.kernelbench_only.is_empty())
        .map(|r| {
            let why: Vec<String> = r
                .kernelbench_only
                .iter()
                .map(|(k, n)| format!("{n} {k}"))
                .collect();
            format!("- {}: {}", r.model, why.join(", "))
        })
        .collect();
    if !flagged.is_empty() {
        s += "\nAnswers KernelBench's check passes and the suite rejects, by the suite's status:\n\n";
        s += &(flagged.join("\n") + "\n");
    }
    s
}

/// The published result's figures, for the table beside it.
const PUBLISHED: &str = "41.7% win rate at a median 1.552x, 8.63% projected end to end (a \
                         12-problem recommender set, over PyTorch eager)";

/// The columns the published LLM result reports: correct %, win rate and the median speedup
/// of the wins over PyTorch eager, and the projected end-to-end gain.
fn published_table(rows: &[ModelRow]) -> String {
    let pct = |v: f64| format!("{:.1}%", 100.0 * v);
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.model.clone(),
                pct(r.correct as f64 / r.answers.max(1) as f64),
                pct(r.wins_eager as f64 / r.problems.max(1) as f64),
                r.median_eager_win
                    .map_or("-".into(), |v| format!("{v:.3}x")),
                r.projected_time_saved
                    .map_or("- (no --workload)".into(), pct),
            ]
        })
        .collect();
    let header = [
        "model",
        "correct",
        "win rate (eager)",
        "median speedup of wins (eager)",
        "projected end to end",
    ];
    format!(
        "\nBeside the published result ({PUBLISHED}):\n\n{}",
        markdown_table(&header, &body)
    )
}

/// `sweep report DIR`: the table on stdout, `DIR/report.md` and `DIR/report.json`.
pub fn report(dir: &Path, workload: Option<&Path>) -> anyhow::Result<String> {
    let workload = workload.map(Workload::load).transpose()?;
    let rows = rows(dir, workload.as_ref())?;
    let text = markdown(&rows);
    let md = dir.join("report.md");
    std::fs::write(&md, format!("# Sweep {}\n\n{text}", dir.display()))
        .with_context(|| format!("{}: cannot write", md.display()))?;
    crate::results::run_dir::write_json(&dir.join("report.json"), &serde_json::to_value(&rows)?)?;
    let page = dir.join("report.html");
    let plot = win_rate_plot(&rows)?;
    std::fs::write(&page, html(&dir.display().to_string(), &text, Some(&plot)))
        .with_context(|| format!("{}: cannot write", page.display()))?;
    Ok(text)
}

/// The win rates of `rows` on every basis, as a chart.
fn win_rate_plot(rows: &[ModelRow]) -> anyhow::Result<Plot> {
    let rate = |w: usize, r: &ModelRow| 100.0 * w as f64 / r.problems.max(1) as f64;
    let models: Vec<ModelWins> = rows
        .iter()
        .map(|r| ModelWins {
            model: r.model.clone(),
            win_rates: [
                Some(rate(r.wins_reference, r)),
                Some(rate(r.wins_eager, r)),
                r.wins_compile.map(|w| rate(w, r)),
            ],
        })
        .collect();
    sweep_win_rates(&models)
}

/// The report's markdown as a standalone page: its tables as HTML tables, its other lines as
/// paragraphs or list items, every cell escaped; then the plot (its SVG and caption as drawn).
fn html(title: &str, markdown: &str, plot: Option<&Plot>) -> String {
    use crate::report::plots::escape;
    let mut body = String::new();
    let mut in_table = false;
    for line in markdown.lines() {
        let cells: Option<Vec<&str>> = line
            .strip_prefix('|')
            .and_then(|l| l.strip_suffix('|'))
            .map(|l| l.split(" | ").map(str::trim).collect());
        match cells {
            Some(c) if c.iter().all(|x| x.chars().all(|ch| ch == '-' || ch == ' ')) => {}
            Some(c) => {
                let tag = if in_table { "td" } else { "th" };
                if !in_table {
                    body += "<table>\n";
                    in_table = true;
                }
                let row: String = c
                    .iter()
                    .map(|x| format!("<{tag}>{}</{tag}>", escape(x)))
                    .collect();
                body += &format!("<tr>{row}</tr>\n");
            }
            None => {
                if in_table {
                    body += "</table>\n";
                    in_table = false;
                }
                if let Some(item) = line.strip_prefix("- ") {
                    body += &format!("<li>{}</li>\n", escape(item));
                } else if !line.trim().is_empty() {
                    body += &format!("<p>{}</p>\n", escape(line));
                }
            }
        }
    }
    if in_table {
        body += "</table>\n";
    }
    if let Some(p) = plot {
        body += &format!(
            "<h2>{}</h2>\n<figure id=\"{}\">{}<figcaption>{}</figcaption></figure>\n",
            escape(&p.title),
            escape(&p.name),
            p.svg,
            p.caption
        );
    }
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Sweep {t}</title>\n\
         <style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}\
         td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}</style></head>\n\
         <body><h1>Sweep {t}</h1>\n{body}</body></html>\n",
        t = escape(title)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::prompt::Format;
    use crate::results::record::{KernelBenchVerdict, Speedup};
    use crate::sweep::extract::AnswerStatus;

    fn answer(problem: &str, sample: u32, extracted: bool) -> AnswerRecord {
        AnswerRecord {
            model: "m".into(),
            problem: problem.into(),
            number: 0,
            sample,
            format: Format::Kernelbench,
            status: if extracted {
                AnswerStatus::Extracted
            } else {
                AnswerStatus::NoAnswer
            },
            message: String::new(),
            key: String::new(),
            path: extracted.then(|| format!("answers/m-s{sample}/{problem}.py")),
            prompt_tokens: Some(100),
            completion_tokens: Some(50),
            latency_s: 1.0,
            attempts: 1,
            cached: false,
            replayed: false,
        }
    }

    fn record(problem: &str, sample: u32, status: Status, speedup: f64, ci_low: f64) -> Record {
        let mut r = Record::new(problem, "a", &format!("m-s{sample}"), "answers");
        r.status = status;
        r.speedup = Some(Speedup {
            median: speedup,
            ci_low,
            ci_high: speedup * 1.1,
            pairs: 20,
        });
        r.win = status == Status::Correct && ci_low > 1.0;
        r
    }

    /// Two problems, k = 2: p1 has a winning and an incorrect sample (which KernelBench's
    /// check passed), p2 a correct slow sample and one with no code.
    #[test]
    fn a_row_counts_samples_problems_wins_and_cost() {
        let cfg: SweepConfig = SweepConfig::parse(
            "[[model]]\nname = \"m\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"x\"\n\
             format = \"kernelbench\"\nsamples = 2\nprice_in_per_mtok = 1.0\n\
             price_out_per_mtok = 2.0\n",
        )
        .unwrap();
        let answers = [
            answer("p1", 0, true),
            answer("p1", 1, true),
            answer("p2", 0, true),
            answer("p2", 1, false),
        ];
        let mut wrong = record("p1", 1, Status::Incorrect, 3.0, 2.0);
        wrong.kernelbench = Some(KernelBenchVerdict {
            passed: true,
            compiled: true,
            passed_trials: 5,
            trials: 5,
            atol: 0.01,
            rtol: 0.01,
            max_abs_diff: Some(0.0),
            runtime_ms: None,
            ref_runtime_ms: None,
            speedup: None,
            message: String::new(),
            ..KernelBenchVerdict::default()
        });
        let mut records = [
            record("p1", 0, Status::Correct, 2.0, 1.5),
            wrong,
            record("p2", 0, Status::Correct, 0.9, 0.8),
        ];
        // Not timed against torch.compile: no such win rate, rather than 0.
        let r = row(&cfg.models[0], &answers, &records);
        assert_eq!((r.wins_compile, r.median_speedup_compile), (None, None));
        assert!(markdown(&[r]).contains("| - (not timed) |"));
        // The compiled Model at 1.5 ms and 0.5 ms, each answer at 1 ms: 1.5x (a win), 0.5x.
        for (r, compiled_ms) in [(0, 1.5), (2, 0.5)] {
            records[r].timing = Some(crate::results::record::Timing {
                median_ms: 1.0,
                ..Default::default()
            });
            records[r].pytorch_compile = Some(crate::results::record::PeerTime {
                median_ms: compiled_ms,
                reference_over_pytorch: 1.0,
                source: "compile".into(),
                ..crate::results::record::PeerTime::default()
            });
        }
        let r = row(&cfg.models[0], &answers, &records);
        assert_eq!(
            (r.wins_compile, r.median_speedup_compile),
            (Some(1), Some(1.0))
        );
        assert_eq!(
            (r.answers, r.extracted, r.correct, r.problems),
            (4, 3, 2, 2)
        );
        assert_eq!((r.pass_at_1, r.pass_at_k), (0.5, 1.0));
        assert_eq!((r.wins_reference, r.fast_1_reference), (1, 0.25));
        assert!((r.median_speedup_reference.unwrap() - 1.45).abs() < 1e-12);
        assert_eq!(r.tokens, 600);
        assert!((r.cost_usd - 0.0008).abs() < 1e-12, "{}", r.cost_usd);
        assert_eq!(r.kernelbench_only.get("incorrect"), Some(&1));
        let md = markdown(&[r]);
        assert!(
            md.contains("| m | 2 | 4 | 3 | 50.0% | 0.500 | 1.000 | 50.0% (1/2) |"),
            "{md}"
        );
        assert!(md.contains("- m: 1 incorrect"), "{md}");
    }

    /// The estimator against its definition with binomials, on small cases.
    #[test]
    fn the_page_holds_the_tables_escaped() {
        let page = html(
            "s<1>",
            "| a | b |\n| --- | --- |\n| <x> | 2 |\n\ntext & more\n- m: 1 incorrect\n",
            None,
        );
        assert!(page.contains("<tr><th>a</th><th>b</th></tr>"), "{page}");
        assert!(
            page.contains("<tr><td>&lt;x&gt;</td><td>2</td></tr>"),
            "{page}"
        );
        assert!(
            page.contains("<p>text &amp; more</p>") && page.contains("<li>m: 1 incorrect</li>")
        );
        assert!(page.contains("Sweep s&lt;1&gt;"));
    }

    #[test]
    fn pass_at_k_is_the_unbiased_estimator() {
        fn binom(n: u64, k: u64) -> f64 {
            (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
        }
        for n in 1..=10u32 {
            for c in 0..=n {
                for k in 1..=n {
                    let want = if n - c < k {
                        1.0
                    } else {
                        1.0 - binom((n - c) as u64, k as u64) / binom(n as u64, k as u64)
                    };
                    let got = pass_at_k(n, c, k);
                    assert!(
                        (got - want).abs() < 1e-12,
                        "n={n} c={c} k={k}: {got} vs {want}"
                    );
                }
            }
        }
        assert_eq!(pass_at_k(4, 1, 1), 0.25);
        assert_eq!(pass_at_k(2, 0, 2), 0.0);
    }

    /// A model's projection takes its own samples' wins only: another model's faster win on
    /// the same problem does not count for it.
    #[test]
    fn a_model_is_projected_on_its_own_wins() {
        let w_path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../workloads/dlrm-dlrmv2-train-eager.toml");
        let w = Workload::load(&w_path).unwrap();
        let f = w.fractions["embedding_bag_sum"];
        let mut reference = Record::new("embedding_bag_sum", "reference", "reference", "reference");
        reference.status = Status::Correct;
        reference.pytorch = Some(crate::results::record::PeerTime {
            median_ms: 1.0,
            reference_over_pytorch: 1.0,
            source: "eager".into(),
            ..crate::results::record::PeerTime::default()
        });
        let timed = |group: &str, ms: f64| {
            let mut r = record(
                "embedding_bag_sum",
                0,
                Status::Correct,
                1.0 / ms,
                1.0 / ms * 0.9,
            );
            r.group = group.into();
            r.timing = Some(crate::results::record::Timing {
                median_ms: ms,
                ..Default::default()
            });
            r
        };
        let records = [
            reference,
            timed("m-s0", 0.5),
            timed("other-s0", 0.25),
            timed("m-sonnet-s0", 0.2),
        ];
        let p = project_model(&w, "m", &records);
        let bag = p
            .problems
            .iter()
            .find(|q| q.problem == "embedding_bag_sum")
            .unwrap();
        assert_eq!(
            (bag.candidate.as_deref(), bag.speedup),
            (Some("m-s0/a"), 2.0)
        );
        assert!(
            (p.time_saved() - f / 2.0).abs() < 1e-12,
            "{} vs {}",
            p.time_saved(),
            f / 2.0
        );
    }
}
