//! End-to-end projection (docs/design.md §8): what a run's kernels would do to a whole step.
//!
//! A workload profile (`workloads/*.toml`) gives the share `f` of a step's GPU time that each
//! problem's operation takes in that workload, measured with PyTorch eager. With each problem's
//! speedup `s` over that same eager operation, Amdahl's law gives the step's new time
//! `(1 − Σf) + Σ f/s` (as a share of the old one) and its speedup `1 / that`. `Σf` is the
//! addressable fraction: no kernel on this list can make the step faster than `1 / (1 − Σf)`.
//!
//! Per problem the projection takes the fastest winning candidate of the run (optionally of one
//! group). Its speedup is taken over PyTorch eager (eager's time / the candidate's) when the run
//! had PyTorch timings, since the profile's shares were measured with eager; otherwise over the
//! reference. A problem with no win, or whose wins are still slower than eager, keeps `s = 1`:
//! such a kernel would not be deployed. The records should come from [`pool_runs`]
//! (crate::report::pool_runs), which keeps each problem's records from one run, so that eager's
//! time and the candidate's are measured together.
use crate::results::record::{Record, Status};
use bench_problems::find_problem;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A workload profile as written in `workloads/NAME.toml`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    pub name: String,
    /// What ran: model, sizes, batch, training or inference, device.
    pub description: String,
    /// How the shares were obtained (command, tool, date) or where they were published.
    pub source: String,
    /// Share of the step's GPU time per problem name (each in [0, 1], together at most 1).
    /// Empty only in a measured profile with `classes` (a step no problem touches).
    pub fractions: BTreeMap<String, f64>,
    /// Optional, written by `tools/profile_workload.py`: the wall-clock step time (CUDA events,
    /// no profiler), in ms.
    #[serde(default)]
    pub step_ms: Option<f64>,
    /// Optional: the step's GPU busy time (its kernels', memcpys' and memsets' durations), ms.
    #[serde(default)]
    pub gpu_ms: Option<f64>,
    /// Optional: the share of the step's GPU time attributed to a problem or a named class
    /// other than `other`.
    #[serde(default)]
    pub coverage: Option<f64>,
    /// Optional: how the kernels were attributed.
    #[serde(default)]
    pub method: Option<String>,
    /// Optional: the per-kernel CSV written beside the profile (a file name).
    #[serde(default)]
    pub kernels_csv: Option<String>,
    /// Optional: the shares of the named classes that no problem covers ([`CLASSES`]); with
    /// `fractions` they make the whole step.
    #[serde(default)]
    pub classes: Option<BTreeMap<String, f64>>,
    /// Optional: how the problems' operations ran in the profiled step, `"eager"` (the default)
    /// or `"compile"` (inside a `torch.compile`d step). The projection takes each candidate's
    /// speedup over that same yardstick: over the compiled Model for `"compile"` ("what this
    /// kernel adds to a step that is already compiled").
    #[serde(default)]
    pub problems_ran: Option<String>,
}

/// The named classes of `[classes]` (tools/kernel_classes.py's `CLASSES`).
pub const CLASSES: [&str; 9] = [
    "matmul",
    "attention",
    "elementwise",
    "reduction",
    "indexing",
    "optimizer",
    "copy",
    "communication",
    "other",
];

/// The published study's range of addressable fractions (REFERENCE-DATA.md).
pub const PUBLISHED_RANGE: (f64, f64) = (0.089, 0.582);

