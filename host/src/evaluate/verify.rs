//! Checking a loaded plan (DESIGN §6). Before each checked run every output gets the poison
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
//! passes there). Float outputs are copied back once per check and compared in parallel; an
//! in-place output with a row-update oracle is checked against its initial value
//! ([`bench_problems::check::check_rows`]).
use super::inputs::{input_specs, output_specs, DeviceSet, Side};
use super::load::Loaded;
use crate::activity::CandidateRun;
use crate::backend::{host_fingerprint, Backend, BackendError, Buffer};
use crate::record::{SetCheck, Status};
use bench_problems::check::{check_against, check_output_with, encode, poison_pattern};
use bench_problems::spec::shape_of;
use bench_problems::{CheckContext, CheckReport, OracleOutput, Problem, Role, TensorSpec};
use data_gen::HostTensor;
use rayon::prelude::*;
use std::collections::BTreeMap;

/// Scratch buffers are filled with this byte before every checked run.
const SCRATCH_POISON: u8 = 0xA5;

/// What a correct kernel leaves in one exact output: the checked part's bytes and the
/// fingerprint of their whole 32-bit words (any 1–3 trailing bytes are compared as bytes).
pub(super) struct Expected {
    /// Elements checked (the valid prefix, or all).
    pub elements: usize,
    /// The oracle encoded to the output's dtype.
    pub bytes: Vec<u8>,
    /// [`host_fingerprint`] of `bytes[..4 * words]`.
    pub fingerprint: u64,
}

impl Expected {
    fn words(&self) -> usize {
        self.bytes.len() / 4
    }

    fn tail(&self) -> &[u8] {
        &self.bytes[4 * self.words()..]
    }
}

/// The elements of `spec`'s output the check covers: all of them, or the valid prefix (the
/// oracle's length, for a `checked_prefix` output).
fn checked_elements(
    problem: &dyn Problem,
    spec: &TensorSpec,
    oracle: &OracleOutput,
    numel: usize,
) -> usize {
    if problem.checked_prefix(spec.name) && oracle.len() < numel {
        oracle.len()
    } else {
        numel
    }
}

