//! Property tests of manifest loading and launch-plan evaluation (issue 13): the committed
//! `candidates/*/*/candidate.toml` files with bytes, fields and values mutated, and random
//! launch expressions (deep nesting, huge numbers, unknown functions, division by zero), are
//! loaded and resolved without a panic, and every rejection names the file and, when the file
//! is valid TOML, the field.
use crate::candidate::launch_limits::LaunchLimits;
use crate::candidate::plan;
use crate::candidate::{discover, load_candidate, CandidateError};
use bench_problems::Dim;
use proptest::prelude::*;
use proptest::test_runner::Config;
use std::path::{Path, PathBuf};

/// `cases` cases (or `PROPTEST_CASES`, for a longer search by hand), no regression files.
fn config(cases: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    Config {
        failure_persistence: None,
        ..Config::with_cases(cases)
    }
}

/// The committed manifests, with their directories (for their source files).
fn seeds() -> Vec<(PathBuf, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../candidates");
    discover(&root)
        .into_iter()
        .map(|d| {
            let text = std::fs::read_to_string(d.join("candidate.toml")).unwrap();
            (d, text)
        })
        .collect()
}

/// Writes `text` as the manifest of a scratch candidate directory beside a copy of `seed`'s
/// source file, and loads it.
fn load(
    tag: &str,
    seed: &Path,
    text: &[u8],
) -> (PathBuf, Result<crate::candidate::Candidate, CandidateError>) {
    let dir = std::env::temp_dir().join(format!("dlrm-bench-prop-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["kernel.cu", "kernel.ptx"] {
        if let Ok(body) = std::fs::read(seed.join(name)) {
            std::fs::write(dir.join(name), body).unwrap();
        }
    }
    std::fs::write(dir.join("candidate.toml"), text).unwrap();
    let loaded = load_candidate(&dir);
    (dir, loaded)
}

/// Every rejection names the file; one of a file that is valid TOML (and UTF-8) names a field.
fn check_rejection(e: &CandidateError, dir: &Path, text: &[u8]) -> Result<(), TestCaseError> {
    let file = dir.join("candidate.toml");
    let msg = e.to_string();
    prop_assert_eq!(&e.file, &file);
    prop_assert!(
        msg.contains(&file.display().to_string()),
        "no file in: {}",
        msg
    );
    let is_toml = std::str::from_utf8(text)
        .ok()
        .is_some_and(|t| t.parse::<toml::Table>().is_ok());
    if is_toml {
        let field = e.field.as_deref().unwrap_or("");
        prop_assert!(!field.is_empty(), "no field in: {}", msg);
        prop_assert!(msg.contains(&format!("field `{field}`")), "{}", msg);
    }
    Ok(())
}

/// A TOML value of any kind, odd ones favoured: huge and negative integers, floats, names that
/// break paths, expressions, arrays of the wrong length, tables.
fn value() -> impl Strategy<Value = toml::Value> {
    let leaf = prop_oneof![
        any::<i64>().prop_map(toml::Value::Integer),
        (-3i64..3000).prop_map(toml::Value::Integer),
        any::<f64>().prop_map(toml::Value::Float),
        any::<bool>().prop_map(toml::Value::Boolean),
        "[a-z_|/\\\\\n\t ]{0,6}".prop_map(toml::Value::String),
        prop::sample::select(vec![
            "out",
            "weight",
            "B",
            "N",
            "banana",
            "correct",
            "timeout",
            "gpu-kernels",
            "kernel.cu",
            "ceil_div(B, 0)",
            "B / 0",
            "B % 0",
            "nope(B)",
            "9223372036854775807 * 2",
            "ceil_div(N * D, 256)",
            "",
        ])
        .prop_map(|s| toml::Value::String(s.into())),
    ];
    leaf.prop_recursive(2, 12, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(toml::Value::Array),
            prop::collection::btree_map("[a-z_]{1,6}", inner, 0..3)
                .prop_map(|m| toml::Value::Table(m.into_iter().collect())),
        ]
    })
}

/// One change to a manifest's fields: set, remove or add a key at the top, in a scratch
/// table or in a launch table.
#[derive(Clone, Debug)]
enum Edit {
    Set(usize, usize, toml::Value),
    Remove(usize, usize),
    Add(usize, String, toml::Value),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        4 => (any::<usize>(), any::<usize>(), value()).prop_map(|(t, k, v)| Edit::Set(t, k, v)),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(t, k)| Edit::Remove(t, k)),
        1 => (any::<usize>(), "[a-z_]{1,8}", value()).prop_map(|(t, k, v)| Edit::Add(t, k, v)),
    ]
}

/// Table `t` (modulo their count) of a manifest: the top level, then each `[[scratch]]` and
/// `[[launch]]` entry.
fn table(doc: &mut toml::Table, t: usize) -> &mut toml::Table {
    let mut places = Vec::new();
    for key in ["scratch", "launch"] {
        if let Some(toml::Value::Array(a)) = doc.get(key) {
            places.extend((0..a.len()).filter(|&i| a[i].is_table()).map(|i| (key, i)));
        }
    }
    match t % (places.len() + 1) {
        0 => doc,
        i => {
            let (key, j) = places[i - 1];
            match &mut doc[key][j] {
                toml::Value::Table(t) => t,
                _ => unreachable!("only tables are listed"),
            }
        }
    }
}

