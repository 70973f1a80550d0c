//! End-to-end projection (DESIGN §8): what a run's kernels would do to a whole step.
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
use crate::record::{Record, Status};
use bench_problems::find_problem;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

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
    pub fractions: BTreeMap<String, f64>,
}

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
        if self.fractions.is_empty() {
            return Err("`fractions` lists no problem".into());
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
    let mut problems = Vec::new();
    for (problem, &fraction) in &workload.fractions {
        let eager_ms = records
            .iter()
            .find(|r| &r.problem == problem && r.candidate == "reference")
            .and_then(|r| r.pytorch.as_ref())
            .map(|p| p.median_ms);
        let best = records
            .iter()
            .filter(|r| &r.problem == problem && r.candidate != "reference")
            .filter(|r| r.win && r.status == Status::Correct)
            .filter(|r| group.is_none_or(|g| r.group == g))
            .filter_map(|r| {
                let cand_ms = r.timing.as_ref()?.median_ms;
                let (s, basis) = match eager_ms {
                    Some(e) if cand_ms > 0.0 => (e / cand_ms, "PyTorch eager"),
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
                    (true, true) => "no win over eager",
                }
                .into(),
            },
        });
    }
    let addressable: f64 = problems.iter().map(|p| p.fraction).sum();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{PeerTime, Speedup, Timing};

    fn workload(fractions: &[(&str, f64)]) -> Workload {
        Workload {
            name: "w".into(),
            description: "d".into(),
            source: "test".into(),
            fractions: fractions.iter().map(|&(k, v)| (k.into(), v)).collect(),
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
                format!("{head}step_ms = 3\n[fractions]\nfm_interaction = 0.1\n"),
                "unknown field `step_ms`",
            ),
        ];
        for (file, body, want) in cases {
            let err = Workload::load(&write(file, &body)).unwrap_err().to_string();
            assert!(err.contains(file), "{err}");
            assert!(err.contains(want), "{file}: {err}");
        }
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
}
