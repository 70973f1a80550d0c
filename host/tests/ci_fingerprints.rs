//! Guards refactors that must change no behaviour: for every problem, the `ci` input sets
//! (public, secret and edge seeds as a run derives them), their oracle values and the outputs
//! of the reference plan on the CPU emulator are hashed and compared with
//! `tests/data/ci_fingerprints.txt`, recorded at commit 1314fde (before the problem kit) and
//! blessed again when every set of a run came to share the tables of its public seed.
//!
//! Problem 5's oracle gives its in-place tensors as a row update (`OracleOutput::Rows`); the
//! hash recorded is that of its dense value (the initial value with the rows updated), which is
//! the f64 table the oracle used to return, so the recorded lines still hold.
//!
//! `DLRM_BLESS=1 cargo test -p dlrm-bench --test ci_fingerprints` rewrites the file; do that
//! only for a change that is meant to alter inputs or references, and say so in its commit.
use bench_problems::check::{check_output_with, poison_pattern, CheckContext};
use bench_problems::spec::shape_of;
use bench_problems::{all_problems, InputSet, OracleOutput, Preset, Problem, Role, Sizes};
use data_gen::HostTensor;
use dlrm_bench::backend::emu::EmuBackend;
use dlrm_bench::backend::Backend;
use dlrm_bench::candidate::plan::{self, Buffers};
use dlrm_bench::candidate::reference_candidate;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::PathBuf;

const SEED: u64 = 7;
/// Outputs the reference builds with float atomics (eager's `index_add_`): their bits depend on
/// the order the emulator's threads run in. For these the recorded value is the set of elements
/// the reference changed from their initial value, and the values must pass the oracle check.
const ATOMIC_ORDER_OUTPUTS: &[(&str, &str)] = &[
    ("embedding_backward_rowwise_adagrad", "weight"),
    ("embedding_backward_rowwise_adagrad", "momentum"),
];
const SECRET_SEED: u64 = 99;

/// FNV-1a, 64 bit: a stable hash written out here so the recorded values never depend on a
/// crate's version.
#[derive(Clone, Copy)]
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    fn bytes(mut self, data: &[u8]) -> Self {
        for &b in data {
            self.0 ^= b as u64;
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
        self
    }
    fn str(self, s: &str) -> Self {
        self.bytes(s.as_bytes()).bytes(&[0])
    }
    fn u64(self, v: u64) -> Self {
        self.bytes(&v.to_le_bytes())
    }
}

/// The input sets a run with `SEED` / `SECRET_SEED` and 2 public + 1 secret sets checks.
fn planned_sets(p: &dyn Problem) -> Vec<(String, Sizes, u64)> {
    let base = p.sizes(Preset::Ci);
    let mut plan = vec![
        (
            "public-0".into(),
            base.clone(),
            data_gen::seed::derive(SEED, 0),
        ),
        (
            "public-1".into(),
            base.clone(),
            data_gen::seed::derive(SEED, 1),
        ),
        (
            "secret-0".into(),
            base,
            data_gen::seed::derive(SECRET_SEED, 0),
        ),
    ];
    for (k, sizes) in p.edge_sizes(Preset::Ci).into_iter().enumerate() {
        plan.push((
            format!("edge-{k}"),
            sizes,
            data_gen::seed::derive(SEED, 1000 + k as u64),
        ));
    }
    plan
}

fn input_hash(set: &InputSet) -> u64 {
    let mut h = Fnv::new().u64(set.seed);
    for (k, v) in &set.sizes {
        h = h.str(k).u64(*v as u64);
    }
    for (k, v) in &set.scalars {
        h = h.str(k).u64(v.to_bits());
    }
    for (name, t) in &set.tensors.tensors {
        h = h.str(name).str(t.dtype.name());
        for &d in &t.shape {
            h = h.u64(d as u64);
        }
        h = h.bytes(&t.bytes);
    }
    h.0
}

fn oracle_hash(o: &OracleOutput) -> u64 {
    match o {
        OracleOutput::Float(v) => v
            .iter()
            .fold(Fnv::new().str("f"), |h, x| h.u64(x.to_bits())),
        OracleOutput::Int(v) => v.iter().fold(Fnv::new().str("i"), |h, x| h.u64(*x as u64)),
        OracleOutput::Rows(_) => unreachable!("densified by the caller"),
    }
    .0
}

