//! Checking a loaded plan (docs/design.md §6). Before each checked run every output gets the poison
//! pattern (in-out tensors their initial value) and every scratch buffer [`SCRATCH_POISON`];
//! after it, each output is compared with the oracle (only the valid prefix where the problem
//! says so) and the problem's own check, and the inputs must be bit-identical to their upload.
//! [`Verifier::recheck`] checks what the timed runs left, against the oracle and against the
//! reference's outputs on the same inputs.
//!
//! Exact outputs (integers, bit-exact gathers and permutes) are checked by fingerprint: when a
//! set is prepared, [`expected_outputs`] encodes the oracle to the output's dtype once (the
//! bytes a correct kernel writes, the checked prefix only) and fingerprints it on the host
//! ([`host_fingerprint`]); a check fingerprints the output on the device and copies nothing
//! back when the two agree. Only a disagreement copies the output (its checked part) back for
//! the full check, whose report says where and how it is wrong (a NaN with another payload
//! passes there).
//!
//! Float outputs under the scale-invariant test are compared on the device
//! ([`Backend::compare_floats`]): the oracle is uploaded to a temporary buffer after the run
//! (zeroed and freed right after), the kernel reduces the norms, the worst element and the
//! non-finite and poisoned elements, and only a few words per block come back; the report is
//! the host check's ([`float_report`]). The recheck compares the candidate's output with the
//! reference's on the device the same way. Only when the device has no room for the oracle is
//! the output copied back and compared on the host.
//!
//! An in-place output with a row-update oracle ([`OracleOutput::Rows`]: an optimizer step on a
//! table of gigabytes) is checked on the rows that change plus a fingerprint of the rest: when
//! the set is prepared, [`expected_rows`] computes the fingerprint the other rows hold when
//! they keep their initial value (the fingerprint is a sum over words, so that is the initial
//! value's minus the listed rows' part). A check fingerprints the output on the device, puts
//! the oracle's row ids there for a moment, gathers the listed rows into scratch
//! ([`Backend::gather_rows`]) and copies back only those; the whole's fingerprint minus theirs
//! must be the expected one, and the listed rows are checked against the oracle's update
//! ([`bench_problems::check::check_changed_rows`]); the report is the full check's (`elements`
//! the whole tensor, the norms over the listed rows) marked `by_fingerprint`. Only when another
//! row changed is the whole output copied back for the full check
//! ([`bench_problems::check::check_rows`]), whose report names the row. The recheck compares
//! the listed rows of both sides the same way, the reference's update standing for the
//! oracle's, and copies both outputs back whole only when a side changed another row.
use super::expected::{checked_elements, Expected, ExpectedRows};
use super::guard;
use super::inputs::{DeviceSet, OutputFill, Side};
use super::load::Loaded;
use super::specs::{input_specs, output_specs};
use crate::backend::{host_rows_fingerprint, Backend, BackendError, Buffer};
use crate::results::record::{SetCheck, Status};
use crate::runner::activity::CandidateRun;
use bench_problems::check::{
    check_against, check_changed_rows, check_output_with, float_report, FloatSums, RowsReference,
    Tolerance,
};
use bench_problems::spec::shape_of;
use bench_problems::{
    CheckContext, CheckReport, OracleOutput, Problem, Role, RowUpdate, TensorSpec,
};
use data_gen::{DType, HostTensor};
use gpu_kernels::kernels::compare::FloatAcc;
use std::ops::Range;

/// Scratch buffers are filled with this byte before every checked run.
const SCRATCH_POISON: u8 = 0xA5;

/// Float dtypes [`Backend::compare_floats`] reads as outputs.
fn on_device_dtype(dtype: DType) -> bool {
    matches!(dtype, DType::F32 | DType::F16 | DType::BF16)
}

