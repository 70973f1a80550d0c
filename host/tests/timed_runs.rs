//! What timed runs guarantee, on the emulator: every timed run of a candidate starts with a
//! canary in its outputs and is checked against the reference's outputs on the same inputs; the
//! timing runs on the secret sets, which no check showed the candidate; state a kernel leaves in
//! its module's globals makes it `incorrect` at the execution that left it. (The CUDA side of
//! the globals — finding them in PTX and cubins, putting them back — needs a GPU: the corpus's
//! `timed_skip*` and `content_memo_static` exploits are its test there.)
mod common;

use bench_problems::Dim;
use common::{problem, rust_candidate};
use data_gen::DType;
use dlrm_bench::backend::emu::EmuBackend;
use dlrm_bench::backend::{
    Backend, BackendResult, Buffer, DeviceInfo, Launch, ModuleId, ModuleSource,
};
use dlrm_bench::candidate::Candidate;
use dlrm_bench::evaluate::{EvalConfig, ProblemRun};
use dlrm_bench::results::record::{Record, Status};

fn evaluate_on(backend: &mut dyn Backend, cand: &Candidate) -> (Record, Record) {
    let mut run =
        ProblemRun::prepare(backend, problem(), EvalConfig::quick_ci(3, 4), None, None).unwrap();
    let reference = run.reference_record();
    assert_eq!(reference.status, Status::Correct, "{}", reference.message);
    let rec = run.evaluate(cand);
    run.release();
    (reference, rec)
}

#[test]
fn a_kernel_that_keeps_what_its_outputs_hold_is_incorrect_at_its_first_timed_run() {
    // Right in every check (its outputs start as the NaN poison there); in the first timed run
    // they hold the canary, which it keeps.
    let cand = rust_candidate("keep_finite", "exploit_keep_finite_output");
    let (_, rec) = evaluate_on(&mut EmuBackend::new(), &cand);
    assert_eq!(rec.status, Status::Incorrect, "{}", rec.message);
    assert!(
        rec.checks.iter().all(|c| c.report.passed),
        "every check before the timing passed"
    );
    assert!(
        rec.message
            .starts_with("timed run 1 on secret-0: output `out`"),
        "{}",
        rec.message
    );
    assert!(rec.timing.is_none() && rec.speedup.is_none() && !rec.win);
}

#[test]
fn the_timing_runs_on_secret_sets_the_checks_never_showed_the_candidate() {
    let cand = rust_candidate("tuned", "embedding_bag_sum_warp_per_bag");
    let (reference, rec) = evaluate_on(&mut EmuBackend::new(), &cand);
    assert_eq!(rec.status, Status::Correct, "{}", rec.message);
    let sets = |r: &Record| -> Vec<String> { r.checks.iter().map(|c| c.set.clone()).collect() };
    assert!(sets(&reference).contains(&"secret-0".to_string()));
    let cand_sets = sets(&rec);
    assert!(
        !cand_sets.contains(&"secret-0".to_string()),
        "{cand_sets:?}"
    );
    assert!(cand_sets.contains(&"public-0".to_string()));
    // The recheck after the timing looks at the timed set, against the oracle and the reference.
    assert!(
        cand_sets.contains(&"recheck-secret-0".to_string()),
        "{cand_sets:?}"
    );
    // Every timed run was checked: one warm-up and the pairs.
    let pairs = rec.speedup.as_ref().unwrap().pairs;
    assert_eq!(rec.timed_runs_checked, Some(1 + pairs));
    let phases = rec.phases.as_ref().unwrap();
    assert!(
        phases
            .0
            .contains_key(&dlrm_bench::runner::activity::Phase::TimedCheck),
        "{phases:?}"
    );
}

/// The emulator, reporting the module global `g_launches` changed after every execution of
/// kernel `stateful` (what the CUDA backend reports of a kernel that counts its launches).
struct StatefulGlobals {
    inner: EmuBackend,
    launched_stateful: bool,
    stateful: &'static str,
}

