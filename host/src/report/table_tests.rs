//! Tests of the tables, the markdown and the CSV over built records.
use super::parity::skew_note;
use super::tests::{rec, write_set};
use super::*;
use crate::report::metrics::with_reference_peers;
use crate::results::pool_runs;
use crate::results::record::read_records;
use crate::results::record::Status;

/// embedding_bag_sum: reference 1.0 ms, eager 0.8 ms, candidate x 0.4 ms (2.5 over the
/// reference, a win; 0.8 / 0.4 = 2.0 over eager). kjt_permute: no eager time, candidate y
/// 0.5 over the reference.
fn two_problems(with_eager: bool) -> Vec<Record> {
    let mut reference = rec("embedding_bag_sum", "reference", 1.0);
    reference.group = "reference".into();
    if with_eager {
        reference.pytorch = Some(crate::results::record::PeerTime {
            median_ms: 0.8,
            reference_over_pytorch: 1.25,
            source: "t".into(),
            ..crate::results::record::PeerTime::default()
        });
    }
    let sp = |median: f64| {
        Some(crate::results::record::Speedup {
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
            Basis::Reference | Basis::Compile => ("the Rust reference", "PyTorch eager"),
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
        assert!(!md.contains("PyTorch eager was not measured"), "{md}");
        // The records' eager column: x's unpaired 2.0; none for y.
        assert!(
            md.contains("| 0.8000 | **1.250** |  |"),
            "the reference's row: {md}"
        );
        assert!(md.contains("| - | - | 2.000 |"), "x's row: {md}");
    }
}

fn peer(ms: f64, reference_ms: f64) -> Option<crate::results::record::PeerTime> {
    Some(crate::results::record::PeerTime {
        median_ms: ms,
        reference_over_pytorch: reference_ms / ms,
        source: "t".into(),
        ..crate::results::record::PeerTime::default()
    })
}

fn paired(median: f64) -> Option<crate::results::record::Speedup> {
    Some(crate::results::record::Speedup {
        median,
        ci_low: median - 0.05,
        ci_high: median + 0.05,
        pairs: 30,
    })
}

/// embedding_bag_sum: reference 0.65 ms, eager 1.0 ms (ref / eager 0.65), compiled Model
/// 0.4 ms; x at 0.5 ms is 1.3x the reference (a win), 2.0x eager, 0.8x the compiled Model
/// (a loss to the compiler). kjt_permute: reference 1.0, eager 0.95 (1.053: at parity), the
/// Model failed to compile; y wins 2.0x over the reference. fm_interaction: reference 1.2,
/// eager 1.0 (1.2), compiled 0.6; z at 0.3 ms, 4.0x the reference, 2.0x the compiler.
fn compile_set() -> Vec<Record> {
    let reference = |p: &str, ms, eager_ms, compile_ms: Option<f64>| {
        let mut r = rec(p, "reference", ms);
        r.group = "reference".into();
        r.pytorch = peer(eager_ms, ms);
        r.pytorch_compile = compile_ms.and_then(|c| peer(c, ms));
        if compile_ms.is_none() {
            r.pytorch_compile_error = Some("torch.compile failed: boom\ndetails".into());
        }
        r
    };
    let cand = |p: &str, name: &str, ms, sp| {
        let mut r = rec(p, name, ms);
        r.speedup = paired(sp);
        r.win = true;
        r
    };
    vec![
        reference("embedding_bag_sum", 0.65, 1.0, Some(0.4)),
        cand("embedding_bag_sum", "x", 0.5, 1.3),
        reference("kjt_permute", 1.0, 0.95, None),
        cand("kjt_permute", "y", 0.5, 2.0),
        reference("fm_interaction", 1.2, 1.0, Some(0.6)),
        cand("fm_interaction", "z", 0.3, 4.0),
    ]
}

#[test]
fn the_skew_factor_is_the_reference_over_eager_ratio() {
    // By hand: x's speedups, 1.3 over the reference and 1.0 / 0.5 = 2.0 over eager; the
    // reference at 0.65 of eager's time makes the first 0.65 times the second.
    let records = compile_set();
    let filled = with_reference_peers(&records);
    let over_eager = Basis::Eager.speedup(&filled[1]).unwrap();
    let over_reference = Basis::Reference.speedup(&filled[1]).unwrap();
    assert!((over_eager - 2.0).abs() < 1e-12);
    assert!((over_reference / over_eager - 0.65).abs() < 1e-12);
    assert_eq!(
        skew_note(0.65),
        "speedups over the reference are ×0.65 of those over eager (1.54x smaller)"
    );
    assert_eq!(
        skew_note(1.2),
        "speedups over the reference are ×1.20 of those over eager (1.20x larger)"
    );
    assert!(outside_parity(0.65) && outside_parity(1.2) && outside_parity(0.899));
    assert!(!outside_parity(0.9) && !outside_parity(1.0) && !outside_parity(1.1));
    assert!(!outside_parity(1.053) && !outside_parity(f64::NAN));
}

#[test]
fn the_markdown_bolds_a_reference_off_parity_and_states_the_skew() {
    let records = compile_set();
    let md = markdown(
        "# h",
        &records,
        &Summary::new(&records, 3, Basis::Reference),
    );
    // Results: the ratio in bold where off parity, plain where at parity.
    assert!(
        md.contains("| 1.0000 | **0.650** |  | 0.4000 | 1.625 |  |"),
        "{md}"
    );
    assert!(md.contains("| 0.9500 | 1.053 |  | failed | - |  |"), "{md}");
    assert!(
        md.contains("| 1.0000 | **1.200** |  | 0.6000 | 2.000 |  |"),
        "{md}"
    );
    // The parity section.
    assert!(md.contains("## Reference parity\n"), "{md}");
    assert!(md.contains("(2 problem(s) here)"), "{md}");
    for row in [
        "| embedding_bag_sum | 0.6500 | 1.0000 | **0.650** | 0.4000 | 1.625 | speedups over \
             the reference are ×0.65 of those over eager (1.54x smaller) |",
        "| kjt_permute | 1.0000 | 0.9500 | 1.053 | failed | - | within ±10% of eager |",
        "| fm_interaction | 1.2000 | 1.0000 | **1.200** | 0.6000 | 2.000 | speedups over the \
             reference are ×1.20 of those over eager (1.20x larger) |",
    ] {
        assert!(md.contains(row), "{row}\n{md}");
    }
    // Without any PyTorch time there is no parity section.
    let md = markdown(
        "# h",
        &two_problems(false),
        &Summary::new(&two_problems(false), 2, Basis::Reference),
    );
    assert!(!md.contains("Reference parity"), "{md}");
}

#[test]
fn wins_that_lose_to_compile_are_flagged_and_failed_models_named() {
    let records = compile_set();
    let summary = Summary::new(&records, 3, Basis::Compile);
    let md = markdown("# h", &records, &summary);
    // x's row: a win over the reference that loses to the compiler, 0.8 over it.
    assert!(
        md.contains("| yes (loses to compile) | 0 | 0 | - | - | - | - | 2.000 | - | - | 0.800 |"),
        "{md}"
    );
    assert!(
        md.contains("| yes | 0 | 0 | - | - | - | - | 3.333 | - | - | 2.000 |"),
        "{md}"
    );
    assert!(
        md.contains("| yes | 0 | 0 | - | - | - | - | 1.900 | - | - | - |"),
        "{md}"
    );
    assert!(
        md.contains(
            "## Wins over the reference that lose to torch.compile\n\nEach beats the Rust \
                 reference but is slower than the `torch.compile`d Model (marked `yes (loses to \
                 compile)` in the results):\n\n- embedding_bag_sum / g/x: 1.300x over the \
                 reference, 0.800x over torch.compile\n"
        ),
        "{md}"
    );
    assert!(
        md.contains(
            "## Problems whose Model failed to compile (not on the torch.compile basis)\n\n\
                 - kjt_permute: torch.compile failed: boom\n"
        ),
        "{md}"
    );
    // The compile basis is the headline, over embedding_bag_sum and fm_interaction: x 0.8,
    // z 2.0 (y's problem has no compiled time). Win 1/2; median over wins 2.0; median of
    // the correct 1.4; geomean sqrt(1.6) = 1.265; fast_0.8 and fast_1: z only; fast_2:
    // none (2.0 is not faster than 2x).
    assert!(
            md.contains("### Metrics over torch.compile (headline)\n\ntorch.compile measured for 2 of 3 problems (only those count here; 1 Model(s) failed to compile and are left out)"),
            "{md}"
        );
    assert!(
        md.contains(
            "| g | 1/2 (50.0%) | 2.000 | 1.400 | 1.265 | 3/3 | 1.00 | 1.00 | 0.50 | 0.50 | \
                 0.50 | 0.00 | 0 |"
        ),
        "{md}"
    );
    assert!(md.find("over torch.compile (headline)") < md.find("over the Rust reference (also)"));
    assert!(md.find("over the Rust reference (also)") < md.find("over PyTorch eager (also)"));
    assert!(!md.contains("was not measured"), "{md}");
    // The terminal: x marked, the lists under the tables.
    let t = terminal_tables(&records, &summary, false);
    assert!(t.contains(LOSES_TO_COMPILE_MARK), "{t}");
    assert!(
        t.contains("yes*: a win over the reference that loses to torch.compile"),
        "{t}"
    );
    assert!(
        t.contains(
            "Wins over the reference that lose to torch.compile:\n- embedding_bag_sum / g/x: \
                 1.300x over the reference, 0.800x over torch.compile\n"
        ),
        "{t}"
    );
    assert!(
        t.contains("\n- kjt_permute: torch.compile failed: boom\n"),
        "{t}"
    );
    assert!(
        t.contains("Headline, over torch.compile: g 1/2 wins (50.0%)"),
        "{t}"
    );
    // No loss: said so.
    let mut fine = records.clone();
    fine[0].pytorch_compile = peer(1.0, 0.65);
    let md = markdown("# h", &fine, &Summary::new(&fine, 3, Basis::Reference));
    assert!(
        md.contains("None: every win over the reference also beats torch.compile."),
        "{md}"
    );
    assert!(!md.contains(LOSES_TO_COMPILE), "{md}");
    // Not measured: no list, a note, and the reference stands in for --basis compile.
    let plain = two_problems(true);
    let md = markdown("# h", &plain, &Summary::new(&plain, 2, Basis::Compile));
    assert!(!md.contains(COMPILE_LOSSES_TITLE), "{md}");
    assert!(
        md.contains("The torch.compile'd Model was not measured in this run"),
        "{md}"
    );
    assert!(md.contains("--basis compile was asked for"), "{md}");
    assert!(
        md.contains("### Metrics over the Rust reference (headline)"),
        "{md}"
    );
}

#[test]
fn cells_wrap_at_underscores_slashes_and_spaces() {
    assert_eq!(
        wrap_cell("embedding_backward_rowwise_adagrad", 20),
        "embedding_backward_\nrowwise_adagrad"
    );
    assert_eq!(
        wrap_cell("examples/hash_ids_fused_zero_warp_update", 22),
        "examples/hash_ids_\nfused_zero_warp_update"
    );
    assert_eq!(
        wrap_cell("incorrect (EXPECTED correct)", 10),
        "incorrect\n(EXPECTED\ncorrect)"
    );
    assert_eq!(wrap_cell("abcdefghij", 4), "abcd\nefgh\nij");
    assert_eq!(wrap_cell("short", 10), "short");
    assert_eq!(wrap_cell("", 10), "");
}

/// The committed H200 result set (12 problems, 31 records), with a torch.compile time on
/// every reference but one (whose Model failed), a win that loses to it and an unexpected
/// status: the widest cells a real run has.
fn h200_set() -> Vec<Record> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../results/20261201T193405Z-gpu-full/results.jsonl");
    let mut records = read_records(&path);
    assert_eq!(records.len(), 31, "{}", path.display());
    for r in records.iter_mut().filter(|r| r.is_reference()) {
        let ms = r.timing.as_ref().unwrap().median_ms;
        if r.problem == "kjt_permute" {
            r.pytorch_compile_error = Some("torch.compile failed: graph break".into());
        } else {
            r.pytorch_compile = peer(ms * 0.9, ms);
        }
    }
    // embedding_bag_sum's triton_row_tiles (0.406 ms) wins over the reference (1.83x) but
    // the compiled Model takes 0.67 ms... make it 0.3 ms: a loss to the compiler.
    let reference = records
        .iter_mut()
        .find(|r| r.problem == "embedding_bag_sum")
        .unwrap();
    reference.pytorch_compile = peer(0.3, 0.7442);
    let odd = records
        .iter_mut()
        .find(|r| r.candidate == "feature_copy")
        .unwrap();
    odd.status = Status::OutOfBoundsWrite;
    odd.expected_status = Some("correct".into());
    records
}

#[test]
fn the_default_terminal_table_fits_120_columns_and_wide_has_every_column() {
    let records = h200_set();
    let summary = Summary::new(&records, 12, Basis::Compile);
    assert!(summary
        .compile_losses
        .iter()
        .any(|l| l.candidate == "triton_row_tiles"));
    let narrow = terminal_tables(&records, &summary, false);
    for line in narrow.lines() {
        assert!(
            line.chars().count() <= TERMINAL_WIDTH,
            "{} chars: {line}\n{narrow}",
            line.chars().count()
        );
    }
    let table = narrow_table(&records);
    let header: String = table.lines().take(3).collect::<Vec<_>>().join("\n");
    for c in [
        "problem",
        "candidate",
        "status",
        "ms",
        "speedup",
        "win",
        "% of",
        "ref /",
    ] {
        assert!(header.contains(c), "{c}: {header}");
    }
    assert_eq!(table.matches(LOSES_TO_COMPILE_MARK).count(), 1, "{table}");
    assert!(table.contains("21.24 [21.07,21.38]"), "{table}");
    assert!(table.contains("EXPECTED"), "{table}");
    // Every record has its row: each row starts on a line whose ms cell is filled.
    let body: Vec<&str> = table.lines().filter(|l| l.contains('.')).collect();
    assert!(body.len() >= records.len(), "{table}");
    // --wide: every column of summary.md, wider than 120.
    let wide = terminal_tables(&records, &summary, true);
    let first = wide.lines().next().unwrap();
    assert!(first.chars().count() > TERMINAL_WIDTH);
    for c in COLUMNS {
        let word = c.split(' ').next().unwrap();
        assert!(wide.contains(word), "{c}");
    }
    assert!(wide.contains("speedup over torch.compile") && wide.contains(LOSES_TO_COMPILE));
    assert!(!narrow.contains("cand GB/s") && wide.contains("cand GB/s (compulsory)"));
    let columns = |t: &str| t.lines().nth(1).unwrap().matches('┆').count() + 1;
    assert_eq!(columns(&table), NARROW_COLUMNS.len());
    assert_eq!(columns(&wide_table(&records)), COLUMNS.len());
}

/// Splits CSV text into rows of fields (RFC 4180 quoting).
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let (mut row, mut field, mut quoted) = (Vec::new(), String::new(), false);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => row.push(std::mem::take(&mut field)),
            ('\n', false) => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (c, _) => field.push(c),
        }
    }
    assert!(
        !quoted && field.is_empty() && row.is_empty(),
        "a torn last row"
    );
    rows
}