/// The device's comparison sums as the host check's.
fn float_sums(acc: &FloatAcc) -> FloatSums {
    let index = |i: u64| (i != u64::MAX).then_some(i as usize);
    FloatSums {
        err2: acc.err2,
        ref2: acc.ref2,
        ref_inf: acc.ref_inf,
        worst: acc.worst,
        worst_index: index(acc.worst_index),
        non_finite: acc.non_finite as usize,
        unwritten: acc.unwritten as usize,
        first_unwritten: index(acc.first_unwritten),
    }
}

/// What a check copied back of an output.
pub(super) enum Copied {
    /// Nothing: its fingerprint proved it holds the expected bytes.
    Nothing,
    /// The part the check covers (all of it, or the valid prefix).
    Whole(HostTensor),
    /// Only the rows its row-update oracle lists (row `rows[u]` at row `u`), the others proven
    /// unchanged by fingerprint.
    ChangedRows(Vec<u8>),
    /// Nothing: a float output compared with the oracle on the device ([`Verifier::on_device`]).
    ComparedOnDevice,
}

/// How a timed run's output is checked.
enum TimedCheck {
    /// A float output against the reference's on the device.
    AgainstReference,
    /// An in-place update against the reference's update, under these bounds.
    UpdateAgainstReference(Tolerance),
    /// As the checks before the timing check it (exact outputs by fingerprint).
    AsChecked,
}

/// Checks plans of one problem on its device sets.
pub(super) struct Verifier<'a> {
    pub backend: &'a mut dyn Backend,
    pub problem: &'static dyn Problem,
}