impl Workload {
    /// Reads and validates a profile; errors name the file and the field.
    pub fn load(path: &Path) -> anyhow::Result<Workload> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("{}: cannot read: {e}", path.display()))?;
        let w: Workload =
            toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        w.validate()
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        Ok(w)
    }

    fn validate(&self) -> Result<(), String> {
        for (field, value) in [("name", &self.name), ("source", &self.source)] {
            if value.trim().is_empty() {
                return Err(format!("field `{field}` is empty"));
            }
        }
        if let Some(how) = &self.problems_ran {
            if how != "eager" && how != "compile" {
                return Err(format!(
                    "`problems_ran` = \"{how}\": one of \"eager\", \"compile\""
                ));
            }
        }
        if self.fractions.is_empty() && self.classes.is_none() {
            return Err("`fractions` lists no problem (and there is no `classes`)".into());
        }
        for (field, value) in [
            ("step_ms", self.step_ms),
            ("gpu_ms", self.gpu_ms),
            ("coverage", self.coverage),
        ] {
            if let Some(v) = value {
                if !v.is_finite() || v < 0.0 || (field == "coverage" && v > 1.0) {
                    return Err(format!("`{field}` = {v} is out of range"));
                }
            }
        }
        if let Some(classes) = &self.classes {
            for (class, &f) in classes {
                if !CLASSES.contains(&class.as_str()) {
                    return Err(format!(
                        "`classes.{class}`: no such class (one of {})",
                        CLASSES.join(", ")
                    ));
                }
                if !(0.0..=1.0).contains(&f) {
                    return Err(format!("`classes.{class}` = {f} is not in [0, 1]"));
                }
            }
            let whole: f64 = self.fractions.values().chain(classes.values()).sum();
            // Each share is written with 4 decimals: allow their rounding.
            if (whole - 1.0).abs() > 0.01 {
                return Err(format!(
                    "`fractions` and `classes` add up to {whole:.4}, not the whole step"
                ));
            }
        }
        for (problem, &f) in &self.fractions {
            if find_problem(problem).is_none() {
                return Err(format!(
                    "`fractions.{problem}`: no such problem (see `dlrm-bench list`)"
                ));
            }
            if !(0.0..=1.0).contains(&f) {
                return Err(format!("`fractions.{problem}` = {f} is not in [0, 1]"));
            }
        }
        let total: f64 = self.fractions.values().sum();
        if total > 1.0 + 1e-9 {
            return Err(format!(
                "`fractions` add up to {total:.4}, more than the whole step"
            ));
        }
        Ok(())
    }
}

/// What the projection used for one problem of the profile.
#[derive(Clone, Debug, PartialEq)]
pub struct ProblemProjection {
    pub problem: String,
    pub fraction: f64,
    /// The winning candidate used, if any.
    pub candidate: Option<String>,
    /// Its speedup (1 when there is none).
    pub speedup: f64,
    /// What the speedup is over: "PyTorch eager", "reference", or why it is 1.
    pub basis: String,
}

/// A whole step's projection.
#[derive(Clone, Debug, PartialEq)]
pub struct Projection {
    pub workload: String,
    pub problems: Vec<ProblemProjection>,
    /// Σf.
    pub addressable: f64,
    /// The step's new time as a share of the old: (1 − Σf) + Σ f/s.
    pub new_time_share: f64,
}

impl Projection {
    /// Projected step speedup, 1 / new time share.
    pub fn step_speedup(&self) -> f64 {
        1.0 / self.new_time_share
    }

    /// Share of the step's time saved, 1 − new time share.
    pub fn time_saved(&self) -> f64 {
        1.0 - self.new_time_share
    }

    /// The most any kernel of these problems could give: 1 / (1 − Σf), infinite when they
    /// are the whole step (Σf = 1).
    pub fn ceiling(&self) -> f64 {
        let rest = 1.0 - self.addressable;
        if rest <= 1e-12 {
            f64::INFINITY
        } else {
            1.0 / rest
        }
    }

    /// [`Self::ceiling`] in words: `2.326x`, or `unbounded` when it is infinite.
    pub fn ceiling_text(&self) -> String {
        match self.ceiling() {
            c if c.is_finite() => format!("{c:.3}x"),
            _ => "an unbounded speedup (these problems are the whole step)".into(),
        }
    }

    /// The projection as a markdown section (the profile, a row per problem, the totals).
    pub fn markdown(&self, w: &Workload) -> String {
        let mut s = format!(
            "## End-to-end projection: {}\n\n{}\n\nSource: {}\n\n\
             | problem | share of step | candidate | speedup | over | share after |\n\
             | --- | --- | --- | --- | --- | --- |\n",
            w.name, w.description, w.source
        );
        for p in &self.problems {
            s += &format!(
                "| {} | {:.1}% | {} | {:.3} | {} | {:.1}% |\n",
                p.problem,
                100.0 * p.fraction,
                p.candidate.as_deref().unwrap_or("-"),
                p.speedup,
                p.basis,
                100.0 * p.fraction / p.speedup
            );
        }
        s += &format!(
            "\nAddressable fraction {:.1}% (no kernel of these problems can give more than \
             {}); projected step speedup {:.3}x, step time -{:.1}%.\n",
            100.0 * self.addressable,
            self.ceiling_text(),
            self.step_speedup(),
            100.0 * self.time_saved()
        );
        s
    }

