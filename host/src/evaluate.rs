//! Evaluates candidates of one problem (DESIGN §6–7): generates the input sets (public seeds,
//! secret seeds, edge cases), computes the oracle, checks the reference and each candidate on
//! every set with poisoned outputs and input fingerprints, then times candidate and reference
//! interleaved on rotating input sets with the L2 flushed, rechecks the timed outputs, and flags
//! times below the physical floor as `suspect`.
use crate::backend::{Backend, BackendError, Buffer, Launch, ModuleId};
use crate::candidate::{reference_candidate, Candidate};
use crate::plan::{self, Buffers};
use crate::record::{Ceilings, Record, SetCheck, Speedup, Status, Timing};
use crate::stats;
use bench_problems::check::{check_output, poison_pattern};
use bench_problems::spec::shape_of;
use bench_problems::{InputSet, OracleOutput, Preset, Problem, Role, TensorSpec, Work};
use data_gen::HostTensor;
use std::collections::BTreeMap;
use std::time::Instant;

/// Scratch buffers are filled with this byte before every checked run.
const SCRATCH_POISON: u8 = 0xA5;

/// How a problem is evaluated.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct EvalConfig {
    pub preset: Preset,
    /// The public seed; public input set k uses [`public_seed`]`(seed, k)`.
    pub seed: u64,
    /// Drawn at run start, written to `run.json` only when the run ends.
    #[serde(skip)]
    pub secret_seed: u64,
    pub public_sets: usize,
    pub secret_sets: usize,
    /// Input sets the timing rotates among (taken from the public ones).
    pub rotation: usize,
    pub warm_l2: bool,
    pub min_pairs: usize,
    pub max_pairs: usize,
    /// Stop timing once the 95% interval's half-width is below this fraction of the median.
    pub target_half_width: f64,
    /// Seconds of timing per candidate at most.
    pub budget_s: f64,
    /// A win needs the speedup's lower 95% bound above this.
    pub win_threshold: f64,
}

/// A loaded plan: its module, the launches bound for every input set, and its scratch.
type Loaded = (ModuleId, Vec<Vec<Launch>>, Vec<Buffer>);

/// Times of interleaved pairs: reference ms, candidate ms, and reference / candidate.
struct PairTimes {
    reference: Vec<f64>,
    candidate: Vec<f64>,
    ratios: Vec<f64>,
}

/// Where a candidate's plan comes from, for messages.
fn manifest_path(cand: &Candidate) -> String {
    if cand.origin == "reference" {
        "the reference plan".into()
    } else {
        format!("{}/candidate.toml", cand.origin)
    }
}

/// Seed of public input set `k` of a run with public seed `seed` (also what `gen` writes).
pub fn public_seed(seed: u64, k: usize) -> u64 {
    data_gen::seed::derive(seed, k as u64)
}

struct SetData {
    label: String,
    input: InputSet,
    oracle: BTreeMap<String, OracleOutput>,
    work: Work,
    inputs: Buffers,
    ref_outputs: Buffers,
    cand_outputs: Buffers,
    /// Initial values of in-out tensors, copied into the outputs before every run.
    pristine: Buffers,
    /// Fingerprints of the inputs as uploaded.
    fingerprints: BTreeMap<String, u64>,
}

/// One problem's input sets on the device, with the reference loaded.
pub struct ProblemRun<'a> {
    backend: &'a mut dyn Backend,
    problem: &'static dyn Problem,
    cfg: EvalConfig,
    ceilings: Option<Ceilings>,
    sets: Vec<SetData>,
    reference: Candidate,
    ref_module: Option<ModuleId>,
    ref_plans: Vec<Vec<Launch>>,
}

fn input_specs(p: &dyn Problem) -> Vec<TensorSpec> {
    p.tensors()
        .into_iter()
        .filter(|t| t.role == Role::Input)
        .collect()
}

fn output_specs(p: &dyn Problem) -> Vec<TensorSpec> {
    p.tensors()
        .into_iter()
        .filter(|t| t.role != Role::Input)
        .collect()
}

