//! Tests of [`super`].
use super::super::inputs::ci_sets;
use super::super::load::load;
use super::*;
use crate::backend::emu::EmuBackend;
use crate::candidate::reference_candidate;
use bench_problems::check::{encode, poison_pattern};

#[test]
fn the_reference_passes_and_zeroed_outputs_or_a_written_input_are_caught() {
    let problem = bench_problems::find_problem("embedding_bag_sum").unwrap();
    let mut backend = EmuBackend::new();
    let sets = ci_sets(&mut backend, problem, 1);
    let ref_plan = reference_plan(&mut backend, problem, &sets);
    let reference = reference_candidate(problem);
    let check = |backend: &mut EmuBackend, side| {
        let plan = load(backend, &sets, &reference, side).unwrap();
        let mut v = Verifier { backend, problem };
        v.check_all(&sets, &plan, side, 0..0)
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
    assert_eq!(
        v.recheck(&sets, 0..sets.len(), &ref_plan, &mut checks)
            .unwrap(),
        None
    );
    let labels: Vec<&str> = checks.iter().map(|c| c.set.as_str()).collect();
    assert_eq!(
        labels,
        ["recheck-public-0", "recheck-public-0-vs-reference"]
    );

    // The candidate's output zeroed: wrong against the oracle and the reference's.
    v.backend
        .fill(&sets[0].outputs(Side::Candidate)["out"], &[0])
        .unwrap();
    let fail = v
        .recheck(&sets, 0..sets.len(), &ref_plan, &mut Vec::new())
        .unwrap()
        .unwrap();
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
/// reference's too), with the bytes the emulator copied back during the reference's check.
fn checked_both_sides(
    backend: &mut EmuBackend,
    problem: &'static dyn Problem,
    sets: &[DeviceSet],
) -> (Vec<SetCheck>, usize) {
    let reference = reference_candidate(problem);
    let run = |backend: &mut EmuBackend, side| {
        let plan = load(backend, sets, &reference, side).unwrap();
        let before = backend.downloaded_bytes();
        let mut v = Verifier {
            backend: &mut *backend,
            problem,
        };
        let (checks, fail) = v.check_all(sets, &plan, side, 0..0);
        assert!(fail.is_none(), "{}: {fail:?}", problem.name());
        (checks, backend.downloaded_bytes() - before)
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
        let ref_plan = reference_plan(&mut backend, problem, &sets);
        let outputs = output_specs(problem);
        assert_eq!(sets[0].expected.len(), outputs.len(), "{name}: all exact");
        let (checks, copied) = checked_both_sides(&mut backend, problem, &sets);
        assert_eq!(copied, 0, "{name}: nothing copied back");
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
        assert_eq!(
            v.recheck(&sets, 0..sets.len(), &ref_plan, &mut checks)
                .unwrap(),
            None
        );
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
    let ref_plan = reference_plan(&mut backend, problem, &sets);
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
    assert!(!report.passed && !report.by_fingerprint);
    assert!(matches!(copy, Copied::Whole(_)));
    assert!(
        report.reason.contains("integer elements differ"),
        "{}",
        report.reason
    );
    let fail = v
        .recheck(&sets, 0..sets.len(), &ref_plan, &mut Vec::new())
        .unwrap()
        .unwrap();
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
    assert_eq!(
        v.recheck(&sets, 0..sets.len(), &ref_plan, &mut checks)
            .unwrap(),
        None
    );
    assert!(checks.iter().all(|c| c.report.by_fingerprint));
}

#[test]
fn float_outputs_are_compared_on_the_device_with_the_host_checks_verdict() {
    for name in ["embedding_bag_sum", "embedding_bag_weighted_sum_bf16"] {
        let problem = bench_problems::find_problem(name).unwrap();
        let mut backend = EmuBackend::new();
        let sets = ci_sets(&mut backend, problem, 1);
        checked_both_sides(&mut backend, problem, &sets);
        let spec = output_specs(problem).into_iter().next().unwrap();
        let (set, dtype) = (&sets[0], spec.dtype);
        let buf = set.outputs(Side::Candidate)[spec.name];
        let reference = backend
            .download(&set.outputs(Side::Reference)[spec.name])
            .unwrap();
        let size = dtype.size_bytes();
        let n = reference.len() / size;
        let tol = problem.tolerance(&spec);
        let shape = shape_of(&spec, &set.input.sizes).unwrap();
        let as_tensor = |bytes: &[u8]| HostTensor::new(dtype, shape.clone(), bytes.to_vec());
        let set_element = |bytes: &mut Vec<u8>, i: usize, value: f64| {
            let e = encode(&OracleOutput::Float(vec![value]), dtype, vec![1]).unwrap();
            bytes[i * size..(i + 1) * size].copy_from_slice(&e.bytes);
        };
        let value_at = |bytes: &[u8], i: usize| as_tensor(bytes).unwrap().to_f64_vec()[i];
        // Variants of the candidate's output, each judged on the device and on the host.
        let mut variants: Vec<(&str, Vec<u8>)> = vec![("correct", reference.clone())];
        let mut poisoned = reference.clone();
        let poison = poison_pattern(dtype);
        for i in [3, n - 1] {
            poisoned[i * size..(i + 1) * size].copy_from_slice(&poison);
        }
        variants.push(("two unwritten", poisoned));
        let mut nan = reference.clone();
        set_element(&mut nan, n / 2, f64::NAN);
        variants.push(("a NaN", nan));
        let mut off = reference.clone();
        let v = value_at(&off, n / 3);
        set_element(&mut off, n / 3, v + 10.0);
        variants.push(("one far off", off));
        variants.push(("zeros", vec![0u8; reference.len()]));
        for (what, bytes) in variants {
            backend.upload(&buf, &bytes).unwrap();
            let before = backend.downloaded_bytes();
            let mut v = verifier(&mut backend, problem);
            let (device, copied) = v.check_one(set, Side::Candidate, &spec).unwrap();
            assert!(matches!(copied, Copied::ComparedOnDevice), "{name} {what}");
            let against = v.against_reference(set, &spec, copied).unwrap();
            let moved = backend.downloaded_bytes() - before;
            assert!(moved < 4096, "{name} {what}: {moved} bytes copied back");
            let got = as_tensor(&bytes).unwrap();
            let host = check_output_with(&got, &set.oracle[spec.name], &tol, Default::default());
            let host_against = check_against(&got, &as_tensor(&reference).unwrap(), &tol);
            for (device, host) in [(&device, &host), (&against, &host_against)] {
                let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs());
                assert_eq!(
                    (
                        device.passed,
                        device.unwritten,
                        device.non_finite,
                        device.worst_index
                    ),
                    (
                        host.passed,
                        host.unwritten,
                        host.non_finite,
                        host.worst_index
                    ),
                    "{name} {what}: {device:?} vs {host:?}"
                );
                assert!(close(device.rel_l2, host.rel_l2), "{name} {what}");
                assert!(close(device.max_scaled, host.max_scaled), "{name} {what}");
                assert_eq!(device.reason, host.reason, "{name} {what}");
            }
            assert_eq!(
                device.passed,
                what == "correct",
                "{name} {what}: {}",
                device.reason
            );
        }
    }
}

/// The reference's plan loaded on `sets` (the recheck runs it again).
fn reference_plan(
    backend: &mut EmuBackend,
    problem: &'static dyn Problem,
    sets: &[DeviceSet],
) -> Loaded {
    load(
        backend,
        sets,
        &reference_candidate(problem),
        Side::Reference,
    )
    .unwrap()
}

/// A verifier of `problem` on `backend` (for tests that look at the backend in between).
fn verifier<'a>(backend: &'a mut EmuBackend, problem: &'static dyn Problem) -> Verifier<'a> {
    Verifier { backend, problem }
}

/// The row-update oracle of output `name` of `set`.
fn rows_of<'a>(set: &'a DeviceSet, name: &str) -> &'a RowUpdate {
    match &set.oracle[name] {
        OracleOutput::Rows(rows) => rows,
        other => panic!("{name}: a row-update oracle expected, got {other:?}"),
    }
}