    /// The projection for `run.json`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "workload": self.workload,
            "addressable_fraction": self.addressable,
            "new_time_share": self.new_time_share,
            "step_speedup": self.step_speedup(),
            // null when unbounded (JSON has no infinity).
            "ceiling": Some(self.ceiling()).filter(|c| c.is_finite()),
            "problems": self.problems.iter().map(|p| serde_json::json!({
                "problem": p.problem,
                "fraction": p.fraction,
                "candidate": p.candidate,
                "speedup": p.speedup,
                "basis": p.basis,
            })).collect::<Vec<_>>(),
        })
    }
}

/// Projects `records` (one run's results) onto `workload`; `group` keeps only that candidate
/// group's wins.
pub fn project(workload: &Workload, records: &[Record], group: Option<&str>) -> Projection {
    let compiled = workload.problems_ran.as_deref() == Some("compile");
    let (yardstick, missing) = if compiled {
        ("torch.compile", "no win over torch.compile")
    } else {
        ("PyTorch eager", "no win over eager")
    };
    let mut problems = Vec::new();
    for (problem, &fraction) in &workload.fractions {
        // The time of the operation as the profiled step ran it.
        let eager_ms = records
            .iter()
            .find(|r| &r.problem == problem && r.candidate == "reference")
            .and_then(|r| {
                if compiled {
                    r.pytorch_compile.as_ref()
                } else {
                    r.pytorch.as_ref()
                }
            })
            .map(|p| p.median_ms);
        let best = records
            .iter()
            .filter(|r| &r.problem == problem && r.candidate != "reference")
            .filter(|r| r.win && r.status == Status::Correct)
            .filter(|r| group.is_none_or(|g| r.group == g))
            .filter_map(|r| {
                let cand_ms = r.timing.as_ref()?.median_ms;
                let (s, basis) = match eager_ms {
                    Some(e) if cand_ms > 0.0 => (e / cand_ms, yardstick),
                    _ => (r.speedup.as_ref()?.median, "reference"),
                };
                // A win over a reference slower than eager can still lose to eager, which is
                // what the step runs: that would not be deployed either.
                (s > 1.0).then_some((r, s, basis))
            })
            .max_by(|a, b| a.1.total_cmp(&b.1));
        let ran = records.iter().any(|r| &r.problem == problem);
        let won = records
            .iter()
            .any(|r| &r.problem == problem && r.win && group.is_none_or(|g| r.group == g));
        problems.push(match best {
            Some((r, s, basis)) => ProblemProjection {
                problem: problem.clone(),
                fraction,
                candidate: Some(format!("{}/{}", r.group, r.candidate)),
                speedup: s,
                basis: basis.into(),
            },
            None => ProblemProjection {
                problem: problem.clone(),
                fraction,
                candidate: None,
                speedup: 1.0,
                basis: match (ran, won) {
                    (false, _) => "not in this run",
                    (true, false) => "no win",
                    (true, true) => missing,
                }
                .into(),
            },
        });
    }
    // `+ 0.0`: an empty sum of floats is -0.0, printed "-0.0%".
    let addressable: f64 = problems.iter().map(|p| p.fraction).sum::<f64>() + 0.0;
    let new_time_share =
        (1.0 - addressable) + problems.iter().map(|p| p.fraction / p.speedup).sum::<f64>();
    Projection {
        workload: workload.name.clone(),
        problems,
        addressable,
        new_time_share,
    }
}

/// The projection of `records` onto the profile in the file `workload`, as the markdown that
/// `dlrm-bench project` and `report --workload` print.
pub fn project_file(
    workload: &Path,
    records: &[Record],
    group: Option<&str>,
) -> anyhow::Result<String> {
    let w = Workload::load(workload)?;
    Ok(project(&w, records, group).markdown(&w))
}