impl<'a> ProblemRun<'a> {
    /// Generates, uploads and computes the oracle of every input set.
    pub fn prepare(
        backend: &'a mut dyn Backend,
        problem: &'static dyn Problem,
        cfg: EvalConfig,
        ceilings: Option<Ceilings>,
    ) -> anyhow::Result<Self> {
        let base = problem.sizes(cfg.preset);
        let mut plan: Vec<(String, bench_problems::Sizes, u64)> = Vec::new();
        for k in 0..cfg.public_sets {
            plan.push((
                format!("public-{k}"),
                base.clone(),
                public_seed(cfg.seed, k),
            ));
        }
        for k in 0..cfg.secret_sets {
            plan.push((
                format!("secret-{k}"),
                base.clone(),
                data_gen::seed::derive(cfg.secret_seed, k as u64),
            ));
        }
        for (k, sizes) in problem.edge_sizes(cfg.preset).into_iter().enumerate() {
            plan.push((
                format!("edge-{k}"),
                sizes,
                data_gen::seed::derive(cfg.seed, 1000 + k as u64),
            ));
        }
        let mut sets = Vec::new();
        for (label, sizes, seed) in plan {
            let input = problem.generate(cfg.preset, &sizes, seed)?;
            let oracle = problem.oracle(&input)?;
            let work = problem.work(&input);
            let mut inputs = Buffers::new();
            let mut fingerprints = BTreeMap::new();
            for spec in input_specs(problem) {
                let t = input.tensors.get(spec.name)?;
                let buf = backend.alloc(t.bytes.len())?;
                backend.upload(&buf, &t.bytes)?;
                fingerprints.insert(spec.name.to_string(), backend.fingerprint(&buf)?);
                inputs.insert(spec.name.to_string(), buf);
            }
            let mut ref_outputs = Buffers::new();
            let mut cand_outputs = Buffers::new();
            let mut pristine = Buffers::new();
            for spec in output_specs(problem) {
                let numel: usize = shape_of(&spec, &input.sizes)?.iter().product();
                let bytes = numel * spec.dtype.size_bytes();
                ref_outputs.insert(spec.name.to_string(), backend.alloc(bytes)?);
                cand_outputs.insert(spec.name.to_string(), backend.alloc(bytes)?);
                if spec.role == Role::InOut {
                    let initial = input.tensors.get(spec.name)?;
                    anyhow::ensure!(
                        initial.bytes.len() == bytes,
                        "in-out tensor `{}`: initial value has the wrong size",
                        spec.name
                    );
                    let buf = backend.alloc(bytes)?;
                    backend.upload(&buf, &initial.bytes)?;
                    pristine.insert(spec.name.to_string(), buf);
                }
            }
            sets.push(SetData {
                label,
                input,
                oracle,
                work,
                inputs,
                ref_outputs,
                cand_outputs,
                pristine,
                fingerprints,
            });
        }
        anyhow::ensure!(
            cfg.public_sets >= 1,
            "at least one public input set is needed"
        );
        let reference = reference_candidate(problem);
        Ok(ProblemRun {
            backend,
            problem,
            cfg,
            ceilings,
            sets,
            reference,
            ref_module: None,
            ref_plans: Vec::new(),
        })
    }

    fn rotation(&self) -> usize {
        self.cfg.rotation.clamp(1, self.cfg.public_sets)
    }

    fn work(&self) -> Work {
        let r = self.rotation();
        let mut w = Work::default();
        for s in &self.sets[..r] {
            w.compulsory_bytes += s.work.compulsory_bytes / r as f64;
            w.logical_bytes += s.work.logical_bytes / r as f64;
            w.flops += s.work.flops / r as f64;
        }
        w
    }