impl Verifier<'_> {
    /// Runs `plan` once on every set but those in `skip` (the timing's, which a candidate meets
    /// first in a timed run) with poisoned outputs and checks outputs and inputs; stops at the
    /// first set that fails.
    pub(crate) fn check_all(
        &mut self,
        sets: &[DeviceSet],
        plan: &Loaded,
        side: Side,
        skip: Range<usize>,
    ) -> (Vec<SetCheck>, Option<(Status, String)>) {
        let mut checks = Vec::new();
        for (i, set) in sets.iter().enumerate() {
            if skip.contains(&i) {
                continue;
            }
            match self.check_set(set, i, plan, side, &mut checks) {
                Ok(None) => {}
                Ok(Some(fail)) => return (checks, Some(fail)),
                Err(e) => {
                    let msg = format!("on {}: {e}", set.label);
                    return (checks, Some((Status::RuntimeError, msg)));
                }
            }
        }
        (checks, None)
    }

    /// One poisoned run of the plan bound for set `i`, then its checks: the guards of every
    /// buffer it could reach, its outputs, its inputs.
    fn check_set(
        &mut self,
        set: &DeviceSet,
        i: usize,
        plan: &Loaded,
        side: Side,
        checks: &mut Vec<SetCheck>,
    ) -> Result<Option<(Status, String)>, BackendError> {
        let fill = OutputFill::Poison;
        plan.prepare_run(
            &mut *self.backend,
            set,
            self.problem,
            side,
            fill,
            SCRATCH_POISON,
        )?;
        {
            let _running = CandidateRun::start(side == Side::Candidate);
            plan.run(&mut *self.backend, i)?;
            self.backend.synchronize()?;
        }
        if let Some(msg) = self.state_left(plan)? {
            return Ok(Some((Status::Incorrect, format!("{}: {msg}", set.label))));
        }
        if let Some(msg) = self.guards_intact(set, i, plan, side)? {
            return Ok(Some((
                Status::OutOfBoundsWrite,
                format!("{}: {msg}", set.label),
            )));
        }
        let (fail, _) = self.check_outputs(set, side, &set.label, checks)?;
        if let Some(fail) = fail {
            return Ok(Some((Status::Incorrect, fail)));
        }
        Ok(self
            .check_inputs_unchanged(set)?
            .map(|fail| (Status::Incorrect, fail)))
    }

    /// The guards ([`guard::verify`]) of every buffer the plan bound for set `i` on `side`
    /// reaches: the set's inputs, `side`'s outputs, the plan's scratch for that set. The
    /// message of the first changed one.
    fn guards_intact(
        &mut self,
        set: &DeviceSet,
        i: usize,
        plan: &Loaded,
        side: Side,
    ) -> Result<Option<String>, BackendError> {
        let whose = match side {
            Side::Reference => "the reference's",
            Side::Candidate => "the candidate's",
        };
        let inputs = set.inputs.iter().map(|(n, b)| (n.as_str(), b));
        if let Some(msg) = guard::verify(&mut *self.backend, "input", inputs)? {
            return Ok(Some(msg));
        }
        let outputs = set.outputs(side).iter().map(|(n, b)| (n.as_str(), b));
        if let Some(msg) = guard::verify(&mut *self.backend, &format!("{whose} output"), outputs)? {
            return Ok(Some(msg));
        }
        guard::verify(
            &mut *self.backend,
            &format!("{whose} scratch"),
            plan.scratch_of(i),
        )
    }

    /// After one execution of `plan`: the module's globals as loaded again, and what had
    /// changed ([`Backend::restore_module_globals`]) as the failure's message.
    pub(crate) fn state_left(&mut self, plan: &Loaded) -> Result<Option<String>, BackendError> {
        let changed = self.backend.restore_module_globals(plan.module)?;
        if changed.is_empty() {
            return Ok(None);
        }
        let names: Vec<String> = changed.iter().map(|n| format!("`{n}`")).collect();
        Ok(Some(format!(
            "state survived an execution: the module global(s) {} changed and the kernel did not put them back. No state may outlive an execution: device memory a plan needs across its launches is a [[scratch]] buffer (poisoned before every run); a counter the kernel itself resets before it ends is fine",
            names.join(", ")
        )))
    }

    /// After timed runs of `plan` on the sets `rotation` (indices into `sets`): the guards of
    /// every buffer they reached ([`Self::guards_intact`]), which no check looked at in between.
    pub(crate) fn guards_after_timing(
        &mut self,
        sets: &[DeviceSet],
        rotation: Range<usize>,
        plan: &Loaded,
        side: Side,
    ) -> Result<Option<String>, BackendError> {
        for i in rotation {
            let set = &sets[i];
            if let Some(msg) = self.guards_intact(set, i, plan, side)? {
                return Ok(Some(format!(
                    "after the timed runs on {}: {msg}",
                    set.label
                )));
            }
        }
        Ok(None)
    }

    /// Whether `buf` holds `expected`'s bytes, by fingerprint on the device (and the 1–3
    /// trailing bytes, if any, copied back).
    fn holds(&mut self, buf: &Buffer, expected: &Expected) -> Result<bool, BackendError> {
        if self.backend.fingerprint_words(buf, expected.words())? != expected.fingerprint {
            return Ok(false);
        }
        let tail = expected.tail();
        if tail.is_empty() {
            return Ok(true);
        }
        let got = self
            .backend
            .download_range(buf, 4 * expected.words(), tail.len())?;
        Ok(got == tail)
    }

    /// The rows of `buf` that `rows` lists, copied back, when its other rows are proven to
    /// hold their initial value: the whole buffer fingerprinted on the device, the listed rows
    /// gathered into scratch (freed again) and copied back, and the whole's fingerprint minus
    /// theirs equal to the expected one. `None` when it is not (another row changed).
    fn changed_rows(
        &mut self,
        buf: &Buffer,
        expected: &ExpectedRows,
        rows: &RowUpdate,
    ) -> Result<Option<Vec<u8>>, BackendError> {
        let whole = self.backend.fingerprint(buf)?;
        let (n, width) = (rows.rows.len(), expected.width_words);
        let ids = self.backend.alloc(n * 8)?;
        let scratch = match self.backend.alloc(n * width * 4) {
            Ok(s) => s,
            Err(e) => {
                self.backend.free(ids);
                return Err(e);
            }
        };
        let gathered = self
            .backend
            .upload(&ids, bytemuck::cast_slice(&rows.rows))
            .and_then(|()| self.backend.gather_rows(buf, &ids, n, width, &scratch))
            .and_then(|()| self.backend.download(&scratch));
        // Neither the ids nor the gathered rows stay where a later run could find them.
        let cleared = [&ids, &scratch].map(|b| self.backend.fill(b, &[0]));
        self.backend.free(ids);
        self.backend.free(scratch);
        let changed = gathered?;
        cleared.into_iter().collect::<Result<Vec<()>, _>>()?;
        let listed = host_rows_fingerprint(&rows.rows, width, &changed);
        Ok((whole.wrapping_sub(listed) == expected.unchanged_fingerprint).then_some(changed))
    }

    /// Checks `side`'s output `spec` of `set` against the oracle: by fingerprint when it is an
    /// exact one whose bytes agree (nothing copied back), on its changed rows when it is a row
    /// update whose other rows are proven unchanged (only those copied back), else copied back
    /// (its checked part) and checked in full. Returns what it copied back.
    fn check_one(
        &mut self,
        set: &DeviceSet,
        side: Side,
        spec: &TensorSpec,
    ) -> Result<(CheckReport, Copied), BackendError> {
        let buf = set.outputs(side)[spec.name];
        let expected = set.expected.get(spec.name);
        if let Some(exp) = expected {
            if self.holds(&buf, exp)? {
                return Ok((
                    CheckReport::proven_by_fingerprint(exp.elements),
                    Copied::Nothing,
                ));
            }
        }
        let oracle = &set.oracle[spec.name];
        let initial = match spec.role {
            Role::InOut => set.input.tensors.get(spec.name).ok(),
            _ => None,
        };
        let tol = self.problem.tolerance(spec);
        if let (Some(exp), OracleOutput::Rows(rows), Some(initial)) =
            (set.expected_rows.get(spec.name), oracle, initial)
        {
            if let Some(changed) = self.changed_rows(&buf, exp, rows)? {
                let against = RowsReference::Oracle;
                let mut report = check_changed_rows(&changed, initial, rows, against, &tol);
                report.by_fingerprint = true;
                return Ok((report, Copied::ChangedRows(changed)));
            }
        }
        if let Some(report) = self.on_device(set, &buf, spec)? {
            return Ok((report, Copied::ComparedOnDevice));
        }
        let got = self.download_checked(set, &buf, spec)?;
        let ctx = CheckContext {
            encoded: expected.map(|e| &e.bytes[..]),
            initial,
        };
        let mut report = check_output_with(&got, oracle, &tol, ctx);
        if report.passed {
            if let Some(reason) = self.problem.custom_check(spec, &got, &set.input) {
                report.passed = false;
                report.reason = reason;
            }
        }
        Ok((report, Copied::Whole(got)))
    }

    /// The check of float output `spec` (held in `buf`) against the set's oracle on the device,
    /// when its test is the scale-invariant one and the problem adds no check of its own: the
    /// oracle goes to a temporary device buffer (zeroed and freed right after, so no later run
    /// can find it), [`Backend::compare_floats`] reduces both, and nothing but a few words per
    /// block comes back. `None` when the output is not such a one, or the device has no room
    /// for the oracle (the host check then copies the output back).
    fn on_device(
        &mut self,
        set: &DeviceSet,
        buf: &Buffer,
        spec: &TensorSpec,
    ) -> Result<Option<CheckReport>, BackendError> {
        let tol = self.problem.tolerance(spec);
        let OracleOutput::Float(oracle) = &set.oracle[spec.name] else {
            return Ok(None);
        };
        if tol.exact || !on_device_dtype(spec.dtype) || self.problem.custom_checked(spec.name) {
            return Ok(None);
        }
        let n = self.checked_len(set, spec)?;
        if oracle.len() != n {
            return Ok(None); // the host check says what is wrong with this oracle
        }
        let Ok(want) = self.backend.alloc(8 * n) else {
            return Ok(None);
        };
        let sums = self
            .backend
            .upload(&want, bytemuck::cast_slice(&oracle[..]))
            .and_then(|()| {
                self.backend
                    .compare_floats((buf, spec.dtype), (&want, DType::F64), n, None)
            });
        let cleared = self.backend.fill(&want, &[0]);
        self.backend.free(want);
        let sums = sums?;
        cleared?;
        Ok(Some(float_report(n, &float_sums(&sums), &tol)))
    }

    /// The candidate's float output `spec` against the reference's on the same set, on the
    /// device (the candidate's was compared with the oracle there too).
    fn against_reference_on_device(
        &mut self,
        set: &DeviceSet,
        spec: &TensorSpec,
    ) -> Result<CheckReport, BackendError> {
        let n = self.checked_len(set, spec)?;
        let cand = set.outputs(Side::Candidate)[spec.name];
        let reference = set.outputs(Side::Reference)[spec.name];
        let sums =
            self.backend
                .compare_floats((&cand, spec.dtype), (&reference, spec.dtype), n, None)?;
        Ok(float_report(
            n,
            &float_sums(&sums),
            &self.problem.tolerance(spec),
        ))
    }

    /// Elements of output `spec` the check covers (see [`checked_elements`]).
    fn checked_len(&self, set: &DeviceSet, spec: &TensorSpec) -> Result<usize, BackendError> {
        let shape =
            shape_of(spec, &set.input.sizes).map_err(|e| BackendError::Device(e.to_string()))?;
        let numel: usize = shape.iter().product();
        Ok(checked_elements(
            self.problem,
            spec,
            &set.oracle[spec.name],
            numel,
        ))
    }

    /// Checks `side`'s outputs against the set's oracle; records a check per output under
    /// `label` and returns the first failure, with what was copied back of each output.
    fn check_outputs(
        &mut self,
        set: &DeviceSet,
        side: Side,
        label: &str,
        checks: &mut Vec<SetCheck>,
    ) -> Result<(Option<String>, Vec<Copied>), BackendError> {
        let mut fail = None;
        let mut copies = Vec::new();
        for spec in output_specs(self.problem) {
            let (report, got) = self.check_one(set, side, &spec)?;
            copies.push(got);
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
        Ok((fail, copies))
    }

    /// Copies the part of an output the check covers to the host: all of it, or the valid
    /// prefix (the rest of the buffer is free, so it is not copied).
    fn download_checked(
        &mut self,
        set: &DeviceSet,
        buf: &Buffer,
        spec: &TensorSpec,
    ) -> Result<HostTensor, BackendError> {
        let err = |e: String| BackendError::Device(e);
        let shape = shape_of(spec, &set.input.sizes).map_err(|e| err(e.to_string()))?;
        let numel: usize = shape.iter().product();
        let n = checked_elements(self.problem, spec, &set.oracle[spec.name], numel);
        let (shape, bytes) = if n < numel {
            let bytes = n * spec.dtype.size_bytes();
            (vec![n], self.backend.download_range(buf, 0, bytes)?)
        } else {
            (shape, self.backend.download(buf)?)
        };
        HostTensor::new(spec.dtype, shape, bytes).map_err(|e| err(e.to_string()))
    }

    /// Puts back every input of `sets`, and every initial value of an in-out tensor, whose
    /// fingerprint differs from its upload's (a shared tensor once), from the host's copy: what
    /// a candidate wrote into one, its own set's or another's, never reaches the next
    /// candidate or the reference. Returns how many were put back.
    pub(crate) fn restore_inputs(&mut self, sets: &[DeviceSet]) -> Result<usize, BackendError> {
        let mut seen = std::collections::BTreeSet::new();
        let mut restored = 0;
        for set in sets {
            let inputs = input_specs(self.problem)
                .into_iter()
                .map(|spec| (spec.name, set.inputs[spec.name]));
            let initials = set.pristine.iter().map(|(n, b)| (n.as_str(), *b));
            let buffers: Vec<(&str, Buffer)> = inputs.chain(initials).collect();
            for (name, buf) in buffers {
                if !seen.insert((buf.id, buf.offset)) {
                    continue;
                }
                if self.backend.fingerprint(&buf)? != set.fingerprints[name] {
                    let original = &set.input.tensors.get(name).expect("generated").bytes;
                    self.backend.upload(&buf, original)?;
                    restored += 1;
                }
            }
        }
        Ok(restored)
    }

    /// Inputs must be bit-identical after a run (a candidate that writes its inputs fails).
    fn check_inputs_unchanged(&mut self, set: &DeviceSet) -> Result<Option<String>, BackendError> {
        for spec in input_specs(self.problem) {
            let buf = set.inputs[spec.name];
            if self.backend.fingerprint(&buf)? == set.fingerprints[spec.name] {
                continue;
            }
            // Changed: find where, for the message (the rare path, so a full copy is fine).
            let now = self.backend.download(&buf)?;
            let original = &set.input.tensors.get(spec.name).expect("generated").bytes;
            let first = now.iter().zip(original.iter()).position(|(a, b)| a != b);
            let Some(first) = first else {
                return Ok(Some(format!(
                    "{}: input `{}`: its fingerprint changed ({:#x} → {:#x}) although its {} bytes read back equal to the upload",
                    set.label,
                    spec.name,
                    set.fingerprints[spec.name],
                    self.backend.fingerprint(&buf)?,
                    now.len()
                )));
            };
            return Ok(Some(format!(
                "{}: input `{}` was modified (first changed byte {first})",
                set.label, spec.name
            )));
        }
        Ok(None)
    }

    /// How a timed run's output `spec` is checked ([`Self::check_timed`]).
    fn timed_check(&self, set: &DeviceSet, spec: &TensorSpec) -> TimedCheck {
        let plain = on_device_dtype(spec.dtype) && !self.problem.custom_checked(spec.name);
        match set.oracle.get(spec.name) {
            Some(OracleOutput::Float(_))
                if plain
                    && !set.expected.contains_key(spec.name)
                    && !self.problem.tolerance(spec).exact =>
            {
                TimedCheck::AgainstReference
            }
            // Twice the oracle's update bounds: both sides' updates carry fp32 rounding here
            // (the recheck after the timing holds the candidate to the oracle's own bounds).
            Some(OracleOutput::Rows(rows)) if plain && set.pristine.contains_key(spec.name) => {
                TimedCheck::UpdateAgainstReference(Tolerance {
                    rel_l2: 2.0 * rows.update_rel_l2,
                    max_scaled: 2.0 * rows.update_max_scaled,
                    exact: false,
                })
            }
            _ => TimedCheck::AsChecked,
        }
    }

    /// Whether [`Self::check_timed`] compares every output of `set` with the reference's (so
    /// it holds on inputs the oracle was not computed for).
    pub(crate) fn timed_checks_all_against_reference(&self, set: &DeviceSet) -> bool {
        output_specs(self.problem)
            .iter()
            .all(|spec| !matches!(self.timed_check(set, spec), TimedCheck::AsChecked))
    }

    /// Whether [`Self::check_timed`] on `set` needs the reference's outputs on the device.
    pub(crate) fn timed_check_needs_reference(&self, set: &DeviceSet) -> bool {
        output_specs(self.problem)
            .iter()
            .any(|spec| !matches!(self.timed_check(set, spec), TimedCheck::AsChecked))
    }

    /// After one timed run of the candidate on `set` (its outputs held a canary before it,
    /// [`OutputFill::Canary`]): each output against the reference's on the same inputs, on the
    /// device, when [`Self::timed_check_needs_reference`] says so (the reference's outputs are
    /// there then: the caller ran it on the set and clears them after) — an in-place update as
    /// the change from the initial value against the reference's change, under the oracle's
    /// update bounds, over the whole tensor (so a row that must not change counts too); else
    /// as the check does (an exact output by its fingerprint). The first failure's message,
    /// under `label` (`timed run 7 on secret-1`).
    pub(crate) fn check_timed(
        &mut self,
        set: &DeviceSet,
        label: &str,
    ) -> Result<Option<String>, BackendError> {
        for spec in output_specs(self.problem) {
            let report = match self.timed_check(set, &spec) {
                TimedCheck::AgainstReference => self.against_reference_on_device(set, &spec)?,
                TimedCheck::UpdateAgainstReference(bounds) => {
                    self.update_against_reference_on_device(set, &spec, &bounds)?
                }
                TimedCheck::AsChecked => self.check_one(set, Side::Candidate, &spec)?.0,
            };
            if !report.passed {
                return Ok(Some(format!(
                    "{label}: output `{}`: {} (every timed run is checked: its outputs start as a canary and must equal the reference's on the same inputs)",
                    spec.name, report.reason
                )));
            }
        }
        Ok(None)
    }

    /// The candidate's in-place output `spec` against the reference's, as changes from its
    /// initial value (the set's pristine copy), on the device, under `bounds`.
    fn update_against_reference_on_device(
        &mut self,
        set: &DeviceSet,
        spec: &TensorSpec,
        bounds: &Tolerance,
    ) -> Result<CheckReport, BackendError> {
        let n = self.checked_len(set, spec)?;
        let cand = set.outputs(Side::Candidate)[spec.name];
        let reference = set.outputs(Side::Reference)[spec.name];
        let initial = set.pristine[spec.name];
        let sums = self.backend.compare_floats(
            (&cand, spec.dtype),
            (&reference, spec.dtype),
            n,
            Some(&initial),
        )?;
        let mut report = float_report(n, &float_sums(&sums), bounds);
        if !report.passed && report.unwritten == 0 && report.non_finite == 0 {
            report.reason = format!(
                "the update is off against the reference's: relative L2 {:.3e} (bound {:.0e}), max/‖update‖∞ {:.3e} (bound {:.0e})",
                report.rel_l2, bounds.rel_l2, report.max_scaled, bounds.max_scaled
            );
        }
        Ok(report)
    }

    /// After timing, with no poison in between: checks the candidate's outputs on `sets` (the
    /// timed ones) against the oracle and against the reference's outputs on the same inputs
    /// (`reference` run once more on each set for it, its outputs and scratch zeroed after),
    /// and the inputs once more. Appends its checks and returns the first failure.
    ///
    /// An exact output whose fingerprint equals the expected one, on both sides, is proven
    /// equal to the oracle and to the reference's without a copy; a row update whose unlisted
    /// rows are proven unchanged on both sides has only its listed rows copied back, once per
    /// side; any other output is copied back once per side (the reference's only for the
    /// comparison with it).
    pub fn recheck(
        &mut self,
        sets: &[DeviceSet],
        rotation: Range<usize>,
        reference: &Loaded,
        checks: &mut Vec<SetCheck>,
    ) -> Result<Option<String>, BackendError> {
        let mut fail = None;
        for i in rotation {
            let set = &sets[i];
            let label = format!("recheck-{}", set.label);
            let (f, copies) = self.check_outputs(set, Side::Candidate, &label, checks)?;
            if let Some(f) = f {
                fail.get_or_insert(format!("timed output differs from the oracle: {f}"));
            }
            // The reference's outputs on the same inputs, computed now (the candidate's runs
            // are over) and zeroed again below.
            self.run_reference(set, i, reference)?;
            for (spec, cand) in output_specs(self.problem).into_iter().zip(copies) {
                let report = self.against_reference(set, &spec, cand)?;
                if !report.passed {
                    fail.get_or_insert(format!(
                        "timed output `{}` differs from the reference's on {}: {}",
                        spec.name, set.label, report.reason
                    ));
                }
                checks.push(SetCheck {
                    set: format!("{label}-vs-reference"),
                    output: spec.name.to_string(),
                    report,
                });
            }
            set.clear_outputs(&mut *self.backend, Side::Reference)?;
            reference.clear_scratch(&mut *self.backend, i)?;
            if let Some(f) = self.check_inputs_unchanged(set)? {
                fail.get_or_insert(f);
            }
        }
        Ok(fail)
    }

    /// Runs the reference on set `i` (its outputs poisoned first) and waits for it: its
    /// outputs for a comparison, which the caller zeroes after.
    pub(crate) fn run_reference(
        &mut self,
        set: &DeviceSet,
        i: usize,
        reference: &Loaded,
    ) -> Result<(), BackendError> {
        set.reset_outputs(
            &mut *self.backend,
            self.problem,
            Side::Reference,
            OutputFill::Poison,
        )?;
        reference.run(&mut *self.backend, i)?;
        self.backend.synchronize()
    }

    /// The candidate's output `spec` (`cand`: what its check copied back) against the
    /// reference's on the same set. A row update copied back as its changed rows is compared
    /// on those rows when the reference's other rows are proven unchanged too (its report is
    /// then [`check_changed_rows`]'s against the reference's rows: `elements` counts the whole
    /// tensor, the norms are over the listed rows); otherwise both outputs are copied back whole.
    fn against_reference(
        &mut self,
        set: &DeviceSet,
        spec: &TensorSpec,
        cand: Copied,
    ) -> Result<CheckReport, BackendError> {
        let cand = match cand {
            Copied::ComparedOnDevice => return self.against_reference_on_device(set, spec),
            Copied::Nothing => None,
            Copied::Whole(got) => Some(got),
            Copied::ChangedRows(changed) => {
                if let Some(report) = self.changed_rows_against_reference(set, spec, &changed)? {
                    return Ok(report);
                }
                // The reference changed a row it must not: compare the whole outputs.
                let buf = set.outputs(Side::Candidate)[spec.name];
                Some(self.download_checked(set, &buf, spec)?)
            }
        };
        let buf = set.outputs(Side::Reference)[spec.name];
        let tol = self.problem.tolerance(spec);
        let expected = set.expected.get(spec.name);
        // The reference's output: proven to be the expected bytes, or copied back.
        let reference = match expected {
            Some(exp) if self.holds(&buf, exp)? => {
                if cand.is_none() {
                    // Both hold the expected bytes, so they are equal.
                    return Ok(CheckReport::proven_by_fingerprint(exp.elements));
                }
                None
            }
            _ => Some(self.download_checked(set, &buf, spec)?),
        };
        let expected_tensor = || {
            let exp = expected.expect("proven by the expected fingerprint");
            HostTensor::new(spec.dtype, vec![exp.elements], exp.bytes.clone())
                .map_err(|e| BackendError::Device(e.to_string()))
        };
        Ok(match (cand, reference) {
            (Some(cand), Some(reference)) => check_against(&cand, &reference, &tol),
            (Some(cand), None) => check_against(&cand, &expected_tensor()?, &tol),
            (None, Some(reference)) => check_against(&expected_tensor()?, &reference, &tol),
            (None, None) => unreachable!("returned above"),
        })
    }

    /// The candidate's changed rows `changed` of row-update output `spec` against the
    /// reference's, when the reference's other rows are proven unchanged (`None` when they are
    /// not, or the output has no [`ExpectedRows`]): the reference's update stands for the
    /// oracle's ([`RowsReference::Kernel`]).
    fn changed_rows_against_reference(
        &mut self,
        set: &DeviceSet,
        spec: &TensorSpec,
        changed: &[u8],
    ) -> Result<Option<CheckReport>, BackendError> {
        let (Some(exp), Some(OracleOutput::Rows(rows)), Ok(initial)) = (
            set.expected_rows.get(spec.name),
            set.oracle.get(spec.name),
            set.input.tensors.get(spec.name),
        ) else {
            return Ok(None);
        };
        let buf = set.outputs(Side::Reference)[spec.name];
        let Some(reference) = self.changed_rows(&buf, exp, rows)? else {
            return Ok(None);
        };
        let against = RowsReference::Kernel(&reference);
        let tol = self.problem.tolerance(spec);
        let mut report = check_changed_rows(changed, initial, rows, against, &tol);
        report.by_fingerprint = true;
        Ok(Some(report))
    }
}

#[cfg(test)]
mod tests;