/// The profiles named by `args`: a file is itself, a directory its `*.toml` files (sorted).
pub fn workload_paths(args: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for a in args {
        if a.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(a)
                .map_err(|e| anyhow::anyhow!("{}: cannot read: {e}", a.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "toml"))
                .collect();
            if files.is_empty() {
                anyhow::bail!("{}: no workload profile (*.toml) in it", a.display());
            }
            files.sort();
            out.extend(files);
        } else {
            out.push(a.clone());
        }
    }
    Ok(out)
}

/// Where an addressable fraction lies against the published study's range.
fn against_published(addressable: f64) -> &'static str {
    let (lo, hi) = PUBLISHED_RANGE;
    if addressable < lo {
        "below"
    } else if addressable > hi {
        "above"
    } else {
        "within"
    }
}

/// Several profiles' projections as one markdown table (one row per workload), the speedups
/// used per problem, and a footnote with the published range.
pub fn table_many(items: &[(Workload, Projection)]) -> String {
    let (lo, hi) = PUBLISHED_RANGE;
    let mut s = format!(
        "## End-to-end projection over {} workload profiles\n\n\
         | workload | addressable Σf | ceiling 1/(1 − Σf) | projected step speedup | time saved | \
         coverage | vs published {:.1}–{:.1}% |\n\
         | --- | --- | --- | --- | --- | --- | --- |\n",
        items.len(),
        100.0 * lo,
        100.0 * hi
    );
    for (w, p) in items {
        let ceiling = match p.ceiling() {
            c if c.is_finite() => format!("{c:.3}x"),
            _ => "unbounded".into(),
        };
        s += &format!(
            "| {} | {:.1}% | {} | {:.3}x | {:.1}% | {} | {} |\n",
            w.name,
            100.0 * p.addressable,
            ceiling,
            p.step_speedup(),
            100.0 * p.time_saved(),
            w.coverage
                .map_or("-".to_string(), |c| format!("{:.1}%", 100.0 * c)),
            against_published(p.addressable)
        );
    }
    // The speedup each problem got (the same in every profile: one run's records).
    let mut used: BTreeMap<&str, &ProblemProjection> = BTreeMap::new();
    for (_, p) in items {
        for q in &p.problems {
            used.entry(q.problem.as_str()).or_insert(q);
        }
    }
    if !used.is_empty() {
        s += "\n| problem | candidate | speedup | over |\n| --- | --- | --- | --- |\n";
        for q in used.values() {
            s += &format!(
                "| {} | {} | {:.3} | {} |\n",
                q.problem,
                q.candidate.as_deref().unwrap_or("-"),
                q.speedup,
                q.basis
            );
        }
    }
    s += &format!(
        "\nΣf is the share of the step's GPU time in the suite's problems; the ceiling is the \
         most any kernel for them could give; the projected step speedup is 1/((1 − Σf) + Σ f/s) \
         and the time saved 1 − ((1 − Σf) + Σ f/s), with each problem's fastest win over PyTorch \
         eager (s = 1 without one); coverage is the share of GPU time the profiler named a class \
         for.\n\n\
         Published range: the published study found {:.1}% to {:.1}% of runtime addressable \
         across seven workloads in three domains (arXiv 2609.21058, as reported in \
         REFERENCE-DATA.md).\n",
        100.0 * lo,
        100.0 * hi
    );
    s
}