#[test]
fn in_place_rows_catch_a_changed_untouched_row_and_a_wrong_update() {
    let problem = bench_problems::find_problem("embedding_backward_rowwise_adagrad").unwrap();
    let mut backend = EmuBackend::new();
    let sets = ci_sets(&mut backend, problem, 1);
    let ref_plan = reference_plan(&mut backend, problem, &sets);
    let set = &sets[0];
    let outputs = output_specs(problem);
    let weight = outputs.iter().find(|s| s.name == "weight").unwrap();
    let buf = set.outputs(Side::Candidate)["weight"];
    let listed = rows_are_checked_like_the_whole_outputs(&mut backend, problem, &sets, &outputs);

    let rows = rows_of(set, "weight");
    let touched = rows.touched();
    let untouched = (0..rows.total_rows).rev().find(|&r| !touched[r]).unwrap();
    let correct = backend.download(&buf).unwrap();
    let case = InPlaceCase {
        problem,
        sets: &sets,
        ref_plan: &ref_plan,
        weight,
        buf,
        correct,
        untouched,
    };
    // The recheck copies back the listed rows of both sides, no table.
    let before = backend.downloaded_bytes();
    let mut checks = Vec::new();
    assert_eq!(
        verifier(&mut backend, problem)
            .recheck(&sets, 0..sets.len(), &ref_plan, &mut checks)
            .unwrap(),
        None
    );
    assert_eq!(backend.downloaded_bytes() - before, 2 * listed);
    assert_eq!(checks.len(), 2 * outputs.len());
    assert!(checks
        .iter()
        .all(|c| c.report.passed && c.report.by_fingerprint));

    case.a_changed_untouched_row_is_caught(&mut backend);
    case.a_wrong_listed_row_is_caught(&mut backend);
    case.a_reference_changing_an_untouched_row_is_caught(&mut backend);

    // No update at all (the initial table back): the update check fails.
    sets[0]
        .reset_outputs(&mut backend, problem, Side::Candidate, OutputFill::Keep)
        .unwrap();
    let fail = verifier(&mut backend, problem)
        .recheck(&sets, 0..sets.len(), &ref_plan, &mut Vec::new())
        .unwrap()
        .unwrap();
    assert!(fail.contains("the update of the"), "{fail}");
}