/// Runs the reference plan once on `set` (outputs poisoned, in-out tensors at their initial
/// value, scratch filled with 0xA5) and returns each output's bytes by name.
fn reference_outputs(p: &dyn Problem, set: &InputSet) -> BTreeMap<String, Vec<u8>> {
    let mut be = EmuBackend::new();
    let cand = reference_candidate(p);
    let mut bufs = Buffers::new();
    for spec in p.tensors() {
        let numel: usize = shape_of(&spec, &set.sizes).unwrap().iter().product();
        let buf = be.alloc(numel * spec.dtype.size_bytes()).unwrap();
        match spec.role {
            Role::Input | Role::InOut => be
                .upload(&buf, &set.tensors.get(spec.name).unwrap().bytes)
                .unwrap(),
            Role::Output => be.fill(&buf, &poison_pattern(spec.dtype)).unwrap(),
        }
        bufs.insert(spec.name.to_string(), buf);
    }
    for s in &cand.scratch {
        let bytes = s.bytes.eval(&set.sizes).unwrap() as usize;
        let buf = be.alloc(bytes).unwrap();
        be.fill(&buf, &[0xA5]).unwrap();
        bufs.insert(s.name.clone(), buf);
    }
    let module = be.load_module(&cand.source).unwrap();
    let launches = plan::bind(&cand, &set.sizes, &set.scalars, &bufs, &mut be, module).unwrap();
    plan::run(&mut be, module, &launches).unwrap();
    be.synchronize().unwrap();
    p.tensors()
        .iter()
        .filter(|t| t.role != Role::Input)
        .map(|t| (t.name.to_string(), be.download(&bufs[t.name]).unwrap()))
        .collect()
}

/// One line per (problem, set, item): `problem set kind name hash`.
fn fingerprints(p: &dyn Problem) -> String {
    let mut out = String::new();
    for (label, sizes, seed) in planned_sets(p) {
        // Every set shares the tables of the run's public seed (`evaluate::table_seed`).
        let seeds = bench_problems::Seeds {
            set: seed,
            table: data_gen::seed::derive_str(SEED, "tables"),
        };
        let set = p.generate(Preset::Ci, &sizes, seeds).unwrap();
        let pn = p.name();
        writeln!(out, "{pn} {label} input - {:016x}", input_hash(&set)).unwrap();
        for (name, o) in p.oracle(&set).unwrap() {
            let o = o.densified(set.tensors.get(&name).ok()).unwrap();
            writeln!(out, "{pn} {label} oracle {name} {:016x}", oracle_hash(&o)).unwrap();
        }
        let oracle = p.oracle(&set).unwrap();
        for (name, bytes) in reference_outputs(p, &set) {
            if !ATOMIC_ORDER_OUTPUTS.contains(&(pn, name.as_str())) {
                let h = Fnv::new().bytes(&bytes).0;
                writeln!(out, "{pn} {label} reference {name} {h:016x}").unwrap();
                continue;
            }
            let spec = p.tensors().into_iter().find(|t| t.name == name).unwrap();
            let got =
                HostTensor::new(spec.dtype, shape_of(&spec, &set.sizes).unwrap(), bytes).unwrap();
            let ctx = CheckContext {
                encoded: None,
                initial: set.tensors.get(&name).ok(),
            };
            let report = check_output_with(&got, &oracle[&name], &p.tolerance(&spec), ctx);
            assert!(report.passed, "{pn} {label} {name}: {}", report.reason);
            let initial = &set.tensors.get(&name).unwrap().bytes;
            let width = spec.dtype.size_bytes();
            let changed = got
                .bytes
                .chunks(width)
                .zip(initial.chunks(width))
                .fold(Fnv::new(), |h, (a, b)| h.bytes(&[(a != b) as u8]));
            writeln!(
                out,
                "{pn} {label} reference-changed {name} {:016x}",
                changed.0
            )
            .unwrap();
        }
    }
    out
}

#[test]
fn inputs_oracles_and_reference_outputs_are_unchanged() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/ci_fingerprints.txt");
    let problems = all_problems();
    let got: String = std::thread::scope(|s| {
        let handles: Vec<_> = problems
            .iter()
            .map(|&p| s.spawn(move || fingerprints(p)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    if std::env::var_os("DLRM_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).expect("recorded fingerprints");
    let differ: Vec<String> = want
        .lines()
        .zip(got.lines())
        .filter(|(w, g)| w != g)
        .map(|(w, g)| format!("  recorded {w}\n  now      {g}"))
        .collect();
    assert!(
        differ.is_empty() && want.lines().count() == got.lines().count(),
        "{} of {} fingerprints changed ({} lines recorded, {} now):\n{}\n\nA new problem, or a \
         change of inputs or oracle meant to change them: record them again with `DLRM_BLESS=1 \
         cargo test -p dlrm-bench --test ci_fingerprints` and commit the file. Otherwise the \
         change altered what every run draws.",
        differ.len(),
        want.lines().count(),
        want.lines().count(),
        got.lines().count(),
        differ.join("\n")
    );
}