    /// Loads `cand`'s module and binds its plan on every set (scratch allocated per set).
    fn load(
        &mut self,
        cand: &Candidate,
        use_ref_outputs: bool,
    ) -> Result<Loaded, (Status, String)> {
        let module = self
            .backend
            .load_module(&cand.source)
            .map_err(|e| match e {
                BackendError::Unsupported(m) => (Status::Skipped, m),
                BackendError::Compile(m) => (Status::CompileError, m),
                other => (Status::RuntimeError, other.to_string()),
            })?;
        let mut plans = Vec::new();
        let mut scratch_all = Vec::new();
        for i in 0..self.sets.len() {
            let set = &self.sets[i];
            let mut buffers = set.inputs.clone();
            buffers.extend(if use_ref_outputs {
                set.ref_outputs.clone()
            } else {
                set.cand_outputs.clone()
            });
            let sizes = set.input.sizes.clone();
            let scalars = set.input.scalars.clone();
            for (k, s) in cand.scratch.iter().enumerate() {
                let field = format!("{}: scratch[{k}].bytes (`{}`)", manifest_path(cand), s.name);
                let bytes = s
                    .bytes
                    .eval(&sizes)
                    .map_err(|e| (Status::RuntimeError, format!("{field}: {e}")))?;
                if bytes < 0 {
                    return Err((Status::RuntimeError, format!("{field} = {bytes}: negative")));
                }
                let free = self.backend.free_memory();
                if bytes as usize > free {
                    return Err((
                        Status::RuntimeError,
                        format!(
                            "{field} = {bytes}: more than the {free} bytes of device memory free"
                        ),
                    ));
                }
                let buf = self
                    .backend
                    .alloc(bytes as usize)
                    .map_err(|e| (Status::RuntimeError, format!("scratch `{}`: {e}", s.name)))?;
                scratch_all.push(buf);
                buffers.insert(s.name.clone(), buf);
            }
            let bound = plan::bind(cand, &sizes, &scalars, &buffers, &mut *self.backend, module)
                .map_err(|e| (Status::RuntimeError, e))?;
            plans.push(bound);
        }
        Ok((module, plans, scratch_all))
    }

    /// Runs a plan once on every set with poisoned outputs and checks outputs and inputs.
    fn check_all(
        &mut self,
        module: ModuleId,
        plans: &[Vec<Launch>],
        scratch: &[Buffer],
        use_ref_outputs: bool,
    ) -> (Vec<SetCheck>, Option<(Status, String)>) {
        let mut checks = Vec::new();
        #[allow(clippy::needless_range_loop)] // `i` also names the set for `check_set`
        for i in 0..self.sets.len() {
            match self.check_set(i, module, &plans[i], scratch, use_ref_outputs, &mut checks) {
                Ok(None) => {}
                Ok(Some(fail)) => return (checks, Some((Status::Incorrect, fail))),
                Err(e) => {
                    return (
                        checks,
                        Some((
                            Status::RuntimeError,
                            format!("on {}: {e}", self.sets[i].label),
                        )),
                    )
                }
            }
        }
        (checks, None)
    }

    fn check_set(
        &mut self,
        i: usize,
        module: ModuleId,
        plan: &[Launch],
        scratch: &[Buffer],
        use_ref_outputs: bool,
        checks: &mut Vec<SetCheck>,
    ) -> Result<Option<String>, BackendError> {
        let outputs = if use_ref_outputs {
            self.sets[i].ref_outputs.clone()
        } else {
            self.sets[i].cand_outputs.clone()
        };
        self.reset_outputs(i, &outputs, true)?;
        for s in scratch {
            self.backend.fill(s, &[SCRATCH_POISON])?;
        }
        plan::run(&mut *self.backend, module, plan)?;
        self.backend.synchronize()?;
        let label = self.sets[i].label.clone();
        let fail = self.check_outputs(i, &outputs, &label, checks)?;
        if fail.is_some() {
            return Ok(fail);
        }
        self.check_inputs_unchanged(i)
    }

    /// Before a run: in-out tensors get their initial value back; outputs get the poison
    /// (`poison`; timed runs skip it, so a kernel cannot lean on it).
    fn reset_outputs(
        &mut self,
        i: usize,
        outputs: &Buffers,
        poison: bool,
    ) -> Result<(), BackendError> {
        for spec in output_specs(self.problem) {
            if let Some(initial) = self.sets[i].pristine.get(spec.name).copied() {
                self.backend.copy(&outputs[spec.name], &initial)?;
            } else if poison {
                self.backend
                    .fill(&outputs[spec.name], &poison_pattern(spec.dtype))?;
            }
        }
        Ok(())
    }

    /// The part of an output the check covers: all of it, or the valid prefix.
    fn checked_part(
        &self,
        spec: &TensorSpec,
        oracle: &OracleOutput,
        got: HostTensor,
    ) -> HostTensor {
        if !self.problem.checked_prefix(spec.name) || oracle.len() >= got.numel() {
            return got;
        }
        let n = oracle.len();
        HostTensor {
            dtype: got.dtype,
            shape: vec![n],
            bytes: got.bytes[..n * got.dtype.size_bytes()].to_vec(),
        }
    }