/// The bytes of the rows of output `name` of `set` that its row-update oracle lists (f32).
fn listed_bytes(set: &DeviceSet, name: &str) -> usize {
    let rows = rows_of(set, name);
    rows.rows.len() * rows.width * 4
}

/// Checks the reference on both sides of `sets` (one set, of an in-place problem with float
/// outputs) and asserts that the check takes the rows path, copies back only the listed rows
/// and reports what the full check of each whole output does; the listed rows' bytes.
fn rows_are_checked_like_the_whole_outputs(
    backend: &mut EmuBackend,
    problem: &'static dyn Problem,
    sets: &[DeviceSet],
    outputs: &[TensorSpec],
) -> usize {
    let set = &sets[0];
    assert!(
        set.expected.is_empty(),
        "float outputs: no exact fingerprint"
    );
    assert_eq!(
        set.expected_rows.len(),
        outputs.len(),
        "both take the rows path"
    );
    // A passing check copies back the listed rows of each output, not the tables.
    let listed: usize = outputs.iter().map(|s| listed_bytes(set, s.name)).sum();
    let buf = set.outputs(Side::Candidate)["weight"];
    assert!(
        listed_bytes(set, "weight") < buf.bytes / 4,
        "a small part of the table"
    );
    let (checks, copied) = checked_both_sides(backend, problem, sets);
    assert_eq!(copied, listed, "only the listed rows were copied back");
    assert!(checks
        .iter()
        .all(|c| c.report.passed && c.report.by_fingerprint));
    // Its reports are those of the full check of the whole output.
    for (c, spec) in checks.iter().zip(outputs) {
        let out = set.outputs(Side::Reference)[spec.name];
        let got = HostTensor::new(
            spec.dtype,
            shape_of(spec, &set.input.sizes).unwrap(),
            backend.download(&out).unwrap(),
        )
        .unwrap();
        let initial = set.input.tensors.get(spec.name).unwrap();
        let tol = problem.tolerance(spec);
        let full = bench_problems::check::check_rows(&got, initial, rows_of(set, spec.name), &tol);
        let r = &c.report;
        assert!(full.passed, "{}: {}", spec.name, full.reason);
        assert_eq!(r.elements, got.numel(), "the whole tensor is covered");
        assert_eq!(
            (
                r.elements,
                r.unwritten,
                r.non_finite,
                r.mismatches,
                r.worst_index
            ),
            (
                full.elements,
                full.unwritten,
                full.non_finite,
                full.mismatches,
                full.worst_index
            ),
            "{}",
            spec.name
        );
        assert!((r.rel_l2 - full.rel_l2).abs() <= 1e-9 * full.rel_l2.max(1e-30));
        assert!((r.max_scaled - full.max_scaled).abs() <= 1e-9 * full.max_scaled.max(1e-30));
    }
    listed
}