#[test]
fn report_csv_and_json_print_parseable_records() {
    let dir = std::env::temp_dir().join(format!("dlrm-report-csv-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut records = compile_set();
    records[1].message = "a \"quoted\", message".into();
    records[3].candidate = "y,comma".into();
    write_set(&dir, &records);
    let text = |format| {
        report_text(
            std::slice::from_ref(&dir),
            None,
            None,
            Basis::Compile,
            format,
        )
        .unwrap()
    };
    let csv_rows = parse_csv(&text(ReportFormat::Csv));
    assert_eq!(csv_rows[0], COLUMNS);
    assert_eq!(csv_rows.len(), 1 + records.len());
    assert!(csv_rows.iter().all(|r| r.len() == COLUMNS.len()));
    // Pooled in catalog order: embedding_bag_sum, kjt_permute, fm_interaction.
    assert_eq!(csv_rows[2][1], "g/x");
    assert_eq!(csv_rows[2][7], LOSES_TO_COMPILE);
    assert_eq!(csv_rows[2][17], "0.800");
    assert!(csv_rows.iter().any(|r| r[1] == "g/y,comma"));
    assert_eq!(
        text(ReportFormat::Csv),
        csv(&pool_runs(std::slice::from_ref(&dir), false).unwrap())
    );
    let v: serde_json::Value = serde_json::from_str(&text(ReportFormat::Json)).unwrap();
    let back: Vec<Record> = serde_json::from_value(v["records"].clone()).unwrap();
    assert_eq!(back.len(), records.len());
    assert_eq!(back[1].message, "a \"quoted\", message");
    assert_eq!(v["summary"]["headline"], "compile");
    assert_eq!(v["summary"]["compile_problems"], 2);
    assert_eq!(v["summary"]["compile"][0]["wins"], 1);
    assert_eq!(v["summary"]["compile_losses"][0]["candidate"], "x");
    assert_eq!(
        v["summary"]["compile_failures"]["kjt_permute"],
        "torch.compile failed: boom\ndetails"
    );
    assert!(v.get("projection").is_none());
    // The tables are not in either.
    for format in [ReportFormat::Csv, ReportFormat::Json] {
        assert!(!text(format).contains('│'));
    }
    assert!(text(ReportFormat::Tables).contains('│'));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn report_out_with_a_workload_puts_the_projection_in_summary_md() {
    let base = std::env::temp_dir().join(format!("dlrm-report-proj-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let (set, out) = (base.join("set"), base.join("pooled"));
    write_set(&set, &two_problems(true));
    let workload = base.join("w.toml");
    std::fs::write(
            &workload,
            "name = \"w\"\ndescription = \"d\"\nsource = \"test\"\n[fractions]\nembedding_bag_sum = 0.5\n",
        )
        .unwrap();
    let text = report_text(
        std::slice::from_ref(&set),
        Some(&workload),
        Some(&out),
        Basis::Reference,
        ReportFormat::Tables,
    )
    .unwrap();
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    let section = &md[md.find("## End-to-end projection: w").expect("the section")..];
    // Candidate x: 2.0x over eager on half the step: 1 / (0.5 + 0.5 / 2) = 1.333x.
    assert!(
        section.contains("projected step speedup 1.333x"),
        "{section}"
    );
    assert!(text.contains("projected step speedup 1.333x"), "{text}");
    std::fs::remove_dir_all(&base).ok();
}

#[test]
fn terminal_prose_is_wrapped() {
    assert_eq!(wrap("aa bb cc  dd", 5), "aa bb\ncc dd");
    assert_eq!(wrap("a verylongword b", 4), "a\nverylongword\nb");
    let records = two_problems(true);
    let t = terminal_tables(&records, &Summary::new(&records, 2, Basis::Eager), false);
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
    let terminal = terminal_tables(
        &records,
        &Summary::new(&records, 2, Basis::Reference),
        false,
    );
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