    /// Downloads `outputs` and checks them against set `i`'s oracle.
    fn check_outputs(
        &mut self,
        i: usize,
        outputs: &Buffers,
        label: &str,
        checks: &mut Vec<SetCheck>,
    ) -> Result<Option<String>, BackendError> {
        let mut fail = None;
        for spec in output_specs(self.problem) {
            let got = self.download_tensor(&outputs[spec.name], &spec, i)?;
            let oracle = &self.sets[i].oracle[spec.name];
            let got = self.checked_part(&spec, oracle, got);
            let mut report = check_output(&got, oracle, &self.problem.tolerance(&spec));
            if report.passed {
                if let Some(reason) = self.problem.custom_check(&spec, &got, &self.sets[i].input) {
                    report.passed = false;
                    report.reason = reason;
                }
            }
            if !report.passed && fail.is_none() {
                fail = Some(format!(
                    "{label}, output `{}`: {}",
                    spec.name, report.reason
                ));
            }
            checks.push(SetCheck {
                set: label.to_string(),
                output: spec.name.to_string(),
                report,
            });
        }
        Ok(fail)
    }

    fn download_tensor(
        &mut self,
        buf: &Buffer,
        spec: &TensorSpec,
        i: usize,
    ) -> Result<HostTensor, BackendError> {
        let bytes = self.backend.download(buf)?;
        let shape = shape_of(spec, &self.sets[i].input.sizes)
            .map_err(|e| BackendError::Device(e.to_string()))?;
        HostTensor::new(spec.dtype, shape, bytes).map_err(|e| BackendError::Device(e.to_string()))
    }

    /// Inputs must be bit-identical after a run (a candidate that writes its inputs fails).
    fn check_inputs_unchanged(&mut self, i: usize) -> Result<Option<String>, BackendError> {
        for spec in input_specs(self.problem) {
            let buf = self.sets[i].inputs[spec.name];
            if self.backend.fingerprint(&buf)? == self.sets[i].fingerprints[spec.name] {
                continue;
            }
            // Changed: find where, for the message (the rare path, so a full copy is fine).
            let now = self.backend.download(&buf)?;
            let original = &self.sets[i]
                .input
                .tensors
                .get(spec.name)
                .expect("generated")
                .bytes;
            let first = now
                .iter()
                .zip(original)
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            return Ok(Some(format!(
                "{}: input `{}` was modified (first changed byte {first})",
                self.sets[i].label, spec.name
            )));
        }
        Ok(None)
    }

    /// One timed run on set `set` (its in-out tensors restored first, outside the timed region).
    fn time_once(
        &mut self,
        module: ModuleId,
        plan: &[Launch],
        set: usize,
        use_ref_outputs: bool,
    ) -> Result<f64, BackendError> {
        if !self.sets[set].pristine.is_empty() {
            let outputs = if use_ref_outputs {
                self.sets[set].ref_outputs.clone()
            } else {
                self.sets[set].cand_outputs.clone()
            };
            self.reset_outputs(set, &outputs, false)?;
        }
        if !self.cfg.warm_l2 {
            self.backend.flush_l2()?;
        }
        self.backend.timer_start()?;
        plan::run(&mut *self.backend, module, plan)?;
        self.backend.timer_stop()
    }

    fn timing(&self, ms: &[f64]) -> Timing {
        let median = stats::median(ms);
        let w = self.work();
        let floor = self.ceilings.map(|c| c.floor_ms(&w));
        Timing {
            median_ms: median,
            p10_ms: stats::quantile(ms, 0.1),
            p90_ms: stats::quantile(ms, 0.9),
            samples: ms.len(),
            compulsory_gbps: w.compulsory_bytes / median / 1e6,
            logical_gbps: w.logical_bytes / median / 1e6,
            gflops: w.flops / median / 1e6,
            floor_fraction: floor.map(|f| f / median),
        }
    }