/// What the later stages of `in_place_rows_catch_a_changed_untouched_row_and_a_wrong_update`
/// share: its problem, its one ci set and the reference's plan, the `weight` output with the
/// candidate's buffer of it and the table's correct contents after the step, and the last row
/// no lookup touches.
struct InPlaceCase<'a> {
    problem: &'static dyn Problem,
    sets: &'a [DeviceSet],
    ref_plan: &'a Loaded,
    weight: &'a TensorSpec,
    buf: Buffer,
    correct: Vec<u8>,
    untouched: usize,
}

impl InPlaceCase<'_> {
    /// One ulp in a row no lookup touches: the proof fails, the full check names the row.
    fn a_changed_untouched_row_is_caught(&self, backend: &mut EmuBackend) {
        let (problem, sets, set) = (self.problem, self.sets, &self.sets[0]);
        let (untouched, width) = (self.untouched, rows_of(set, "weight").width);
        let mut changed = self.correct.clone();
        changed[untouched * width * 4] ^= 1;
        backend.upload(&self.buf, &changed).unwrap();
        let (report, copy) = verifier(backend, problem)
            .check_one(set, Side::Candidate, self.weight)
            .unwrap();
        assert!(!report.passed && !report.by_fingerprint);
        assert!(matches!(copy, Copied::Whole(_)), "copied back whole");
        let named = format!("first: row {untouched}");
        assert!(
            report.reason.contains(&named) && report.reason.contains("bit-identical"),
            "{}",
            report.reason
        );
        let fail = verifier(backend, problem)
            .recheck(sets, 0..sets.len(), self.ref_plan, &mut Vec::new())
            .unwrap()
            .unwrap();
        assert!(fail.contains("`weight`") && fail.contains(&named), "{fail}");
    }

    /// One listed row a little off, the rest right: caught on the listed rows alone, by the
    /// check against the oracle and by the recheck against the reference's rows.
    fn a_wrong_listed_row_is_caught(&self, backend: &mut EmuBackend) {
        let (problem, sets, set) = (self.problem, self.sets, &self.sets[0]);
        let rows = rows_of(set, "weight");
        let mut off = self.correct.clone();
        let row = rows.rows[rows.rows.len() / 2] as usize;
        for e in off[row * rows.width * 4..(row + 1) * rows.width * 4].chunks_mut(4) {
            let x = f32::from_le_bytes(e.try_into().unwrap());
            e.copy_from_slice(&(x + 1e-3).to_le_bytes());
        }
        backend.upload(&self.buf, &off).unwrap();
        let before = backend.downloaded_bytes();
        let (report, copy) = verifier(backend, problem)
            .check_one(set, Side::Candidate, self.weight)
            .unwrap();
        assert_eq!(
            backend.downloaded_bytes() - before,
            listed_bytes(set, "weight")
        );
        assert!(matches!(copy, Copied::ChangedRows(_)));
        assert!(!report.passed && report.by_fingerprint);
        assert!(
            report.reason.contains("the update of the"),
            "{}",
            report.reason
        );
        let mut checks = Vec::new();
        let fail = verifier(backend, problem)
            .recheck(sets, 0..sets.len(), self.ref_plan, &mut checks)
            .unwrap()
            .unwrap();
        assert!(
            fail.starts_with("timed output differs from the oracle"),
            "{fail}"
        );
        let vs_reference = checks
            .iter()
            .find(|c| c.set == "recheck-public-0-vs-reference" && c.output == "weight")
            .unwrap();
        let r = &vs_reference.report;
        assert!(!r.passed && r.by_fingerprint, "{r:?}");
        assert!(r.reason.contains("the update of the"), "{}", r.reason);
        assert_eq!(r.worst_index.map(|i| i / rows.width), Some(row));
    }

    /// A reference that changed a row it must not: the whole outputs are compared. Leaves
    /// both sides' tables correct.
    fn a_reference_changing_an_untouched_row_is_caught(&self, backend: &mut EmuBackend) {
        let (problem, set) = (self.problem, &self.sets[0]);
        let (untouched, width) = (self.untouched, rows_of(set, "weight").width);
        let correct = &self.correct;
        backend.upload(&self.buf, correct).unwrap();
        let reference = set.outputs(Side::Reference)["weight"];
        let mut wrong = correct.clone();
        for e in wrong[untouched * width * 4..(untouched + 1) * width * 4].chunks_mut(4) {
            e.copy_from_slice(&100f32.to_le_bytes());
        }
        backend.upload(&reference, &wrong).unwrap();
        let (report, copy) = verifier(backend, problem)
            .check_one(set, Side::Candidate, self.weight)
            .unwrap();
        assert!(report.passed && matches!(copy, Copied::ChangedRows(_)));
        let r = verifier(backend, problem)
            .against_reference(set, self.weight, copy)
            .unwrap();
        assert!(!r.passed && !r.by_fingerprint, "{r:?}");
        assert_eq!(r.worst_index.map(|i| i / width), Some(untouched));
        backend.upload(&reference, correct).unwrap();
    }
}

