//! `report.html` (docs/design.md §9): one self-contained page per result set or pooled report — no
//! network, no external script, font or style sheet; the plots ([`crate::report::plots`]) are
//! inline SVG. It shows, per problem, every candidate's speedup with its 95% interval on both
//! bases and its wins; a roofline of achieved bandwidth under the measured ceilings and each
//! record's share of the physical floor; the projection onto a workload when one is given; the
//! input statistics the references recorded; the group metrics tables; the run's device,
//! ceilings, commit and seeds; and the messages of failed candidates.
//!
//! A small inline script, run when the page has loaded, counts each plot's circles against the
//! number of data points the page was built with and writes the result into the DOM
//! (`<body data-check>`, and `data-script-errors` on `<html>` for any script error), so a
//! headless browser's `--dump-dom` shows whether the page rendered whole. Without scripts the
//! page reads the same.
use crate::report;
use crate::report::metrics::{with_reference_peers, Basis, Summary, FAST_P};
use crate::report::plots::{self as plots, escape, Plot};
use crate::report::projection::{Projection, Workload};
use crate::results::pool::Pooled;
use crate::results::record::{Ceilings, Record, Status};
use crate::results::{RunMeta, SecretSeed};
use anyhow::Context;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The plot files written next to `summary.md` (the projection's only with a workload).
pub(crate) const PLOT_FILES: [&str; 4] = ["speedups", "roofline", "floor", "projection"];

/// One result set the page was made from: its path and its `run.json` (if readable).
#[derive(Clone, Debug)]
pub struct Source {
    pub path: PathBuf,
    pub run: Option<RunMeta>,
}

impl Source {
    /// The set at `path` (a directory or its `results.jsonl`), with its `run.json`.
    pub fn read(path: &Path) -> Source {
        Source {
            path: path.to_path_buf(),
            run: RunMeta::beside(path),
        }
    }

    /// The measured ceilings of its `run.json`, when there are any.
    pub fn ceilings(&self) -> Option<Ceilings> {
        let c = self.run.as_ref()?.ceilings?;
        (c.hbm_bytes_per_s > 0.0 || c.l2_bytes_per_s > 0.0).then_some(c)
    }
}

/// What a page is made of.
pub struct PageData<'a> {
    pub title: String,
    pub sources: Vec<Source>,
    pub records: &'a [Record],
    pub summary: &'a Summary,
    pub projection: Option<(&'a Workload, &'a Projection)>,
}

/// A built page: its HTML and the plots in it (the main ones are also written as files).
pub struct Page {
    pub html: String,
    pub plots: Vec<Plot>,
}