fn apply(doc: &mut toml::Table, e: &Edit) {
    let nth = |tab: &toml::Table, k: usize| tab.keys().nth(k % tab.len().max(1)).cloned();
    match e {
        Edit::Set(t, k, v) => {
            let tab = table(doc, *t);
            if let Some(key) = nth(tab, *k) {
                tab.insert(key, v.clone());
            }
        }
        Edit::Remove(t, k) => {
            let tab = table(doc, *t);
            if let Some(key) = nth(tab, *k) {
                tab.remove(&key);
            }
        }
        Edit::Add(t, key, v) => {
            table(doc, *t).insert(key.clone(), v.clone());
        }
    }
}

/// Random launch expressions: numbers (huge ones too), size symbols and unknown names, the
/// operators, `ceil_div`/`min`/`max` and unknown functions with any number of arguments,
/// nested up to ~40 deep.
fn expression() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        any::<i64>().prop_map(|v| v.to_string()),
        (0i64..5).prop_map(|v| v.to_string()),
        Just("9223372036854775807".to_string()),
        Just("99999999999999999999".to_string()),
        Just("1.5".to_string()),
        prop::sample::select(vec!["B", "D", "N", "T", "X", "lr", "true", "\"s\""])
            .prop_map(String::from),
    ];
    leaf.prop_recursive(40, 200, 3, |inner| {
        let op = prop::sample::select(vec!["+", "-", "*", "/", "%", "^", "==", "&&", ","]);
        let func = prop::sample::select(vec!["ceil_div", "min", "max", "nope", "floor", ""]);
        prop_oneof![
            (inner.clone(), op, inner.clone()).prop_map(|(a, o, b)| format!("{a} {o} {b}")),
            (func, prop::collection::vec(inner.clone(), 0..4))
                .prop_map(|(f, args)| format!("{f}({})", args.join(", "))),
            inner.clone().prop_map(|a| format!("-({a})")),
            (inner, 0usize..80).prop_map(|(a, n)| format!("{}{a}{}", "(".repeat(n), ")".repeat(n))),
        ]
    })
}

proptest! {
    #![proptest_config(config(96))]

    #[test]
    fn mutated_bytes_never_panic_and_name_the_file(
        seed in any::<prop::sample::Index>(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..6),
    ) {
        let seeds = seeds();
        let (dir, text) = seed.get(&seeds);
        let mut bytes = text.clone().into_bytes();
        for (at, b, kind) in &edits {
            let i = at.index(bytes.len() + 1);
            match kind {
                0 if i < bytes.len() => bytes[i] = *b,
                1 => bytes.insert(i, *b),
                _ if i < bytes.len() => { bytes.remove(i); }
                _ => {}
            }
        }
        let (scratch, loaded) = load("bytes", dir, &bytes);
        if let Err(e) = loaded {
            check_rejection(&e, &scratch, &bytes)?;
        }
        let _ = std::fs::remove_dir_all(&scratch);
    }

    #[test]
    fn mutated_fields_never_panic_and_name_the_field(
        seed in any::<prop::sample::Index>(),
        edits in prop::collection::vec(edit(), 1..4),
    ) {
        let seeds = seeds();
        let (dir, text) = seed.get(&seeds);
        let mut doc: toml::Table = text.parse().unwrap();
        for e in &edits {
            apply(&mut doc, e);
        }
        let Ok(text) = toml::to_string(&doc) else { return Ok(()) };
        let (scratch, loaded) = load("fields", dir, text.as_bytes());
        match loaded {
            Err(e) => check_rejection(&e, &scratch, text.as_bytes())?,
            Ok(cand) => {
                // A manifest that loads is checked as `check` does (geometry at every size):
                // an error or a plan, never a panic.
                let problem = bench_problems::find_problem(&cand.problem).unwrap();
                let (_, sizes, scalars) = &crate::cmd::check::check_sizes(problem)[0];
                let mut params = |_: &str| Ok(vec![8; 64]);
                let _ = plan::resolve(&cand, sizes, scalars, &LaunchLimits::H100_CLASS, &mut params, &|_| None);
            }
        }
        let _ = std::fs::remove_dir_all(&scratch);
    }

    #[test]
    fn random_launch_expressions_are_values_or_named_errors(
        exprs in prop::collection::vec(expression(), 5),
    ) {
        let problem = bench_problems::find_problem("embedding_bag_sum").unwrap();
        let mut cand = crate::candidate::reference_candidate(problem);
        cand.origin = "cands/x".into();
        let l = &mut cand.launches[0];
        l.grid[0] = Dim::Expr(exprs[0].clone());
        l.block[1] = Dim::Expr(exprs[1].clone());
        l.shared_bytes = Dim::Expr(exprs[2].clone());
        l.args[6] = exprs[3].clone();
        cand.scratch.push(bench_problems::ScratchSpec::new("s", exprs[4].as_str()));
        for (label, sizes, scalars) in crate::cmd::check::check_sizes(problem) {
            let n = cand.launches[0].args.len();
            let mut params = |_: &str| Ok(vec![8; n]);
            let address = |a: &str| (a == "weight").then_some(0);
            if let Err(e) = plan::resolve(&cand, &sizes, &scalars, &LaunchLimits::H100_CLASS, &mut params, &address) {
                prop_assert!(e.starts_with("cands/x/candidate.toml: launch[0]."), "{} at {}", e, label);
            }
            if let Err(e) = plan::scratch_bytes(&cand, cand.scratch.len() - 1, &sizes, 1 << 40) {
                prop_assert!(e.starts_with("cands/x/candidate.toml: scratch["), "{}", e);
            }
        }
    }
}
