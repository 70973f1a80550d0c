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
pub(crate) const CLASSES: [&str; 9] = [
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
pub(crate) const PUBLISHED_RANGE: (f64, f64) = (0.089, 0.582);

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
    pub(crate) fn step_speedup(&self) -> f64 {
        1.0 / self.new_time_share
    }

    /// Share of the step's time saved, 1 − new time share.
    pub(crate) fn time_saved(&self) -> f64 {
        1.0 - self.new_time_share
    }

    /// The most any kernel of these problems could give: 1 / (1 − Σf), infinite when they
    /// are the whole step (Σf = 1).
    pub(crate) fn ceiling(&self) -> f64 {
        let rest = 1.0 - self.addressable;
        if rest <= 1e-12 {
            f64::INFINITY
        } else {
            1.0 / rest
        }
    }

    /// [`Self::ceiling`] in words: `2.326x`, or `unbounded` when it is infinite.
    pub(crate) fn ceiling_text(&self) -> String {
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
    pub(crate) fn to_json(&self) -> serde_json::Value {
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
pub(crate) fn workload_paths(args: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
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
pub(crate) fn table_many(items: &[(Workload, Projection)]) -> String {
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
mod tests;