    /// Checks and times the reference alone. Must be called before [`Self::evaluate`].
    pub fn reference_record(&mut self) -> Record {
        let cand = self.reference.clone();
        let mut rec = Record::new(self.problem.name(), "reference", "reference", "reference");
        rec.work = Some(self.work());
        let stats: Vec<serde_json::Value> = self.sets[..self.rotation()]
            .iter()
            .map(|s| serde_json::json!({"set": s.label, "seed": s.input.seed, "sizes": s.input.sizes, "stats": self.problem.input_stats(&s.input)}))
            .collect();
        rec.input_stats = Some(serde_json::Value::Array(stats));
        rec.floor_ms = self.ceilings.map(|c| c.floor_ms(&self.work()));
        let (module, plans, scratch) = match self.load(&cand, true) {
            Ok(x) => x,
            Err((status, msg)) => {
                rec.status = status;
                rec.message = msg;
                return rec;
            }
        };
        let (checks, fail) = self.check_all(module, &plans, &scratch, true);
        rec.checks = checks;
        if let Some((status, msg)) = fail {
            rec.status = status;
            rec.message = format!("THE REFERENCE FAILED ITS OWN CHECK: {msg}");
            return rec;
        }
        self.ref_module = Some(module);
        self.ref_plans = plans;
        let r = self.rotation();
        let n = self.cfg.min_pairs.max(10) * 2;
        let started = Instant::now();
        let mut ms = Vec::new();
        for i in 0..n + r {
            let plan = self.ref_plans[i % r].clone();
            match self.time_once(module, &plan, i % r, true) {
                Ok(t) if i >= r => ms.push(t), // the first pass over the sets is warm-up
                Ok(_) => {}
                Err(e) => {
                    rec.status = Status::RuntimeError;
                    rec.message = e.to_string();
                    return rec;
                }
            }
            if started.elapsed().as_secs_f64() > self.cfg.budget_s {
                break;
            }
        }
        rec.status = Status::Correct;
        rec.timing = Some(self.timing(&ms));
        rec
    }

    /// Checks, times and rechecks one candidate against the reference.
    pub fn evaluate(&mut self, cand: &Candidate) -> Record {
        let mut rec = self.evaluate_inner(cand);
        rec.expected_status = cand.expect.clone();
        rec
    }

    fn evaluate_inner(&mut self, cand: &Candidate) -> Record {
        let mut rec = Record::new(self.problem.name(), &cand.name, &cand.group, &cand.origin);
        rec.work = Some(self.work());
        rec.floor_ms = self.ceilings.map(|c| c.floor_ms(&self.work()));
        let Some(ref_module) = self.ref_module else {
            rec.message = "the reference did not pass, so nothing is compared with it".into();
            return rec;
        };
        let (module, plans, scratch) = match self.load(cand, false) {
            Ok(x) => x,
            Err((status, msg)) => {
                rec.status = status;
                rec.message = msg;
                return rec;
            }
        };
        let (checks, fail) = self.check_all(module, &plans, &scratch, false);
        rec.checks = checks;
        if let Some((status, msg)) = fail {
            rec.status = status;
            rec.message = msg;
            self.free(scratch);
            return rec;
        }
        match self.time_pairs(ref_module, module, &plans) {
            Ok(PairTimes {
                reference: ref_ms,
                candidate: cand_ms,
                ratios,
            }) => {
                let (lo, hi) = stats::bootstrap_median_ci(&ratios, 2000, self.cfg.seed);
                rec.speedup = Some(Speedup {
                    median: stats::median(&ratios),
                    ci_low: lo,
                    ci_high: hi,
                    pairs: ratios.len(),
                });
                rec.timing = Some(self.timing(&cand_ms));
                rec.reference_timing = Some(self.timing(&ref_ms));
            }
            Err(e) => {
                rec.status = Status::RuntimeError;
                rec.message = format!("while timing: {e}");
                self.free(scratch);
                return rec;
            }
        }
        // Recheck what the timed runs left (no poison in between): against the oracle and
        // against the reference's output on the same inputs.
        match self.recheck(&mut rec) {
            Ok(None) => rec.status = Status::Correct,
            Ok(Some(msg)) => {
                rec.status = Status::Incorrect;
                rec.message = msg;
            }
            Err(e) => {
                rec.status = Status::RuntimeError;
                rec.message = format!("while rechecking: {e}");
            }
        }
        if rec.status == Status::Correct {
            if let (Some(floor), Some(t)) = (rec.floor_ms, &rec.timing) {
                if t.median_ms < floor {
                    rec.status = Status::Suspect;
                    rec.message = format!(
                        "median {:.4} ms is below the physical floor {:.4} ms: impossible, not counted as a win",
                        t.median_ms, floor
                    );
                }
            }
        }
        rec.win = rec.status == Status::Correct
            && rec
                .speedup
                .as_ref()
                .is_some_and(|s| s.ci_low > self.cfg.win_threshold);
        self.free(scratch);
        rec
    }

    fn free(&mut self, bufs: Vec<Buffer>) {
        for b in bufs {
            self.backend.free(b);
        }
    }

