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
pub(crate) mod shapes;
use crate::report::metrics::{Basis, Summary};
use crate::report::projection::{Projection, Workload};
use crate::results::pool::Pooled;
use crate::results::record::{Record, RecordLog};
use anyhow::Context;
use std::path::{Path, PathBuf};
mod cells;
pub(crate) use cells::*;
mod rows;
pub use rows::*;
mod parity;
mod reasons;

mod terminal;
pub(crate) use terminal::*;
mod markdown;
pub use markdown::*;
#[cfg(test)]
mod table_tests;

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
        allow_mixed: bool,
    ) -> anyhow::Result<Self> {
        let pooled = Pooled::read(results, allow_mixed)?;
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

#[cfg(test)]
/// [`pooled_report_text`] of the sets at `results`, with the profile at `workload`.
pub(crate) fn report_text(
    results: &[PathBuf],
    workload: Option<&Path>,
    out: Option<&Path>,
    basis: Basis,
    format: ReportFormat,
) -> anyhow::Result<String> {
    let r = PooledReport::read(results, workload, basis, false)?;
    pooled_report_text(&r.pooled, &r.summary, r.projected(), out, format)
}

/// What [`report`] prints on stdout (with `--csv` and `--json` nothing else: the note on
/// `--out` goes to stderr, and with `--csv` the projection too).
pub(crate) fn pooled_report_text(
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
            if let Some(caveat) = crate::results::emulator_caveat(&pooled.paths()) {
                s += &format!("\n{}\n", wrap(&caveat, TERMINAL_TEXT_WIDTH));
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
                serde_json::to_string_pretty(&json(&pooled.shaped, summary, projection))?
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
    use crate::results::record::Status;

    #[test]
    fn an_incomplete_set_of_shards_is_named_with_the_missing_ones() {
        assert_eq!(incomplete_run_warning(&[0, 1], 2), None);
        assert_eq!(incomplete_run_warning(&[0], 1), None);
        let w = incomplete_run_warning(&[1], 3).unwrap();
        assert!(w.starts_with("1 of the run's 3 shards"), "{w}");
        assert!(w.contains("shard(s) 0/3, 2/3 missing"), "{w}");
    }

    pub(super) fn rec(problem: &str, candidate: &str, ms: f64) -> Record {
        let mut r = Record::new(problem, candidate, "g", &format!("test:{candidate}"));
        r.status = Status::Correct;
        r.timing = Some(crate::results::record::Timing {
            median_ms: ms,
            ..Default::default()
        });
        r
    }

    /// A result set of `recs` in `dir`.
    pub(crate) fn write_set(dir: &Path, recs: &[Record]) {
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
        let pooled = pool_runs(&[a.clone(), b.join("results.jsonl")], false).unwrap();
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
        let missing = pool_runs(&[dir.join("nope")], false)
            .unwrap_err()
            .to_string();
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
            pool_runs(paths, false)
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
        let pooled = pool_runs(&[native.clone(), kb.clone(), kb2.clone()], false).unwrap();
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
        let alone = pool_runs(std::slice::from_ref(&kb), false).unwrap();
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