/// `dlrm-bench project` over several profiles (files or directories of them).
pub fn project_many(
    args: &[PathBuf],
    records: &[Record],
    group: Option<&str>,
) -> anyhow::Result<String> {
    let mut items = Vec::new();
    for path in workload_paths(args)? {
        let w = Workload::load(&path)?;
        let p = project(&w, records, group);
        items.push((w, p));
    }
    Ok(table_many(&items))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::record::{PeerTime, Speedup, Timing};

    fn workload(fractions: &[(&str, f64)]) -> Workload {
        Workload {
            name: "w".into(),
            description: "d".into(),
            source: "test".into(),
            fractions: fractions.iter().map(|&(k, v)| (k.into(), v)).collect(),
            step_ms: None,
            gpu_ms: None,
            coverage: None,
            method: None,
            kernels_csv: None,
            classes: None,
            problems_ran: None,
        }
    }

    fn record(problem: &str, candidate: &str, group: &str, ms: f64, speedup: f64) -> Record {
        let mut r = Record::new(problem, candidate, group, "test");
        r.status = Status::Correct;
        r.timing = Some(Timing {
            median_ms: ms,
            ..Default::default()
        });
        if candidate != "reference" {
            r.speedup = Some(Speedup {
                median: speedup,
                ..Default::default()
            });
            r.win = speedup > 1.0;
        }
        r
    }

    #[test]
    fn a_step_that_ran_the_problems_compiled_takes_speedups_over_the_compiled_model() {
        // Eager 1.0 ms, compiled 0.5 ms, the candidate 0.25 ms: 4x over eager, 2x over compile.
        // A second problem's candidate beats eager (1.2 vs 1.0 ms) but not compile (0.5 ms).
        let peer = |ms: f64| PeerTime {
            median_ms: ms,
            reference_over_pytorch: 1.0,
            source: "t".into(),
        };
        let mut bag = record("embedding_bag_sum", "reference", "reference", 1.0, 0.0);
        bag.pytorch = Some(peer(1.0));
        bag.pytorch_compile = Some(peer(0.5));
        let mut fm = record("fm_interaction", "reference", "reference", 1.2, 0.0);
        fm.pytorch = Some(peer(1.2));
        fm.pytorch_compile = Some(peer(0.5));
        let records = vec![
            bag,
            record("embedding_bag_sum", "fast", "b", 0.25, 4.0),
            fm,
            record("fm_interaction", "y", "a", 1.0, 1.2),
        ];
        let mut w = workload(&[("embedding_bag_sum", 0.5), ("fm_interaction", 0.1)]);
        let eager = project(&w, &records, None);
        assert_eq!(eager.problems[0].speedup, 4.0);
        w.problems_ran = Some("compile".into());
        w.validate().unwrap();
        let compiled = project(&w, &records, None);
        let by = |name: &str| {
            compiled
                .problems
                .iter()
                .find(|x| x.problem == name)
                .unwrap()
        };
        assert_eq!(by("embedding_bag_sum").speedup, 2.0);
        assert_eq!(by("embedding_bag_sum").basis, "torch.compile");
        assert_eq!(by("fm_interaction").speedup, 1.0);
        assert_eq!(by("fm_interaction").basis, "no win over torch.compile");
        // (1 - 0.6) + 0.5/2 + 0.1 = 0.75
        assert!((compiled.new_time_share - 0.75).abs() < 1e-12);
        w.problems_ran = Some("inductor".into());
        assert!(w.validate().unwrap_err().contains("`problems_ran`"));
    }

    #[test]
    fn the_classes_are_the_profilers() {
        // tools/kernel_classes.py's CLASSES tuple, in its order.
        let py = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/kernel_classes.py"),
        )
        .unwrap();
        let tuple = &py[py
            .find("\nCLASSES = (")
            .expect("CLASSES in kernel_classes.py")..];
        let tuple = &tuple[..tuple.find(')').unwrap()];
        let names: Vec<&str> = tuple.split('"').skip(1).step_by(2).collect();
        assert_eq!(names, CLASSES);
    }

    #[test]
    fn amdahl_with_eager_basis_reference_basis_and_no_win() {
        // embedding_bag_sum: f = 0.3, eager 1.0 ms, best win 0.25 ms -> s = 4 (over eager, not
        // the 3.5 over the reference). dot_interaction: f = 0.1, no PyTorch time -> s = 2 over
        // the reference. fm_interaction: f = 0.1, only a loss -> s = 1.
        let mut reference = record("embedding_bag_sum", "reference", "reference", 0.9, 0.0);
        reference.pytorch = Some(PeerTime {
            median_ms: 1.0,
            reference_over_pytorch: 0.9,
            source: "t".into(),
        });
        // unique_indices: the reference is slower than eager (2.0 vs 1.5 ms); a 1.1x win over
        // it (1.8 ms) still loses to eager -> s = 1.
        let mut slower_than_eager_reference =
            record("unique_indices", "reference", "reference", 2.0, 0.0);
        slower_than_eager_reference.pytorch = Some(PeerTime {
            median_ms: 1.5,
            reference_over_pytorch: 2.0 / 1.5,
            source: "t".into(),
        });
        let records = vec![
            reference,
            record("embedding_bag_sum", "slow", "a", 0.5, 1.8),
            record("embedding_bag_sum", "fast", "b", 0.25, 3.5),
            record("dot_interaction", "reference", "reference", 1.0, 0.0),
            record("dot_interaction", "x", "a", 0.5, 2.0),
            record("fm_interaction", "reference", "reference", 1.0, 0.0),
            record("fm_interaction", "y", "a", 2.0, 0.5),
            slower_than_eager_reference,
            record("unique_indices", "z", "a", 1.8, 1.1),
        ];
        let w = workload(&[
            ("embedding_bag_sum", 0.3),
            ("dot_interaction", 0.1),
            ("fm_interaction", 0.1),
            ("unique_indices", 0.05),
            ("kjt_permute", 0.02),
        ]);
        let p = project(&w, &records, None);
        let by = |name: &str| p.problems.iter().find(|x| x.problem == name).unwrap();
        assert_eq!(by("embedding_bag_sum").speedup, 4.0);
        assert_eq!(by("embedding_bag_sum").basis, "PyTorch eager");
        assert_eq!(by("embedding_bag_sum").candidate.as_deref(), Some("b/fast"));
        assert_eq!(by("dot_interaction").speedup, 2.0);
        assert_eq!(by("dot_interaction").basis, "reference");
        assert_eq!(by("fm_interaction").speedup, 1.0);
        assert_eq!(by("fm_interaction").basis, "no win");
        assert_eq!(by("unique_indices").speedup, 1.0);
        assert_eq!(by("unique_indices").basis, "no win over eager");
        assert_eq!(by("kjt_permute").basis, "not in this run");
        // (1 - 0.57) + 0.3/4 + 0.1/2 + 0.1 + 0.05 + 0.02 = 0.725
        assert!((p.addressable - 0.57).abs() < 1e-12);
        assert!((p.new_time_share - 0.725).abs() < 1e-12);
        assert!((p.step_speedup() - 1.0 / 0.725).abs() < 1e-12);
        assert!((p.time_saved() - 0.275).abs() < 1e-12);
        assert!((p.ceiling() - 1.0 / 0.43).abs() < 1e-12);
        let md = p.markdown(&w);
        assert!(
            md.contains("| embedding_bag_sum | 30.0% | b/fast | 4.000 | PyTorch eager | 7.5% |")
        );
        assert!(md.contains("Addressable fraction 57.0%"));
        assert!(md.contains("projected step speedup 1.379x, step time -27.5%"));
        let json = p.to_json();
        assert!((json["addressable_fraction"].as_f64().unwrap() - 0.57).abs() < 1e-12);
        assert_eq!(json["problems"].as_array().unwrap().len(), 5);
        // Group a only: embedding_bag_sum falls back to its 0.5 ms candidate (s = 2).
        let a = project(&w, &records, Some("a"));
        assert_eq!(
            a.problems
                .iter()
                .find(|x| x.problem == "embedding_bag_sum")
                .unwrap()
                .speedup,
            2.0
        );
    }

    #[test]
    fn committed_profiles_are_valid() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../workloads");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                let w = Workload::load(&path).unwrap_or_else(|e| panic!("{e}"));
                assert!(w.source.contains("measured") || w.source.contains("http"));
                seen += 1;
            }
        }
        assert!(seen > 0, "no profile in {}", dir.display());
    }

    /// Each (file, body, message): loading `body` written to `file` fails with an error naming
    /// the file and containing the message.
    fn assert_load_errors(
        write: &dyn Fn(&str, &str) -> std::path::PathBuf,
        cases: &[(&str, String, &str)],
    ) {
        for (file, body, want) in cases {
            let err = Workload::load(&write(file, body)).unwrap_err().to_string();
            assert!(err.contains(file), "{err}");
            assert!(err.contains(want), "{file}: {err}");
        }
    }

    #[test]
    fn profiles_are_validated_with_the_file_and_field_named() {
        let dir = std::env::temp_dir().join(format!("dlrm-workload-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, body: &str| {
            let p = dir.join(name);
            std::fs::write(&p, body).unwrap();
            p
        };
        let head = "name = \"w\"\ndescription = \"d\"\nsource = \"s\"\n";
        let ok = write(
            "ok.toml",
            &format!("{head}[fractions]\nembedding_bag_sum = 0.25\ndot_interaction = 0.05\n"),
        );
        let w = Workload::load(&ok).unwrap();
        assert_eq!(w.fractions.len(), 2);
        let cases = [
            (
                "unknown.toml",
                format!("{head}[fractions]\nembedding_bag_summ = 0.2\n"),
                "`fractions.embedding_bag_summ`: no such problem",
            ),
            (
                "range.toml",
                format!("{head}[fractions]\nembedding_bag_sum = 1.5\n"),
                "is not in [0, 1]",
            ),
            (
                "sum.toml",
                format!("{head}[fractions]\nembedding_bag_sum = 0.7\ndot_interaction = 0.4\n"),
                "add up to 1.1000",
            ),
            (
                "source.toml",
                "name = \"w\"\ndescription = \"d\"\nsource = \" \"\n[fractions]\nfm_interaction = 0.1\n"
                    .to_string(),
                "field `source` is empty",
            ),
            (
                "type.toml",
                format!("{head}[fractions]\nembedding_bag_sum = \"0.1\"\n"),
                "line 5, column 21",
            ),
            (
                "extra.toml",
                format!("{head}steps = 3\n[fractions]\nfm_interaction = 0.1\n"),
                "unknown field `steps`",
            ),
        ];
        assert_load_errors(&write, &cases);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_share_of_one_has_an_unbounded_ceiling_not_a_309_digit_one() {
        let w = workload(&[("embedding_bag_sum", 1.0)]);
        let p = project(&w, &[], None);
        assert!(p.ceiling().is_infinite());
        let md = p.markdown(&w);
        assert!(md.contains("more than an unbounded speedup"), "{md}");
        assert!(!md.contains("00000000"), "{md}");
        assert!(p.to_json()["ceiling"].is_null());
        let half = project(&workload(&[("embedding_bag_sum", 0.5)]), &[], None);
        assert_eq!(half.ceiling_text(), "2.000x");
    }

    #[test]
    fn measured_profiles_parse_with_classes_coverage_and_an_empty_fractions_table() {
        let dir = std::env::temp_dir().join(format!("dlrm-workload-new-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, body: &str| {
            let p = dir.join(name);
            std::fs::write(&p, body).unwrap();
            p
        };
        let head = "name = \"w\"\ndescription = \"d\"\nsource = \"measured\"\n\
                    step_ms = 21.5\ngpu_ms = 20.25\ncoverage = 0.998\nmethod = \"m\"\n\
                    kernels_csv = \"w.kernels.csv\"\n";
        let ok = write(
            "ok.toml",
            &format!(
                "{head}\n[fractions]\nembedding_bag_sum = 0.3\n\n[classes]\nmatmul = 0.5\n\
                 copy = 0.198\nother = 0.002\n"
            ),
        );
        let w = Workload::load(&ok).unwrap();
        assert_eq!(w.step_ms, Some(21.5));
        assert_eq!(w.gpu_ms, Some(20.25));
        assert_eq!(w.coverage, Some(0.998));
        assert_eq!(w.kernels_csv.as_deref(), Some("w.kernels.csv"));
        assert_eq!(w.classes.as_ref().unwrap().len(), 3);
        // A transformer step: no problem in it, the classes make the whole step.
        let gpt = write(
            "gpt.toml",
            &format!("{head}\n[fractions]\n\n[classes]\nmatmul = 0.6\nattention = 0.4\n"),
        );
        let w = Workload::load(&gpt).unwrap();
        assert!(w.fractions.is_empty());
        let p = project(&w, &[], None);
        assert_eq!(p.addressable, 0.0);
        assert_eq!(p.step_speedup(), 1.0);
        let cases = [
            (
                "noclass.toml",
                format!("{head}[fractions]\n[classes]\nmatmull = 1.0\n"),
                "`classes.matmull`: no such class",
            ),
            (
                "classrange.toml",
                format!("{head}[fractions]\n[classes]\nmatmul = 1.5\n"),
                "`classes.matmul` = 1.5 is not in [0, 1]",
            ),
            (
                "whole.toml",
                format!("{head}[fractions]\nembedding_bag_sum = 0.2\n[classes]\nmatmul = 0.5\n"),
                "add up to 0.7000, not the whole step",
            ),
            (
                "coverage.toml",
                "name = \"w\"\ndescription = \"d\"\nsource = \"s\"\ncoverage = 1.5\n\
                 [fractions]\nfm_interaction = 0.1\n"
                    .to_string(),
                "`coverage` = 1.5 is out of range",
            ),
            (
                "empty.toml",
                "name = \"w\"\ndescription = \"d\"\nsource = \"s\"\n[fractions]\n".to_string(),
                "`fractions` lists no problem",
            ),
        ];
        assert_load_errors(&write, &cases);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn several_profiles_make_one_table_with_the_published_range() {
        let mut reference = record("embedding_bag_sum", "reference", "reference", 1.0, 0.0);
        reference.pytorch = Some(PeerTime {
            median_ms: 1.0,
            reference_over_pytorch: 1.0,
            source: "t".into(),
        });
        let records = vec![
            reference,
            record("embedding_bag_sum", "fast", "b", 0.5, 2.0),
        ];
        let mut rec = workload(&[("embedding_bag_sum", 0.6), ("dot_interaction", 0.1)]);
        rec.name = "dlrm-train".into();
        rec.coverage = Some(0.995);
        let mut gpt = workload(&[]);
        gpt.name = "gpt-train".into();
        gpt.classes = Some([("matmul".to_string(), 1.0)].into_iter().collect());
        let mut small = workload(&[("embedding_bag_sum", 0.1)]);
        small.name = "small".into();
        let items: Vec<_> = [rec, gpt, small]
            .into_iter()
            .map(|w| {
                let p = project(&w, &records, None);
                (w, p)
            })
            .collect();
        let t = table_many(&items);
        // dlrm: Σf = 0.7, new share 0.3 + 0.6/2 + 0.1 = 0.7 -> 1.429x, -30%; ceiling 1/0.3.
        assert!(
            t.contains("| dlrm-train | 70.0% | 3.333x | 1.429x | 30.0% | 99.5% | above |"),
            "{t}"
        );
        assert!(
            t.contains("| gpt-train | 0.0% | 1.000x | 1.000x | 0.0% | - | below |"),
            "{t}"
        );
        // 0.9 + 0.05 = 0.95 -> 1.053x, -5%
        assert!(
            t.contains("| small | 10.0% | 1.111x | 1.053x | 5.0% | - | within |"),
            "{t}"
        );
        assert!(
            t.contains("| embedding_bag_sum | b/fast | 2.000 | PyTorch eager |"),
            "{t}"
        );
        assert!(
            t.contains("| dot_interaction | - | 1.000 | not in this run |"),
            "{t}"
        );
        assert!(t.contains("vs published 8.9–58.2%"), "{t}");
        assert!(
            t.contains(
                "the published study found 8.9% to 58.2% of runtime addressable across seven \
                 workloads in three domains"
            ),
            "{t}"
        );
        assert!(t.starts_with("## End-to-end projection over 3 workload profiles"));
    }

    #[test]
    fn workload_directories_expand_to_their_profiles_sorted() {
        let dir = std::env::temp_dir().join(format!("dlrm-workload-dir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        for f in ["b.toml", "a.toml", "a.kernels.csv"] {
            std::fs::write(dir.join(f), "").unwrap();
        }
        let single = dir.join("x.toml");
        let got = workload_paths(&[dir.clone(), single.clone()]).unwrap();
        assert_eq!(got, vec![dir.join("a.toml"), dir.join("b.toml"), single]);
        let err = workload_paths(&[dir.join("sub")]).unwrap_err().to_string();
        assert!(err.contains("no workload profile"), "{err}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