#[test]
fn a_timed_in_place_update_is_checked_as_a_change_against_the_references() {
    let problem = bench_problems::find_problem("embedding_backward_rowwise_adagrad").unwrap();
    let mut backend = EmuBackend::new();
    let sets = ci_sets(&mut backend, problem, 1);
    let set = &sets[0];
    checked_both_sides(&mut backend, problem, &sets);
    assert!(verifier(&mut backend, problem).timed_check_needs_reference(set));
    // Both sides hold the reference's step: the timed check passes.
    let pass = verifier(&mut backend, problem)
        .check_timed(set, "timed run 1 on public-0")
        .unwrap();
    assert_eq!(pass, None);
    // The candidate's table as it was (no update): off against the reference's change.
    set.reset_outputs(&mut backend, problem, Side::Candidate, OutputFill::Keep)
        .unwrap();
    let fail = verifier(&mut backend, problem)
        .check_timed(set, "timed run 2 on public-0")
        .unwrap()
        .expect("no update fails");
    assert!(
        fail.starts_with("timed run 2 on public-0: output `weight`: the update is off"),
        "{fail}"
    );
    // Half the step on every changed element: off as well.
    let weight = set.outputs(Side::Candidate)["weight"];
    let reference = set.outputs(Side::Reference)["weight"];
    let (new, old) = (
        backend.download(&reference).unwrap(),
        backend.download(&set.pristine["weight"]).unwrap(),
    );
    let half: Vec<u8> = new
        .chunks_exact(4)
        .zip(old.chunks_exact(4))
        .flat_map(|(n, o)| {
            let (n, o) = (
                f32::from_le_bytes(n.try_into().unwrap()),
                f32::from_le_bytes(o.try_into().unwrap()),
            );
            (o + (n - o) * 0.5).to_le_bytes()
        })
        .collect();
    backend.upload(&weight, &half).unwrap();
    let fail = verifier(&mut backend, problem)
        .check_timed(set, "timed run 3 on public-0")
        .unwrap()
        .expect("half the step fails");
    assert!(fail.contains("the update is off"), "{fail}");
}