impl Backend for StatefulGlobals {
    fn info(&self) -> &DeviceInfo {
        self.inner.info()
    }
    fn alloc(&mut self, bytes: usize) -> BackendResult<Buffer> {
        self.inner.alloc(bytes)
    }
    fn free_memory(&self) -> usize {
        self.inner.free_memory()
    }
    fn free(&mut self, buffer: Buffer) {
        self.inner.free(buffer)
    }
    fn upload(&mut self, buffer: &Buffer, data: &[u8]) -> BackendResult<()> {
        self.inner.upload(buffer, data)
    }
    fn download(&mut self, buffer: &Buffer) -> BackendResult<Vec<u8>> {
        self.inner.download(buffer)
    }
    fn download_range(&mut self, b: &Buffer, offset: usize, len: usize) -> BackendResult<Vec<u8>> {
        self.inner.download_range(b, offset, len)
    }
    fn fill(&mut self, buffer: &Buffer, pattern: &[u8]) -> BackendResult<()> {
        self.inner.fill(buffer, pattern)
    }
    fn fingerprint_words(&mut self, buffer: &Buffer, words: usize) -> BackendResult<u64> {
        self.inner.fingerprint_words(buffer, words)
    }
    fn copy(&mut self, dst: &Buffer, src: &Buffer) -> BackendResult<()> {
        self.inner.copy(dst, src)
    }
    fn address(&self, buffer: &Buffer) -> u64 {
        self.inner.address(buffer)
    }
    fn load_module(&mut self, source: &ModuleSource) -> BackendResult<ModuleId> {
        self.inner.load_module(source)
    }
    fn kernel_params(&mut self, module: ModuleId, kernel: &str) -> BackendResult<Vec<usize>> {
        self.inner.kernel_params(module, kernel)
    }
    fn launch(&mut self, module: ModuleId, launch: &Launch) -> BackendResult<()> {
        self.launched_stateful |= launch.kernel == self.stateful;
        self.inner.launch(module, launch)
    }
    fn restore_module_globals(&mut self, _module: ModuleId) -> BackendResult<Vec<String>> {
        let changed = std::mem::take(&mut self.launched_stateful);
        Ok(if changed {
            vec!["g_launches".into()]
        } else {
            Vec::new()
        })
    }
    fn synchronize(&mut self) -> BackendResult<()> {
        self.inner.synchronize()
    }
    fn flush_l2(&mut self) -> BackendResult<()> {
        self.inner.flush_l2()
    }
    fn timer_start(&mut self) -> BackendResult<()> {
        self.inner.timer_start()
    }
    fn timer_stop(&mut self) -> BackendResult<f64> {
        self.inner.timer_stop()
    }
    fn copy_bandwidth(&mut self, bytes: usize) -> BackendResult<f64> {
        self.inner.copy_bandwidth(bytes)
    }
    fn is_gpu(&self) -> bool {
        self.inner.is_gpu()
    }
}

#[test]
fn state_left_in_a_module_global_is_incorrect_at_the_execution_that_left_it() {
    let mut backend = StatefulGlobals {
        inner: EmuBackend::new(),
        launched_stateful: false,
        stateful: "embedding_bag_sum_warp_per_bag",
    };
    // Its outputs are right: only the state it leaves makes it incorrect, at the first check.
    let cand = rust_candidate("counts_launches", "embedding_bag_sum_warp_per_bag");
    let (_, rec) = evaluate_on(&mut backend, &cand);
    assert_eq!(rec.status, Status::Incorrect, "{}", rec.message);
    assert!(
        rec.message
            .starts_with("public-0: state survived an execution")
            && rec.message.contains("`g_launches`")
            && rec.message.contains("[[scratch]]"),
        "{}",
        rec.message
    );
    // A kernel that leaves its globals as loaded is unaffected.
    backend.stateful = "none";
    let (_, rec) = evaluate_on(&mut backend, &cand);
    assert_eq!(rec.status, Status::Correct, "{}", rec.message);
}

#[test]
fn a_canary_is_finite_far_from_any_output_and_drawn_anew_for_every_run() {
    use dlrm_bench::evaluate::canary_pattern;
    for dtype in [DType::F32, DType::BF16, DType::F16, DType::F64] {
        let a = canary_pattern(dtype, 1);
        let b = canary_pattern(dtype, 2);
        assert_eq!(a.len(), dtype.size_bytes(), "{dtype:?}");
        assert_ne!(a, b, "{dtype:?}: drawn from the salt");
        for p in [&a, &b] {
            let v = match dtype {
                DType::F32 => f32::from_le_bytes(p[..4].try_into().unwrap()) as f64,
                DType::BF16 => half::bf16::from_le_bytes([p[0], p[1]]).to_f64(),
                DType::F16 => half::f16::from_le_bytes([p[0], p[1]]).to_f64(),
                _ => f64::from_le_bytes(p[..8].try_into().unwrap()),
            };
            let floor = if dtype == DType::F16 { 16384.0 } else { 1e36 };
            assert!(v.is_finite() && v.abs() >= floor, "{dtype:?}: {v}");
            assert_ne!(*p, bench_problems::check::poison_pattern(dtype));
            let period = dlrm_bench::backend::shortest_period(p).len();
            assert!(period <= 4, "{dtype:?}: a 32-bit memset fills it");
        }
    }
    assert_eq!(canary_pattern(DType::I64, 3).len(), 8);
    assert_eq!(
        dlrm_bench::backend::shortest_period(&canary_pattern(DType::I64, 3)).len(),
        4
    );
    assert_eq!(canary_pattern(DType::U8, 3).len(), 1);
}