impl Page {
    /// Writes `report.html` (as `html`, or into `dir`) and, into `dir`, the [`PLOT_FILES`]
    /// among its plots.
    pub fn write(&self, dir: Option<&Path>, html: Option<&Path>) -> anyhow::Result<()> {
        if let Some(dir) = dir {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            for p in self.plots.iter().filter(|p| PLOT_FILES.contains(&&*p.name)) {
                let path = dir.join(format!("{}.svg", p.name));
                std::fs::write(&path, &p.svg)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
        }
        let path = html.map_or_else(|| dir.map(|d| d.join("report.html")), |h| Some(h.into()));
        if let Some(path) = path {
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&path, &self.html)
                .with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(())
    }
}

/// A run's `report.html` and plots, in its result set `dir` (`runner::run` calls this).
pub(crate) fn write_run_report(
    dir: &Path,
    records: &[Record],
    summary: &Summary,
    projection: Option<(&Workload, &Projection)>,
) -> anyhow::Result<()> {
    let source = Source::read(dir);
    let run_id = source
        .run
        .as_ref()
        .map_or("run".to_string(), |r| r.run_id.clone());
    let page = build(&PageData {
        title: format!("DLRM-Bench run {run_id}"),
        sources: vec![source],
        records,
        summary,
        projection,
    })?;
    page.write(Some(dir), None)
}

/// `dlrm-bench report … --html`: the page of the pooled sets (to `html`, and with its plots
/// into `out` when given).
pub fn write_pooled_report(
    pooled: &Pooled,
    summary: &Summary,
    workload: Option<(&Workload, &Projection)>,
    out: Option<&Path>,
    html: Option<&Path>,
) -> anyhow::Result<()> {
    let names: Vec<String> = pooled
        .sets
        .iter()
        .map(|(p, _)| p.display().to_string())
        .collect();
    let page = build(&PageData {
        title: format!("DLRM-Bench report: {}", names.join(", ")),
        sources: pooled
            .sets
            .iter()
            .map(|(path, run)| Source {
                path: path.clone(),
                run: run.clone(),
            })
            .collect(),
        records: &pooled.records,
        summary,
        projection: workload,
    })?;
    page.write(out, html)?;
    if let Some(h) = html {
        println!("wrote {}", h.display());
    }
    Ok(())
}

const STYLE: &str = "
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;margin:0;
 color:#1d1d1f;background:#f6f7f9;line-height:1.45}
main{max-width:1240px;margin:0 auto;padding:18px 28px 40px}
h1{font-size:1.6em;margin:.4em 0 .2em}h2{margin-top:1.8em;border-bottom:2px solid #dde;
 padding-bottom:.2em}h3{margin:1.2em 0 .4em}
nav a{margin-right:1em}
table{border-collapse:collapse;margin:.5em 0 1em;background:#fff;font-size:.9em;display:block;
 max-width:100%;overflow-x:auto}
code{background:#eef0f5;padding:0 3px;border-radius:3px;font-size:.92em}
th,td{border:1px solid #d8dbe2;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#eef0f5}td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.problem th{background:#e3e8f3;font-size:1.02em}
td.win{background:#d9f2d9;font-weight:600}td.bad{background:#fbe0e0}
figure{background:#fff;border:1px solid #d8dbe2;margin:1em 0;padding:8px 10px}
figure svg{max-width:100%;height:auto;display:block}
figcaption{font-size:.88em;color:#444;margin-top:6px}
pre{background:#fff;border:1px solid #d8dbe2;padding:8px;white-space:pre-wrap;
 word-break:break-word;font-size:.85em;max-height:24em;overflow:auto}
.note{color:#555;font-size:.9em}.warn{background:#fff3cd;border:1px solid #e0c060;padding:8px}
.grid{display:flex;flex-wrap:wrap;gap:12px}.grid figure{flex:1 1 520px;margin:0}
dl.kv{display:grid;grid-template-columns:max-content auto;gap:2px 14px;background:#fff;
 border:1px solid #d8dbe2;padding:8px 12px}dl.kv dt{font-weight:600}dl.kv dd{margin:0}
";

/// Runs when the page has loaded: counts each plot's circles against its `data-points`.
const CHECK_SCRIPT: &str = "
(function(){
  var figs=document.querySelectorAll('figure.plot'),bad=[],marks=0;
  for(var i=0;i<figs.length;i++){
    var f=figs[i],n=f.querySelectorAll('svg circle').length;
    f.setAttribute('data-marks',String(n));marks+=n;
    if(String(n)!==f.getAttribute('data-points'))bad.push(f.id);
  }
  document.body.setAttribute('data-check',bad.length?'mismatch '+bad.join(' '):'ok');
  var el=document.getElementById('browser-check');
  if(el)el.textContent=bad.length?('Rendered marks differ from the data in: '+bad.join(', '))
    :('Checked when this page loaded: '+figs.length+' plots, '+marks+
      ' data points drawn, as many as the records hold.');
})();
";

const ERROR_SCRIPT: &str = "window.addEventListener('error',function(e){var h=document.\
documentElement;h.setAttribute('data-script-errors',(h.getAttribute('data-script-errors')||'')\
+(e.message||'error')+';');});";

fn figure(out: &mut String, p: &Plot) {
    let _ = writeln!(
        out,
        "<figure class=\"plot\" id=\"plot-{}\" data-points=\"{}\">{}<figcaption><b>{}</b>. {} \
         ({} data points.)</figcaption></figure>",
        escape(&p.name),
        p.points,
        p.svg,
        escape(&p.title),
        p.caption,
        p.points
    );
}

fn fmt(v: Option<f64>, digits: usize) -> String {
    v.filter(|x| x.is_finite())
        .map(|x| format!("{x:.digits$}"))
        .unwrap_or_else(|| "–".into())
}

fn table(out: &mut String, header: &[String], rows: &[Vec<String>]) {
    out.push_str("<table><tr>");
    for h in header {
        let _ = write!(out, "<th>{}</th>", escape(&h.replace('\n', " ")));
    }
    out.push_str("</tr>\n");
    for r in rows {
        out.push_str("<tr>");
        for c in r {
            let _ = write!(out, "<td>{}</td>", escape(c));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}

/// Builds the page.
pub fn build(d: &PageData) -> anyhow::Result<Page> {
    let records = d.records;
    let ceilings = d.sources.iter().rev().find_map(Source::ceilings);
    let mut plots = vec![
        plots::speedups(records)?,
        plots::roofline(records, ceilings.as_ref())?,
        plots::floor_share(records)?,
    ];
    if let Some((_, p)) = d.projection {
        plots.push(plots::projection(p)?);
    }
    let shape_plot = plots::shape_speedups(records)?;
    let mut h = String::new();
    let _ = writeln!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>{}</title><script>{ERROR_SCRIPT}</script><style>{STYLE}</style></head>\n\
         <body><main>\n<h1>{}</h1>",
        escape(&d.title),
        escape(&d.title)
    );
    h.push_str(
        "<nav><a href=\"#run\">Run</a><a href=\"#speedups\">Speedups</a>\
         <a href=\"#shapes\">Shapes</a><a href=\"#bandwidth\">Bandwidth</a><a href=\"#projection\">Projection</a>\
         <a href=\"#inputs\">Inputs</a><a href=\"#metrics\">Metrics</a>\
         <a href=\"#messages\">Messages</a><a href=\"#records\">All records</a></nav>\n",
    );
    let _ = writeln!(
        h,
        "<p><b>{}</b></p>",
        escape(&report::summary_line(d.summary))
    );
    run_section(&mut h, &d.sources);
    speedup_section(&mut h, records, &plots[0]);
    shapes_section(&mut h, records, shape_plot.as_ref());
    h.push_str("<h2 id=\"bandwidth\">Bandwidth and the physical floor</h2>\n<div class=\"grid\">");
    figure(&mut h, &plots[1]);
    figure(&mut h, &plots[2]);
    h.push_str("</div>\n");
    legend_of_problems(&mut h, records);
    h.push_str("<h2 id=\"projection\">End-to-end projection</h2>\n");
    match d.projection {
        Some((w, p)) => projection_section(&mut h, w, p, &plots[3]),
        None => h.push_str(
            "<p class=\"note\">No workload profile was given (<code>--workload \
             workloads/NAME.toml</code>): no projection.</p>\n",
        ),
    }
    let input_plots = input_section(&mut h, records)?;
    metrics_section(&mut h, d.summary);
    messages_section(&mut h, records);
    h.push_str(
        "<h2 id=\"records\">All records</h2>\n<details><summary>The table of \
                <code>summary.md</code></summary>\n",
    );
    table(
        &mut h,
        &report::COLUMNS.map(String::from),
        &report::rows(records),
    );
    h.push_str("</details>\n");
    let _ = writeln!(
        h,
        "<p class=\"note\" id=\"browser-check\">Made by dlrm-bench {}; self-contained (no \
         network).</p>\n</main><script>{CHECK_SCRIPT}</script></body></html>",
        escape(crate::results::record::GIT_COMMIT)
    );
    plots.extend(input_plots);
    plots.extend(shape_plot);
    Ok(Page { html: h, plots })
}

fn run_section(h: &mut String, sources: &[Source]) {
    h.push_str("<h2 id=\"run\">Run</h2>\n");
    for s in sources {
        let _ = writeln!(h, "<h3>{}</h3>", escape(&s.path.display().to_string()));
        let Some(r) = &s.run else {
            h.push_str("<p class=\"note\">No readable run.json beside it.</p>\n");
            continue;
        };
        if !r.timings_are_gpu_timings {
            h.push_str(
                "<p class=\"warn\">This set ran on the CPU emulator: its timings are NOT GPU \
                 timings.</p>\n",
            );
        }
        let items = run_items(r);
        h.push_str("<dl class=\"kv\">");
        for (k, v) in items {
            let _ = write!(h, "<dt>{}</dt><dd>{}</dd>", escape(k), escape(&v));
        }
        h.push_str("</dl>\n");
    }
}

/// The facts of one `run.json` the page lists, as (label, text).
fn run_items(r: &RunMeta) -> Vec<(&'static str, String)> {
    let dev = &r.device;
    let text = |v: Option<&str>| v.map_or("–".to_string(), str::to_string);
    let cc = dev
        .compute_capability
        .map(|(a, b)| format!("{a}.{b}"))
        .unwrap_or_default();
    let rate = |v: Option<f64>, unit: &str| {
        v.map(|x| format!("{:.0} {unit}", x / 1e9))
            .unwrap_or_else(|| "not measured".into())
    };
    let c = r.ceilings.as_ref();
    let seeds: Vec<String> = r.public_seeds.iter().map(u64::to_string).collect();
    let secret = match &r.secret_seed {
        SecretSeed::Published(s) => s.to_string(),
        SecretSeed::Withheld(s) => s.clone(),
    };
    vec![
        ("run id", r.run_id.clone()),
        (
            "device",
            format!(
                "{} (compute capability {cc}, {} SMs, {:.1} GB memory, {:.0} MiB L2; {})",
                dev.name,
                dev.multiprocessors,
                dev.memory_bytes as f64 / 1e9,
                dev.l2_bytes as f64 / 1048576.0,
                text(dev.driver.as_deref())
            ),
        ),
        ("backend", r.backend.clone()),
        (
            "ceilings (measured)",
            format!(
                "HBM copy {}, L2 read {}, fp32 {}",
                rate(c.map(|c| c.hbm_bytes_per_s), "GB/s"),
                rate(c.map(|c| c.l2_bytes_per_s), "GB/s"),
                rate(c.map(|c| c.fp32_flops_per_s), "GFLOP/s")
            ),
        ),
        ("commit", r.git_commit.clone()),
        ("public seeds", seeds.join(", ")),
        ("secret seed", secret),
        ("command", r.command.clone()),
        (
            "started / finished",
            format!("{} / {}", r.started, text(r.finished.as_deref())),
        ),
        (
            "wall time",
            r.wall_s.map_or("–".into(), |s| format!("{s:.0} s")),
        ),
    ]
}

fn speedup_section(h: &mut String, records: &[Record], plot: &Plot) {
    h.push_str("<h2 id=\"speedups\">Speedups</h2>\n");
    figure(h, plot);
    let filled = with_reference_peers(records);
    h.push_str(
        "<table><tr><th>candidate</th><th>status</th><th>median ms</th>\
         <th>over the reference</th><th>95% interval</th><th>over eager</th>\
         <th>95% interval</th></tr>\n",
    );
    let mut last = None;
    for (r, f) in records.iter().zip(&filled) {
        if last != Some(&r.problem) {
            let _ = writeln!(
                h,
                "<tr class=\"problem\"><th colspan=\"7\">{} {}</th></tr>",
                plots::problem_number(&r.problem),
                escape(&r.problem)
            );
            last = Some(&r.problem);
        }
        let pts = plots::speedup_points(r, f);
        let cells = |basis: Basis| match pts.iter().find(|p| p.basis == basis) {
            None => "<td class=\"num\">–</td><td>–</td>".to_string(),
            Some(p) => format!(
                "<td class=\"num{}\">{:.3}×{}</td><td>{}</td>",
                if p.win { " win" } else { "" },
                p.median,
                if p.win { " win" } else { "" },
                p.interval.map_or_else(
                    || if basis == Basis::Eager {
                        "unpaired".to_string()
                    } else {
                        "–".to_string()
                    },
                    |(a, b)| format!("[{a:.3}, {b:.3}]")
                )
            ),
        };
        let name = if r.is_reference() {
            "(reference)".to_string()
        } else {
            format!("{}/{}", r.group, r.candidate)
        };
        let status = if r.unexpected() {
            format!(
                "{} (expected {})",
                r.status.name(),
                r.expected_status.as_deref().unwrap_or("")
            )
        } else {
            r.status.name().to_string()
        };
        let (ref_cells, eager_cells) = if r.is_reference() {
            (
                "<td colspan=\"2\"></td>".to_string(),
                match &r.pytorch {
                    Some(p) => format!(
                        "<td colspan=\"2\">eager {:.4} ms (reference / eager {:.3})</td>",
                        p.median_ms, p.reference_over_pytorch
                    ),
                    None => "<td colspan=\"2\">eager not measured</td>".into(),
                },
            )
        } else {
            (cells(Basis::Reference), cells(Basis::Eager))
        };
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td{}>{}</td><td class=\"num\">{}</td>{ref_cells}{eager_cells}</tr>",
            escape(&name),
            if r.status == Status::Correct {
                ""
            } else {
                " class=\"bad\""
            },
            escape(&status),
            fmt(r.timing.as_ref().map(|t| t.median_ms), 4),
        );
    }
    h.push_str("</table>\n");
}

/// Each shape's figures (when a problem was measured at several): the plot and the table.
fn shapes_section(h: &mut String, records: &[Record], plot: Option<&Plot>) {
    let rows = crate::report::shapes::shape_rows(records);
    h.push_str("<h2 id=\"shapes\">Shapes</h2>\n");
    if rows.is_empty() {
        h.push_str("<p class=\"note\">Every problem was measured at one shape.</p>\n");
        return;
    }
    let _ = writeln!(
        h,
        "<p class=\"note\">{}</p>",
        prose(crate::report::shapes::SHAPES_NOTE)
    );
    if let Some(p) = plot {
        figure(h, p);
    }
    h.push_str("<details><summary>Each shape's figures</summary>\n");
    table(
        h,
        &crate::report::shapes::SHAPE_COLUMNS.map(String::from),
        &rows,
    );
    h.push_str("</details>\n");
}

fn legend_of_problems(h: &mut String, records: &[Record]) {
    let mut problems: Vec<&str> = records.iter().map(|r| r.problem.as_str()).collect();
    problems.dedup();
    h.push_str("<p class=\"note\">Problems: ");
    for p in problems {
        let _ = write!(
            h,
            "<span style=\"color:{}\">●</span>&nbsp;{}&nbsp;{} ",
            plots::hex(plots::problem_color(p)),
            plots::problem_number(p),
            escape(p)
        );
    }
    h.push_str("</p>\n");
}

fn projection_section(h: &mut String, w: &Workload, p: &Projection, plot: &Plot) {
    let _ = writeln!(
        h,
        "<p>{}</p><p class=\"note\">Source: {}</p>",
        escape(&w.description),
        escape(&w.source)
    );
    figure(h, plot);
    let rows: Vec<Vec<String>> = p
        .problems
        .iter()
        .map(|q| {
            vec![
                q.problem.clone(),
                format!("{:.1}%", 100.0 * q.fraction),
                q.candidate.clone().unwrap_or_else(|| "–".into()),
                format!("{:.3}", q.speedup),
                q.basis.clone(),
                format!("{:.1}%", 100.0 * q.fraction / q.speedup),
            ]
        })
        .collect();
    table(
        h,
        &[
            "problem",
            "share of step",
            "candidate",
            "speedup",
            "over",
            "share after",
        ]
        .map(String::from),
        &rows,
    );
    let _ = writeln!(
        h,
        "<p>Addressable fraction <b>{:.1}%</b> (no kernel of these problems can give more than \
         {}); projected step speedup <b>{:.3}×</b>, step time −{:.1}%.</p>",
        100.0 * p.addressable,
        escape(&p.ceiling_text()),
        p.step_speedup(),
        100.0 * p.time_saved()
    );
}

/// A scalar of the input statistics as text (nested objects as `k=v` lists).
fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::Number(n) => Some(match n.as_f64() {
            Some(x) if x.fract() != 0.0 => format!("{x:.4}"),
            _ => n.to_string(),
        }),
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Object(o) if o.values().all(|x| !x.is_array() && !x.is_object()) => Some(
            o.iter()
                .map(|(k, x)| format!("{k}={}", scalar(x).unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(", "),
        ),
        _ => None,
    }
}

/// The input statistics of each problem's reference record: the scalars of every set as a
/// table, each array field of the first set with statistics as a plot. Returns those plots.
fn input_section(h: &mut String, records: &[Record]) -> anyhow::Result<Vec<Plot>> {
    h.push_str(
        "<h2 id=\"inputs\">Input statistics</h2>\n<p class=\"note\">What the references \
         recorded of the timed input sets (<code>input_stats</code>): sizes, pooling, reuse, \
         distinct rows.</p>\n",
    );
    let mut out = Vec::new();
    for r in records.iter().filter(|r| r.is_reference()) {
        let _ = writeln!(
            h,
            "<h3>{} {}</h3>",
            plots::problem_number(&r.problem),
            escape(&r.problem)
        );
        let sets: Vec<&Value> = match &r.input_stats {
            Some(Value::Array(a)) => a.iter().collect(),
            Some(v @ Value::Object(_)) => vec![v],
            _ => Vec::new(),
        };
        if sets.is_empty() {
            h.push_str("<p class=\"note\">No input statistics recorded.</p>\n");
            continue;
        }
        // Rows: sizes, then each scalar statistic; columns: the sets.
        let mut rows: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut order: Vec<String> = Vec::new();
        let mut put = |k: String, i: usize, v: String, rows: &mut BTreeMap<String, Vec<String>>| {
            if !order.contains(&k) {
                order.push(k.clone());
            }
            let row = rows
                .entry(k)
                .or_insert_with(|| vec![String::new(); sets.len()]);
            row[i] = v;
        };
        for (i, s) in sets.iter().enumerate() {
            if let Some(v) = s.get("sizes").and_then(scalar) {
                put("sizes".into(), i, v, &mut rows);
            }
            if let Some(v) = s.get("seed").and_then(scalar) {
                put("seed".into(), i, v, &mut rows);
            }
            for (k, v) in s
                .get("stats")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                if let Some(v) = scalar(v) {
                    put(k.clone(), i, v, &mut rows);
                }
            }
        }
        let mut header = vec!["".to_string()];
        header.extend(sets.iter().enumerate().map(|(i, s)| {
            s.get("set")
                .and_then(Value::as_str)
                .map_or_else(|| format!("set {i}"), str::to_string)
        }));
        let body: Vec<Vec<String>> = order
            .iter()
            .map(|k| {
                let mut row = vec![k.clone()];
                row.extend(rows[k].iter().cloned());
                row
            })
            .collect();
        table(h, &header, &body);
        let first = sets
            .iter()
            .find(|s| s.get("stats").is_some_and(Value::is_object));
        match first {
            None => h.push_str(
                "<p class=\"note\">No statistics of the inputs' contents (dense inputs): the \
                 sizes only.</p>\n",
            ),
            Some(s) => {
                let set = s.get("set").and_then(Value::as_str).unwrap_or("set");
                let arrays = plots::stat_arrays(&s["stats"]);
                if !arrays.is_empty() {
                    h.push_str("<div class=\"grid\">");
                    for a in &arrays {
                        let p = plots::stat_plot(&r.problem, set, a)?;
                        figure(h, &p);
                        out.push(p);
                    }
                    h.push_str("</div>\n");
                }
            }
        }
    }
    Ok(out)
}

fn metrics_section(h: &mut String, summary: &Summary) {
    h.push_str("<h2 id=\"metrics\">Metrics per candidate group</h2>\n");
    for (basis, metrics) in summary.tables() {
        let (title, detail) = report::basis_title(summary, basis);
        let _ = writeln!(
            h,
            "<h3>{}</h3><p class=\"note\">{}</p>",
            escape(&title),
            escape(&detail)
        );
        table(
            h,
            &report::metric_columns(&FAST_P),
            &report::metric_rows(metrics, &FAST_P),
        );
    }
    for note in report::absent_notes(summary) {
        let _ = writeln!(h, "<p class=\"note\">{}</p>", prose(&note));
    }
    let _ = writeln!(h, "<p class=\"note\">{}</p>", prose(report::METRICS_NOTE));
}

fn messages_section(h: &mut String, records: &[Record]) {
    h.push_str("<h2 id=\"messages\">Messages of failed candidates</h2>\n");
    let failed: Vec<&Record> = records
        .iter()
        .filter(|r| r.status != Status::Correct)
        .collect();
    if failed.is_empty() {
        h.push_str("<p class=\"note\">None: every record is correct.</p>\n");
    }
    for r in failed {
        let expected = r
            .expected_status
            .as_deref()
            .map(|e| {
                if r.unexpected() {
                    format!(" — EXPECTED {e}")
                } else {
                    " (as expected)".to_string()
                }
            })
            .unwrap_or_default();
        let _ = writeln!(
            h,
            "<h3>{} / {}/{}: {}{}</h3><pre>{}</pre>",
            escape(&r.problem),
            escape(&r.group),
            escape(&r.candidate),
            escape(r.status.name()),
            escape(&expected),
            escape(if r.message.is_empty() {
                "(no message)"
            } else {
                &r.message
            })
        );
    }
}

/// Prose for the page: escaped, with Markdown's `inline code` as `<code>` (an unpaired
/// backtick stays as it is).
fn prose(text: &str) -> String {
    let parts: Vec<&str> = text.split('`').collect();
    if parts.len().is_multiple_of(2) {
        return escape(text);
    }
    parts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            if i % 2 == 1 {
                format!("<code>{}</code>", escape(p))
            } else {
                escape(p)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
