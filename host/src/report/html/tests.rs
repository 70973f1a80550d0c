//! Tests of [`super`].
use super::*;
use crate::results::pool_runs;
use crate::results::record::{PeerTime, Speedup, Timing};

fn committed() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../results/20261201T193405Z-gpu-full")
}

fn page_of(records: &[Record], sources: Vec<Source>) -> Page {
    let summary = Summary::new(records, 2, Basis::Reference);
    build(&PageData {
        title: "t".into(),
        sources,
        records,
        summary: &summary,
        projection: None,
    })
    .unwrap()
}

fn circles(svg: &str) -> usize {
    svg.matches("<circle").count()
}

#[test]
fn every_plot_of_a_committed_run_has_one_circle_per_data_point() {
    let dir = committed();
    let records = pool_runs(std::slice::from_ref(&dir), false).unwrap();
    let page = page_of(&records, vec![Source::read(&dir)]);
    // Counted from the records here, not from the plots' own count.
    let filled = with_reference_peers(&records);
    let candidates: Vec<(&Record, &Record)> = records
        .iter()
        .zip(&filled)
        .filter(|(r, _)| !r.is_reference())
        .collect();
    let on_ref = candidates
        .iter()
        .filter(|(r, _)| r.speedup.is_some())
        .count();
    let on_eager = candidates
        .iter()
        .filter(|(_, f)| Basis::Eager.speedup(f).is_some())
        .count();
    let timed = records.iter().filter(|r| r.timing.is_some()).count();
    let floors = records
        .iter()
        .filter(|r| r.timing.as_ref().and_then(|t| t.floor_fraction).is_some())
        .count();
    assert_eq!((on_ref, on_eager), (18 + 1, 18 + 1), "the committed set");
    let by_name = |n: &str| page.plots.iter().find(|p| p.name == n).unwrap();
    for (name, want) in [
        ("speedups", on_ref + on_eager),
        ("roofline", timed),
        ("floor", floors),
    ] {
        let p = by_name(name);
        assert_eq!(p.points, want, "{name}");
        assert_eq!(circles(&p.svg), want, "{name}");
    }
    // Input statistics: the pooling histograms' buckets, tbe's tables, the ranks' ids.
    let bag_sum = by_name("inputs-embedding_bag_sum-pooling_histogram");
    let stats = &records[0].input_stats.as_ref().unwrap()[0]["stats"];
    let buckets = stats["pooling_histogram"].as_array().unwrap().len();
    assert_eq!(circles(&bag_sum.svg), buckets);
    let ranks = by_name("inputs-block_bucketize_sparse_features-ids_per_rank");
    assert_eq!(circles(&ranks.svg), 8);
    let tables = by_name("inputs-tbe_forward_fp16-per_table");
    assert!(tables.points > 0 && circles(&tables.svg) == tables.points);
    for p in &page.plots {
        assert_eq!(circles(&p.svg), p.points, "{}", p.name);
        assert!(p.points > 0, "{} is empty", p.name);
        let tag = format!("id=\"plot-{}\" data-points=\"{}\"", p.name, p.points);
        assert!(page.html.contains(&tag), "{tag}");
    }
    // The run's facts.
    for s in [
        "NVIDIA H200",
        "cf55a237a9b0f5531203d220aedd1f25fdc570de",
        "2686351721243509433",
        "7377750836759659626",
        "HBM copy 4241 GB/s",
        "KernelBench fast_1",
        "Metrics over PyTorch eager (also)",
    ] {
        assert!(page.html.contains(s), "{s}");
    }
    // Nothing loads from elsewhere (the SVG namespace URI is a name, not a load).
    for load in ["src=", "href=\"http", "url(", "@import", "<link"] {
        assert!(!page.html.contains(load), "{load}");
    }
    assert!(!page.html.contains("<script src") && !page.html.contains("<link"));
}