/// The [`Expected`] bytes of every output of `set` that can be checked by fingerprint: exact
/// tolerance, no custom check, an oracle of the output's length (or its valid prefix), and no
/// expected element equal to the poison pattern (else an element the kernel never wrote would
/// hold the right bytes and pass unseen: such an output takes the full check every time).
pub(super) fn expected_outputs(
    problem: &dyn Problem,
    set: &DeviceSet,
) -> anyhow::Result<BTreeMap<String, Expected>> {
    let mut expected = BTreeMap::new();
    for spec in output_specs(problem) {
        let oracle = &set.oracle[spec.name];
        if !problem.tolerance(&spec).exact
            || problem.custom_checked(spec.name)
            || matches!(oracle, OracleOutput::Rows(_))
        {
            continue;
        }
        let numel: usize = shape_of(&spec, &set.input.sizes)?.iter().product();
        let elements = checked_elements(problem, &spec, oracle, numel);
        if oracle.len() != elements {
            continue; // the full check says what is wrong with this oracle
        }
        let Ok(want) = encode(oracle, spec.dtype, vec![elements]) else {
            continue;
        };
        let poison = poison_pattern(spec.dtype);
        if want.bytes.par_chunks(poison.len()).any(|e| e == poison) {
            continue;
        }
        let words = want.bytes.len() / 4;
        let fingerprint = host_fingerprint(&want.bytes[..4 * words]);
        expected.insert(
            spec.name.to_string(),
            Expected {
                elements,
                bytes: want.bytes.into_vec(),
                fingerprint,
            },
        );
    }
    Ok(expected)
}

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
        let (fail, _) = self.check_outputs(set, side, &set.label, checks)?;
        if fail.is_some() {
            return Ok(fail);
        }
        self.check_inputs_unchanged(set)
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

    /// Checks `side`'s output `spec` of `set` against the oracle: by fingerprint when it is an
    /// exact one whose bytes agree (nothing copied back: `None`), else copied back (its checked
    /// part, returned) and checked in full.
    fn check_one(
        &mut self,
        set: &DeviceSet,
        side: Side,
        spec: &TensorSpec,
    ) -> Result<(CheckReport, Option<HostTensor>), BackendError> {
        let buf = set.outputs(side)[spec.name];
        let expected = set.expected.get(spec.name);
        if let Some(exp) = expected {
            if self.holds(&buf, exp)? {
                return Ok((CheckReport::proven_by_fingerprint(exp.elements), None));
            }
        }
        let oracle = &set.oracle[spec.name];
        let got = self.download_checked(set, &buf, spec)?;
        let initial = match spec.role {
            Role::InOut => set.input.tensors.get(spec.name).ok(),
            _ => None,
        };
        let ctx = CheckContext {
            encoded: expected.map(|e| &e.bytes[..]),
            initial,
        };
        let mut report = check_output_with(&got, oracle, &self.problem.tolerance(spec), ctx);
        if report.passed {
            if let Some(reason) = self.problem.custom_check(spec, &got, &set.input) {
                report.passed = false;
                report.reason = reason;
            }
        }
        Ok((report, Some(got)))
    }

    /// Checks `side`'s outputs against the set's oracle; records a check per output under
    /// `label` and returns the first failure, with each output as copied back (`None` where
    /// its fingerprint proved it).
    fn check_outputs(
        &mut self,
        set: &DeviceSet,
        side: Side,
        label: &str,
        checks: &mut Vec<SetCheck>,
    ) -> Result<(Option<String>, Vec<Option<HostTensor>>), BackendError> {
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
    ///
    /// An exact output whose fingerprint equals the expected one, on both sides, is proven
    /// equal to the oracle and to the reference's without a copy; any other output is copied
    /// back once per side (the reference's only for the comparison with it).
    pub fn recheck(
        &mut self,
        sets: &[DeviceSet],
        checks: &mut Vec<SetCheck>,
    ) -> Result<Option<String>, BackendError> {
        let mut fail = None;
        for set in sets {
            let label = format!("recheck-{}", set.label);
            let (f, copies) = self.check_outputs(set, Side::Candidate, &label, checks)?;
            if let Some(f) = f {
                fail.get_or_insert(format!("timed output differs from the oracle: {f}"));
            }
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
            if let Some(f) = self.check_inputs_unchanged(set)? {
                fail.get_or_insert(f);
            }
        }
        Ok(fail)
    }

    /// The candidate's output `spec` (`cand` as copied back, or `None` where its fingerprint
    /// proved it holds the expected bytes) against the reference's on the same set.
    fn against_reference(
        &mut self,
        set: &DeviceSet,
        spec: &TensorSpec,
        cand: Option<HostTensor>,
    ) -> Result<CheckReport, BackendError> {
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

    /// The reference checked on `sets` (both sides, so the candidate's outputs hold the
    /// reference's too), with the emulator's downloads during the reference's check.
    fn checked_both_sides(
        backend: &mut EmuBackend,
        problem: &'static dyn Problem,
        sets: &[DeviceSet],
    ) -> (Vec<SetCheck>, usize) {
        let reference = reference_candidate(problem);
        let run = |backend: &mut EmuBackend, side| {
            let plan = load(backend, sets, &reference, side).unwrap();
            let before = backend.downloads();
            let mut v = Verifier {
                backend: &mut *backend,
                problem,
            };
            let (checks, fail) = v.check_all(sets, &plan, side);
            assert!(fail.is_none(), "{}: {fail:?}", problem.name());
            (checks, backend.downloads() - before)
        };
        let out = run(backend, Side::Reference);
        run(backend, Side::Candidate);
        out
    }

    #[test]
    fn exact_outputs_pass_by_fingerprint_without_a_download() {
        for name in ["kjt_permute", "unique_indices"] {
            let problem = bench_problems::find_problem(name).unwrap();
            let mut backend = EmuBackend::new();
            let sets = ci_sets(&mut backend, problem, 1);
            let outputs = output_specs(problem);
            assert_eq!(sets[0].expected.len(), outputs.len(), "{name}: all exact");
            let (checks, downloads) = checked_both_sides(&mut backend, problem, &sets);
            assert_eq!(downloads, 0, "{name}: nothing copied back");
            for (c, spec) in checks.iter().zip(&outputs) {
                let exp = &sets[0].expected[spec.name];
                assert!(c.report.passed && c.report.by_fingerprint, "{name}");
                assert_eq!(c.report.elements, exp.elements);
                assert_eq!((c.report.unwritten, c.report.mismatches), (0, 0));
                // What was fingerprinted is what the reference wrote (the checked part).
                let buf = sets[0].outputs(Side::Reference)[spec.name];
                let got = backend.download(&buf).unwrap();
                assert_eq!(
                    got[..exp.bytes.len()],
                    exp.bytes[..],
                    "{name} {}",
                    spec.name
                );
            }
            if name == "unique_indices" {
                let unique = &sets[0].expected["unique"];
                let numel = sets[0].input.sizes["N"] as usize;
                assert!(unique.elements < numel, "only the valid prefix is expected");
            }
            // The recheck of exact outputs copies nothing back either, on either side.
            let before = backend.downloads();
            let mut v = Verifier {
                backend: &mut backend,
                problem,
            };
            let mut checks = Vec::new();
            assert_eq!(v.recheck(&sets, &mut checks).unwrap(), None);
            assert_eq!(
                backend.downloads(),
                before,
                "{name}: the recheck downloads nothing"
            );
            assert_eq!(checks.len(), 2 * outputs.len());
            assert!(checks
                .iter()
                .all(|c| c.report.passed && c.report.by_fingerprint));
            assert!(checks[outputs.len()..]
                .iter()
                .all(|c| c.set == "recheck-public-0-vs-reference"));
        }
    }

    #[test]
    fn a_zeroed_or_partly_written_exact_output_fails_with_the_full_message() {
        let problem = bench_problems::find_problem("kjt_permute").unwrap();
        let mut backend = EmuBackend::new();
        let sets = ci_sets(&mut backend, problem, 1);
        checked_both_sides(&mut backend, problem, &sets);
        let values = output_specs(problem)
            .into_iter()
            .find(|s| s.name == "permuted_values")
            .unwrap();
        let buf = sets[0].outputs(Side::Candidate)["permuted_values"];
        let correct = backend.download(&buf).unwrap();
        let mut v = Verifier {
            backend: &mut backend,
            problem,
        };

        // Zeroed: the fingerprint differs, the full check says how.
        v.backend.fill(&buf, &[0]).unwrap();
        let (report, copy) = v.check_one(&sets[0], Side::Candidate, &values).unwrap();
        assert!(!report.passed && !report.by_fingerprint && copy.is_some());
        assert!(
            report.reason.contains("integer elements differ"),
            "{}",
            report.reason
        );
        let fail = v.recheck(&sets, &mut Vec::new()).unwrap().unwrap();
        assert!(
            fail.starts_with(
                "timed output differs from the oracle: recheck-public-0, output `permuted_values`"
            ),
            "{fail}"
        );

        // Half written, the rest poison: unwritten elements, the first one named.
        let mut half = correct.clone();
        let poison = poison_pattern(values.dtype);
        let n = half.len() / 8;
        for e in half[(n / 2) * 8..].chunks_mut(8) {
            e.copy_from_slice(&poison);
        }
        v.backend.upload(&buf, &half).unwrap();
        let (report, _) = v.check_one(&sets[0], Side::Candidate, &values).unwrap();
        assert!(!report.passed);
        assert_eq!(report.unwritten, n - n / 2);
        assert_eq!(report.worst_index, Some(n / 2));
        assert!(report.reason.contains("never written"), "{}", report.reason);

        // Restored: passes by fingerprint again, against the reference's too.
        v.backend.upload(&buf, &correct).unwrap();
        let mut checks = Vec::new();
        assert_eq!(v.recheck(&sets, &mut checks).unwrap(), None);
        assert!(checks.iter().all(|c| c.report.by_fingerprint));
    }

    #[test]
    fn in_place_rows_catch_a_changed_untouched_row_and_a_wrong_update() {
        let problem = bench_problems::find_problem("embedding_backward_rowwise_adagrad").unwrap();
        let mut backend = EmuBackend::new();
        let sets = ci_sets(&mut backend, problem, 1);
        assert!(
            sets[0].expected.is_empty(),
            "float outputs: no fingerprint path"
        );
        let (checks, _) = checked_both_sides(&mut backend, problem, &sets);
        assert!(checks
            .iter()
            .all(|c| c.report.passed && !c.report.by_fingerprint));
        let OracleOutput::Rows(rows) = &sets[0].oracle["weight"] else {
            panic!("a row-update oracle")
        };
        let touched = rows.touched();
        let untouched = (0..rows.total_rows).rev().find(|&r| !touched[r]).unwrap();
        let buf = sets[0].outputs(Side::Candidate)["weight"];
        let correct = backend.download(&buf).unwrap();
        let mut v = Verifier {
            backend: &mut backend,
            problem,
        };
        let mut checks = Vec::new();
        assert_eq!(v.recheck(&sets, &mut checks).unwrap(), None);
        assert_eq!(checks.len(), 4);

        // One ulp in a row no lookup touches.
        let mut changed = correct.clone();
        changed[untouched * rows.width * 4] ^= 1;
        v.backend.upload(&buf, &changed).unwrap();
        let fail = v.recheck(&sets, &mut Vec::new()).unwrap().unwrap();
        assert!(
            fail.contains("weight") && fail.contains("bit-identical"),
            "{fail}"
        );

        // No update at all (the initial table back): the update check fails.
        v.backend.upload(&buf, &correct).unwrap();
        sets[0]
            .reset_outputs(&mut *v.backend, problem, Side::Candidate, false)
            .unwrap();
        let fail = v.recheck(&sets, &mut Vec::new()).unwrap().unwrap();
        assert!(fail.contains("the update of the"), "{fail}");
    }
}