#[test]
fn an_input_a_candidate_wrote_is_put_back_before_the_next_candidate() {
    // The first candidate zeroes indices[0] after a correct pooling (on every set it runs on);
    // the next one, honest, must find the inputs as uploaded.
    let mut mutate = rust_candidate("mutate_input", "embedding_bag_sum_warp_per_bag");
    let mut second = mutate.launches[0].clone();
    second.kernel = "exploit_zero_first_index".into();
    second.grid = [Dim::Number(1), Dim::Number(1), Dim::Number(1)];
    second.block = [Dim::Number(32), Dim::Number(1), Dim::Number(1)];
    second.args = vec!["indices".into()];
    mutate.launches.push(second);
    let mut backend = EmuBackend::new();
    let mut run = ProblemRun::prepare(
        &mut backend,
        problem(),
        EvalConfig::quick_ci(3, 4),
        None,
        None,
    )
    .unwrap();
    assert_eq!(run.reference_record().status, Status::Correct);
    let rec = run.evaluate(&mutate);
    assert_eq!(rec.status, Status::Incorrect, "{}", rec.message);
    assert!(
        rec.message.contains("input `indices` was modified"),
        "{}",
        rec.message
    );
    let honest = rust_candidate("tuned", "embedding_bag_sum_warp_per_bag");
    let rec = run.evaluate(&honest);
    assert_eq!(rec.status, Status::Correct, "{}", rec.message);
    run.release();
}

#[test]
fn no_timed_run_meets_inputs_an_earlier_run_saw_so_a_memo_never_replays() {
    use gpu_kernels::kernels::faults::memo_hits;
    // The memo is kept where the emulator cannot reset it (a Rust static), as a GPU kernel might
    // keep one in memory no check looks at: only fresh inputs for every timed run defeat it.
    let cand = rust_candidate("memo_by_content", "exploit_memo_by_content");
    let before = memo_hits();
    let (_, rec) = evaluate_on(&mut EmuBackend::new(), &cand);
    assert_eq!(rec.status, Status::Correct, "{}", rec.message);
    assert!(rec.timed_runs_checked.unwrap() >= 3);
    assert_eq!(
        memo_hits(),
        before,
        "a timed run met inputs an earlier run saw"
    );

    // The control: the same inputs twice, and the memo replays.
    let mut backend = EmuBackend::new();
    let mut run = ProblemRun::prepare(
        &mut backend,
        problem(),
        EvalConfig::quick_ci(3, 4),
        None,
        None,
    )
    .unwrap();
    assert_eq!(run.reference_record().status, Status::Correct);
    let mut twice = cand.clone();
    twice.launches.push(twice.launches[0].clone());
    let rec = run.evaluate(&twice);
    run.release();
    assert_eq!(rec.status, Status::Correct, "{}", rec.message);
    assert!(memo_hits() > before, "the memo replays inputs it saw");
}

#[test]
fn a_candidate_that_rewrites_its_relabelled_ids_in_a_timed_run_is_incorrect() {
    use gpu_kernels::kernels::faults::rewrite_ids_from;
    let mut cand = rust_candidate("rewrite_ids", "exploit_rewrite_ids");
    cand.launches[0].grid = [Dim::Number(1), Dim::Number(1), Dim::Number(1)];
    cand.launches[0].block = [Dim::Number(32), Dim::Number(1), Dim::Number(1)];
    // Honest through its checks (one launch each), then it rewrites its ids in every run.
    rewrite_ids_from(u32::MAX);
    let (_, honest) = evaluate_on(&mut EmuBackend::new(), &cand);
    assert_eq!(honest.status, Status::Correct, "{}", honest.message);
    let checks = honest
        .checks
        .iter()
        .filter(|c| !c.set.starts_with("recheck"))
        .count();
    rewrite_ids_from(checks as u32);
    let (_, rec) = evaluate_on(&mut EmuBackend::new(), &cand);
    assert_eq!(rec.status, Status::Incorrect, "{}", rec.message);
    assert!(
        rec.message
            .starts_with("timed run 1 on secret-0: input `indices` was modified"),
        "{}",
        rec.message
    );
}

/// A budget shorter than the reference's warm-up still leaves timed runs (a warm-up past the
/// budget once left none: a NaN median the runner could not read, and the record was lost).
#[test]
fn the_reference_is_timed_at_least_min_pairs_times_whatever_the_budget() {
    let mut cfg = EvalConfig::quick_ci(3, 4);
    cfg.budget_s = 1e-9;
    let mut backend = EmuBackend::new();
    let mut run = ProblemRun::prepare(&mut backend, problem(), cfg.clone(), None, None).unwrap();
    let reference = run.reference_record();
    run.release();
    assert_eq!(reference.status, Status::Correct, "{}", reference.message);
    let t = reference.timing.clone().expect("the reference is timed");
    assert!(t.samples >= cfg.min_pairs.max(1), "{} samples", t.samples);
    assert!(
        t.median_ms.is_finite() && t.median_ms > 0.0,
        "{}",
        t.median_ms
    );
    serde_json::to_string(&reference).unwrap();
}