#[test]
fn messages_are_escaped_not_markup() {
    let mut bad = Record::new("embedding_bag_sum", "x<y", "g", "o");
    bad.status = Status::CompileError;
    bad.message = "error: <script>alert(1)</script> & \"quotes\"".into();
    let page = page_of(&[bad], vec![]);
    assert!(!page.html.contains("<script>alert"), "{}", page.html);
    assert!(page
        .html
        .contains("error: &lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;quotes&quot;"));
    assert!(page.html.contains("g/x&lt;y"));
    // Only the page's own two scripts.
    assert_eq!(page.html.matches("<script>").count(), 2);
    assert!(!page.plots[0].svg.contains("x<y"), "SVG text escaped too");
}

#[test]
fn a_set_without_eager_or_ceilings_still_renders() {
    let timed = |candidate: &str, group: &str, ms: f64| {
        let mut r = Record::new("kjt_permute", candidate, group, "o");
        r.status = Status::Correct;
        r.timing = Some(Timing {
            median_ms: ms,
            compulsory_gbps: 100.0 / ms,
            logical_gbps: 300.0 / ms,
            ..Default::default()
        });
        r
    };
    let reference = timed("reference", "reference", 1.0);
    let mut c = timed("c", "g", 0.5);
    c.speedup = Some(Speedup {
        median: 2.0,
        ci_low: 1.9,
        ci_high: 2.1,
        pairs: 30,
    });
    c.win = true;
    let records = [reference, c];
    let page = page_of(
        &records,
        vec![Source {
            path: "nowhere".into(),
            run: None,
        }],
    );
    let p = &page.plots;
    assert_eq!(
        p.iter()
            .map(|p| (p.name.as_str(), p.points))
            .collect::<Vec<_>>(),
        [("speedups", 1), ("roofline", 2), ("floor", 0)]
    );
    assert!(p[1].caption.contains("No ceilings were measured"));
    assert!(page.html.contains("PyTorch eager was not measured"));
    assert!(page.html.contains("No readable run.json"));
    assert!(page.html.contains("No input statistics recorded"));
    assert!(page.html.contains("2.000× win"));
    // With eager on the reference, the candidate gets an unpaired eager point.
    let mut with = records.to_vec();
    with[0].pytorch = Some(PeerTime {
        median_ms: 0.8,
        reference_over_pytorch: 1.25,
        source: "t".into(),
        ..PeerTime::default()
    });
    let page = page_of(&with, vec![]);
    assert_eq!(page.plots[0].points, 2);
    assert!(page.html.contains("1.600× win</td><td>unpaired"));
}

#[test]
fn pooled_report_writes_the_page_and_the_plot_files() {
    let dir = std::env::temp_dir().join(format!("dlrm-html-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let html = dir.join("page/r.html");
    let pooled = Pooled::read(&[committed()], false).unwrap();
    let summary = Summary::new(&pooled.records, pooled.problem_count(), Basis::Eager);
    let profile = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../workloads/dlrm-dot-mlperf-tables-train-h200.toml");
    let workload = Workload::load(&profile).ok();
    let projection = workload
        .as_ref()
        .map(|w| crate::report::projection::project(w, &pooled.records, None));
    let projected = workload.as_ref().zip(projection.as_ref());
    write_pooled_report(&pooled, &summary, projected, Some(&dir), Some(&html)).unwrap();
    assert_eq!(projected.is_some(), profile.is_file());
    if projected.is_some() {
        assert!(dir.join("projection.svg").is_file());
    }
    assert!(std::fs::read_to_string(&html).unwrap().contains("<svg"));
    for f in ["speedups.svg", "roofline.svg", "floor.svg"] {
        assert!(dir.join(f).is_file(), "{f}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn prose_shows_inline_code_as_code_and_escapes_the_rest() {
    assert_eq!(
        super::prose("run `--torch <x>` & see"),
        "run <code>--torch &lt;x&gt;</code> &amp; see"
    );
    assert_eq!(super::prose("a ` lone tick"), "a ` lone tick");
}
