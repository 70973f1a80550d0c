//! Checking a loaded plan (DESIGN §6). Before each checked run every output gets the poison
//! pattern (in-out tensors their initial value) and every scratch buffer [`SCRATCH_POISON`];
//! after it, each output is compared with the oracle (only the valid prefix where the problem
//! says so) and the problem's own check, and the inputs must be bit-identical to their upload.
//! [`Verifier::recheck`] checks what the timed runs left, against the oracle and against the
//! reference's outputs on the same inputs.
use super::inputs::{input_specs, output_specs, DeviceSet, Side};
use super::load::Loaded;
use crate::activity::CandidateRun;
use crate::backend::{Backend, BackendError, Buffer};
use crate::record::{SetCheck, Status};
use bench_problems::check::check_output;
use bench_problems::spec::shape_of;
use bench_problems::{OracleOutput, Problem, TensorSpec};
use data_gen::HostTensor;

/// Scratch buffers are filled with this byte before every checked run.
const SCRATCH_POISON: u8 = 0xA5;

/// Checks plans of one problem on its device sets.
pub(super) struct Verifier<'a> {
    pub backend: &'a mut dyn Backend,
    pub problem: &'static dyn Problem,
}

impl Verifier<'_> {
    /// Runs `plan` once on every set with poisoned outputs and checks outputs and inputs; stops
    /// at the first set that fails.
    pub fn check_all(
        &mut self,
        sets: &[DeviceSet],
        plan: &Loaded,
        side: Side,
    ) -> (Vec<SetCheck>, Option<(Status, String)>) {
        let mut checks = Vec::new();
        for (i, set) in sets.iter().enumerate() {
            match self.check_set(set, i, plan, side, &mut checks) {
                Ok(None) => {}
                Ok(Some(fail)) => return (checks, Some((Status::Incorrect, fail))),
                Err(e) => {
                    let msg = format!("on {}: {e}", set.label);
                    return (checks, Some((Status::RuntimeError, msg)));
                }
            }
        }
        (checks, None)
    }

    /// One poisoned run of the plan bound for set `i`, then its checks.
    fn check_set(
        &mut self,
        set: &DeviceSet,
        i: usize,
        plan: &Loaded,
        side: Side,
        checks: &mut Vec<SetCheck>,
    ) -> Result<Option<String>, BackendError> {
        set.reset_outputs(&mut *self.backend, self.problem, side, true)?;
        for s in &plan.scratch {
            self.backend.fill(s, &[SCRATCH_POISON])?;
        }
        {
            let _running = CandidateRun::start(side == Side::Candidate);
            plan.run(&mut *self.backend, i)?;
            self.backend.synchronize()?;
        }
        let fail = self.check_outputs(set, side, &set.label, checks)?;
        if fail.is_some() {
            return Ok(fail);
        }
        self.check_inputs_unchanged(set)
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
            bytes: got.bytes[..n * got.dtype.size_bytes()].to_vec().into(),
        }
    }

    /// Downloads `side`'s outputs and checks them against the set's oracle; records a check per
    /// output under `label` and returns the first failure.
    fn check_outputs(
        &mut self,
        set: &DeviceSet,
        side: Side,
        label: &str,
        checks: &mut Vec<SetCheck>,
    ) -> Result<Option<String>, BackendError> {
        let mut fail = None;
        for spec in output_specs(self.problem) {
            let got = self.download_tensor(set, &set.outputs(side)[spec.name], &spec)?;
            let oracle = &set.oracle[spec.name];
            let got = self.checked_part(&spec, oracle, got);
            let mut report = check_output(&got, oracle, &self.problem.tolerance(&spec));
            if report.passed {
                if let Some(reason) = self.problem.custom_check(&spec, &got, &set.input) {
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
        set: &DeviceSet,
        buf: &Buffer,
        spec: &TensorSpec,
    ) -> Result<HostTensor, BackendError> {
        let bytes = self.backend.download(buf)?;
        let shape =
            shape_of(spec, &set.input.sizes).map_err(|e| BackendError::Device(e.to_string()))?;
        HostTensor::new(spec.dtype, shape, bytes).map_err(|e| BackendError::Device(e.to_string()))
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
            let first = now
                .iter()
                .zip(original.iter())
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            return Ok(Some(format!(
                "{}: input `{}` was modified (first changed byte {first})",
                set.label, spec.name
            )));
        }
        Ok(None)
    }

    /// After timing, with no poison in between: checks the candidate's outputs on `sets` (the
    /// timed ones) against the oracle and against the reference's outputs on the same inputs,
    /// and the inputs once more. Appends its checks and returns the first failure.
    pub fn recheck(
        &mut self,
        sets: &[DeviceSet],
        checks: &mut Vec<SetCheck>,
    ) -> Result<Option<String>, BackendError> {
        let mut fail = None;
        for set in sets {
            let label = format!("recheck-{}", set.label);
            if let Some(f) = self.check_outputs(set, Side::Candidate, &label, checks)? {
                fail.get_or_insert(format!("timed output differs from the oracle: {f}"));
            }
            for spec in output_specs(self.problem) {
                let oracle = &set.oracle[spec.name];
                let outputs = |side| set.outputs(side)[spec.name];
                let cand = self.download_tensor(set, &outputs(Side::Candidate), &spec)?;
                let cand = self.checked_part(&spec, oracle, cand);
                let reference = self.download_tensor(set, &outputs(Side::Reference), &spec)?;
                let reference = self.checked_part(&spec, oracle, reference);
                let as_oracle = if spec.dtype.is_float() {
                    OracleOutput::Float(reference.to_f64_vec())
                } else {
                    OracleOutput::Int(reference.to_i64_vec().unwrap_or_default())
                };
                let report = check_output(&cand, &as_oracle, &self.problem.tolerance(&spec));
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
            if let Some(f) = self.check_inputs_unchanged(set)? {
                fail.get_or_insert(f);
            }
        }
        Ok(fail)
    }
}

#[cfg(test)]
mod tests {
    use super::super::inputs::ci_sets;
    use super::super::load::load;
    use super::*;
    use crate::backend::emu::EmuBackend;
    use crate::candidate::reference_candidate;

    #[test]
    fn the_reference_passes_and_zeroed_outputs_or_a_written_input_are_caught() {
        let problem = bench_problems::find_problem("embedding_bag_sum").unwrap();
        let mut backend = EmuBackend::new();
        let sets = ci_sets(&mut backend, problem, 1);
        let reference = reference_candidate(problem);
        let check = |backend: &mut EmuBackend, side| {
            let plan = load(backend, &sets, &reference, side).unwrap();
            let mut v = Verifier { backend, problem };
            v.check_all(&sets, &plan, side)
        };
        let (checks, fail) = check(&mut backend, Side::Reference);
        assert!(fail.is_none(), "{fail:?}");
        assert_eq!(checks.len(), output_specs(problem).len());
        assert!(checks
            .iter()
            .all(|c| c.set == "public-0" && c.report.passed));
        let (_, fail) = check(&mut backend, Side::Candidate);
        assert!(fail.is_none(), "{fail:?}");

        // Both sides now hold the reference's outputs: the recheck passes.
        let mut v = Verifier {
            backend: &mut backend,
            problem,
        };
        let mut checks = Vec::new();
        assert_eq!(v.recheck(&sets, &mut checks).unwrap(), None);
        let labels: Vec<&str> = checks.iter().map(|c| c.set.as_str()).collect();
        assert_eq!(
            labels,
            ["recheck-public-0", "recheck-public-0-vs-reference"]
        );

        // The candidate's output zeroed: wrong against the oracle and the reference's.
        v.backend
            .fill(&sets[0].outputs(Side::Candidate)["out"], &[0])
            .unwrap();
        let fail = v.recheck(&sets, &mut Vec::new()).unwrap().unwrap();
        assert!(
            fail.starts_with("timed output differs from the oracle"),
            "{fail}"
        );

        // An input written: caught by its fingerprint, with the first changed byte.
        v.backend.fill(&sets[0].inputs["offsets"], &[0xFF]).unwrap();
        let fail = v.check_inputs_unchanged(&sets[0]).unwrap().unwrap();
        assert_eq!(
            fail,
            "public-0: input `offsets` was modified (first changed byte 0)"
        );
    }
}