    /// Interleaved pairs (A B, then B A) on rotating sets; returns (reference ms, candidate ms,
    /// reference/candidate ratios).
    fn time_pairs(
        &mut self,
        ref_module: ModuleId,
        module: ModuleId,
        plans: &[Vec<Launch>],
    ) -> Result<PairTimes, BackendError> {
        let r = self.rotation();
        let ref_plans = self.ref_plans.clone();
        for s in 0..r {
            self.time_once(ref_module, &ref_plans[s], s, true)?;
            self.time_once(module, &plans[s], s, false)?;
        }
        self.backend.synchronize()?;
        let (mut ref_ms, mut cand_ms, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        let started = Instant::now();
        for i in 0..self.cfg.max_pairs {
            let s = i % r;
            let (t_ref, t_cand) = if i % 2 == 0 {
                let a = self.time_once(ref_module, &ref_plans[s], s, true)?;
                (a, self.time_once(module, &plans[s], s, false)?)
            } else {
                let b = self.time_once(module, &plans[s], s, false)?;
                (self.time_once(ref_module, &ref_plans[s], s, true)?, b)
            };
            ref_ms.push(t_ref);
            cand_ms.push(t_cand);
            ratios.push(t_ref / t_cand.max(1e-9));
            let n = ratios.len();
            if n >= self.cfg.min_pairs && n % 10 == 0 {
                let m = stats::median(&ratios);
                let (lo, hi) = stats::bootstrap_median_ci(&ratios, 500, n as u64);
                if (hi - lo) / 2.0 <= self.cfg.target_half_width * m {
                    break;
                }
            }
            if n >= self.cfg.min_pairs && started.elapsed().as_secs_f64() > self.cfg.budget_s {
                break;
            }
        }
        self.backend.synchronize()?;
        Ok(PairTimes {
            reference: ref_ms,
            candidate: cand_ms,
            ratios,
        })
    }

    fn recheck(&mut self, rec: &mut Record) -> Result<Option<String>, BackendError> {
        let mut fail = None;
        for s in 0..self.rotation() {
            let outputs = self.sets[s].cand_outputs.clone();
            let label = format!("recheck-{}", self.sets[s].label);
            if let Some(f) = self.check_outputs(s, &outputs, &label, &mut rec.checks)? {
                fail.get_or_insert(format!("timed output differs from the oracle: {f}"));
            }
            for spec in output_specs(self.problem) {
                let oracle = self.sets[s].oracle[spec.name].clone();
                let cand =
                    self.download_tensor(&self.sets[s].cand_outputs[spec.name].clone(), &spec, s)?;
                let cand = self.checked_part(&spec, &oracle, cand);
                let reference =
                    self.download_tensor(&self.sets[s].ref_outputs[spec.name].clone(), &spec, s)?;
                let reference = self.checked_part(&spec, &oracle, reference);
                let as_oracle = if spec.dtype.is_float() {
                    OracleOutput::Float(reference.to_f64_vec())
                } else {
                    OracleOutput::Int(reference.to_i64_vec().unwrap_or_default())
                };
                let report = check_output(&cand, &as_oracle, &self.problem.tolerance(&spec));
                if !report.passed {
                    fail.get_or_insert(format!(
                        "timed output `{}` differs from the reference's on {}: {}",
                        spec.name, self.sets[s].label, report.reason
                    ));
                }
                rec.checks.push(SetCheck {
                    set: format!("{label}-vs-reference"),
                    output: spec.name.to_string(),
                    report,
                });
            }
            if let Some(f) = self.check_inputs_unchanged(s)? {
                fail.get_or_insert(f);
            }
        }
        Ok(fail)
    }

    /// Whether the device still works after a fault (a CUDA illegal address is sticky: every
    /// later call fails).
    pub fn device_health(&mut self) -> Result<(), BackendError> {
        self.backend.synchronize()?;
        let probe = self.backend.alloc(256)?;
        self.backend.fill(&probe, &[0])?;
        self.backend.synchronize()?;
        self.backend.free(probe);
        Ok(())
    }

    /// Frees every device buffer of the problem.
    pub fn release(self) {
        for set in self.sets {
            let all = set
                .inputs
                .into_values()
                .chain(set.ref_outputs.into_values())
                .chain(set.cand_outputs.into_values());
            for b in all.chain(set.pristine.into_values()) {
                self.backend.free(b);
            }
        }
    }
}
