//! The degenerate-output self-test every problem must pass: its oracle output is not
//! near-constant and changes with the seed, the correct output passes the check, and zeros, a
//! constant, an output with only 0.3% of its elements written (the rest poison, or the rest
//! zeros) and an in-place output left unchanged all fail. Each problem's tests call [`self_test`] at `ci` size.
//!
//! [`degenerate_verdicts`] builds the same degenerate outputs and says what our check and
//! KernelBench's `allclose` ([`crate::allclose`], at atol = rtol = 1e-2 and 1e-4) make of each;
//! [`allclose_table`] renders that for a list of problems as markdown (`dlrm-bench selftest
//! --allclose`).
use crate::allclose::allclose;
use crate::check::{check_output_with, encode, CheckContext, CheckReport, Tolerance};
use crate::spec::{
    poisoned, shape_of, InputSet, Oracle, OracleOutput, Preset, Problem, Role, TensorSpec,
};
use data_gen::{DType, HostTensor};

/// Runs the self-test; `Err` says which part failed.
pub fn self_test(problem: &dyn Problem, preset: Preset) -> Result<(), String> {
    let sets = Sets::generate(problem, preset)?;
    for case in sets.output_cases(problem)? {
        let name = case.spec.name;
        let reference = &case.reference;
        let other = sets
            .oracle_b
            .get(name)
            .map(|o| o.densified(sets.b.tensors.get(name).ok()))
            .transpose()?;
        if let (OracleOutput::Float(x), Some(OracleOutput::Float(y))) = (reference, &other) {
            let (lo, hi) = x
                .iter()
                .fold((f64::MAX, f64::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
            if hi - lo <= 1e-3 * hi.abs().max(lo.abs()).max(1e-30) {
                return Err(format!(
                    "{name}: oracle output is near-constant ({lo}..{hi})"
                ));
            }
            if x.len() == y.len() {
                let diff: f64 = x
                    .iter()
                    .zip(y)
                    .map(|(p, q)| (p - q) * (p - q))
                    .sum::<f64>()
                    .sqrt();
                let norm: f64 = x.iter().map(|p| p * p).sum::<f64>().sqrt();
                if diff <= 0.1 * norm {
                    return Err(format!(
                        "{name}: oracle output barely changes with the seed"
                    ));
                }
            }
        }
        let correct = case.correct()?;
        let rep = case.ours(&correct);
        if !rep.passed {
            return Err(format!(
                "{name}: the correct output fails the check: {}",
                rep.reason
            ));
        }
        for (what, out) in case.degenerate(&correct, &sets.a)? {
            if case.ours(&out).passed {
                return Err(format!("{name}: {what} passes the check"));
            }
        }
    }
    Ok(())
}

/// What our check and KernelBench's `allclose` say of one degenerate output.
#[derive(Clone, Debug, PartialEq)]
pub struct DegenerateVerdict {
    /// The output tensor's name and dtype.
    pub output: &'static str,
    pub dtype: DType,
    /// Which degenerate output: "all zeros", "a constant", "0.3% written, rest poison",
    /// "0.3% written, rest zeros", and for an in-place output "initial value, unchanged".
    pub what: &'static str,
    /// Largest |oracle| over the checked elements (what an absolute tolerance is measured
    /// against).
    pub ref_max_abs: f64,
    /// Whether our check passed it (never: [`self_test`] fails otherwise), and why not.
    pub ours_passed: bool,
    pub ours_reason: String,
    /// `torch.allclose(out, ref, atol=rtol=1e-2)`, and at 1e-4.
    pub allclose_1e2: bool,
    pub allclose_1e4: bool,
}

/// The degenerate outputs [`self_test`] builds for `problem` at `preset` (input set of seed
/// 11), one verdict each, in signature order: our check (against the oracle as the runner
/// checks it) and `allclose` (against the oracle's dense value, on the same checked elements).
pub fn degenerate_verdicts(
    problem: &dyn Problem,
    preset: Preset,
) -> Result<Vec<DegenerateVerdict>, String> {
    let sets = Sets::generate(problem, preset)?;
    let mut verdicts = Vec::new();
    for case in sets.output_cases(problem)? {
        let correct = case.correct()?;
        let ref_max_abs = match &case.reference {
            OracleOutput::Float(v) => v.iter().fold(0.0f64, |m, x| m.max(x.abs())),
            OracleOutput::Int(v) => v.iter().fold(0.0f64, |m, &x| m.max((x as f64).abs())),
            OracleOutput::Rows(_) => unreachable!("densified"),
        };
        for (what, out) in case.degenerate(&correct, &sets.a)? {
            let ours = case.ours(&out);
            let close = |tol| allclose(&out, &case.reference, None, tol, tol);
            verdicts.push(DegenerateVerdict {
                output: case.spec.name,
                dtype: case.spec.dtype,
                what,
                ref_max_abs,
                ours_passed: ours.passed,
                ours_reason: ours.reason,
                allclose_1e2: close(1e-2)?,
                allclose_1e4: close(1e-4)?,
            });
        }
    }
    Ok(verdicts)
}

/// A markdown table of [`degenerate_verdicts`] for `problems` at `preset` (one row per
/// problem, output and degenerate output), then one line counting what each test accepts.
pub fn allclose_table(problems: &[&dyn Problem], preset: Preset) -> Result<String, String> {
    let yes_no = |passed: bool| if passed { "passes" } else { "fails" };
    let mut text = String::from(
        "| # | problem | output | degenerate output | max \\|ref\\| | ours | allclose 1e-2 | allclose 1e-4 |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    let (mut rows, mut ours, mut at_1e2, mut at_1e4) = (0, 0, 0, 0);
    let mut problems_1e2 = Vec::new();
    for problem in problems {
        let verdicts = degenerate_verdicts(*problem, preset)
            .map_err(|e| format!("{}: {e}", problem.name()))?;
        for v in &verdicts {
            text += &format!(
                "| {} | {} | `{}` ({}) | {} | {:.3e} | {} | {} | {} |\n",
                problem.number(),
                problem.name(),
                v.output,
                v.dtype.name(),
                v.what,
                v.ref_max_abs,
                yes_no(v.ours_passed),
                yes_no(v.allclose_1e2),
                yes_no(v.allclose_1e4),
            );
        }
        rows += verdicts.len();
        ours += verdicts.iter().filter(|v| v.ours_passed).count();
        at_1e2 += verdicts.iter().filter(|v| v.allclose_1e2).count();
        at_1e4 += verdicts.iter().filter(|v| v.allclose_1e4).count();
        if verdicts.iter().any(|v| v.allclose_1e2) {
            problems_1e2.push(problem.name());
        }
    }
    let list = if problems_1e2.is_empty() {
        String::new()
    } else {
        format!(" ({})", problems_1e2.join(", "))
    };
    text += &format!(
        "\nOf {rows} degenerate outputs ({} problems, preset `{}`): ours accepts {ours}, \
         allclose at 1e-2 accepts {at_1e2} (in {} problems{list}), allclose at 1e-4 accepts \
         {at_1e4}.\n",
        problems.len(),
        preset.name(),
        problems_1e2.len(),
    );
    Ok(text)
}

/// The input sets of seeds 11 and 12 and their oracles.
struct Sets {
    a: InputSet,
    b: InputSet,
    oracle_a: Oracle,
    oracle_b: Oracle,
}

/// One output of set `a` with what it is judged by.
struct OutputCase<'s> {
    spec: TensorSpec,
    /// The oracle as the problem gives it (a row update stays one), and the initial value of
    /// an in-out output.
    given: &'s OracleOutput,
    initial: Option<&'s HostTensor>,
    /// Its dense value, of the checked elements only.
    reference: OracleOutput,
    /// The checked shape: the valid prefix of an output with a data-dependent valid length.
    shape: Vec<usize>,
    prefix_only: bool,
    tol: Tolerance,
}

impl Sets {
    fn generate(problem: &dyn Problem, preset: Preset) -> Result<Sets, String> {
        let sizes = problem.sizes(preset);
        let a = problem
            .generate(preset, &sizes, 11.into())
            .map_err(|e| e.to_string())?;
        let b = problem
            .generate(preset, &sizes, 12.into())
            .map_err(|e| e.to_string())?;
        let oracle_a = problem.oracle(&a).map_err(|e| e.to_string())?;
        let oracle_b = problem.oracle(&b).map_err(|e| e.to_string())?;
        Ok(Sets {
            a,
            b,
            oracle_a,
            oracle_b,
        })
    }

    /// Every output of `problem` on set `a`, in signature order.
    fn output_cases(&self, problem: &dyn Problem) -> Result<Vec<OutputCase<'_>>, String> {
        let mut cases = Vec::new();
        for spec in problem
            .tensors()
            .into_iter()
            .filter(|t| t.role != Role::Input)
        {
            let name = spec.name;
            let given = self
                .oracle_a
                .get(name)
                .ok_or(format!("oracle gives no `{name}`"))?;
            // A row-update oracle (an in-place output) is judged on its whole value here, and
            // checked the way the runner checks it: against the initial value.
            let initial = self.a.tensors.get(name).ok();
            let reference = given.densified(initial)?;
            let mut shape = shape_of(&spec, &self.a.sizes).map_err(|e| e.to_string())?;
            // An output with a data-dependent valid length is checked on its valid prefix
            // only, as the runner does.
            let prefix_only =
                problem.checked_prefix(name) && reference.len() < shape.iter().product::<usize>();
            if prefix_only {
                shape = vec![reference.len()];
            }
            let tol = problem.tolerance(&spec);
            cases.push(OutputCase {
                spec,
                given,
                initial,
                reference,
                shape,
                prefix_only,
                tol,
            });
        }
        Ok(cases)
    }
}

impl OutputCase<'_> {
    /// Our check of `out`, as the runner makes it.
    fn ours(&self, out: &HostTensor) -> CheckReport {
        let ctx = CheckContext {
            encoded: None,
            initial: self.initial,
        };
        check_output_with(out, self.given, &self.tol, ctx)
    }

    /// The oracle encoded to the output's dtype.
    fn correct(&self) -> Result<HostTensor, String> {
        encode(&self.reference, self.spec.dtype, self.shape.clone()).map_err(|e| e.to_string())
    }

    /// The degenerate outputs, named: all zeros, a constant (the mean), 0.3% of the correct
    /// output with the rest poison or zeros (`set` gives the sizes of the poisoned buffer), and
    /// an in-place output's initial value unchanged.
    fn degenerate(
        &self,
        correct: &HostTensor,
        set: &InputSet,
    ) -> Result<Vec<(&'static str, HostTensor)>, String> {
        let (spec, shape, reference) = (&self.spec, &self.shape, &self.reference);
        let numel: usize = shape.iter().product();
        let mean = match reference {
            OracleOutput::Float(v) => v.iter().sum::<f64>() / v.len().max(1) as f64,
            OracleOutput::Int(v) => v.iter().sum::<i64>() as f64 / v.len().max(1) as f64,
            OracleOutput::Rows(_) => unreachable!("densified above"),
        };
        let zeros = HostTensor::zeros(spec.dtype, shape.clone());
        let constant = encode(&constant_like(reference, mean), spec.dtype, shape.clone())
            .map_err(|e| e.to_string())?;
        let written = (numel * 3).div_ceil(1000); // 0.3%
        let mut partial_poison = if self.prefix_only {
            let pattern = crate::check::poison_pattern(spec.dtype);
            let bytes = pattern
                .iter()
                .copied()
                .cycle()
                .take(numel * spec.dtype.size_bytes());
            HostTensor::new(spec.dtype, shape.clone(), bytes.collect::<Vec<u8>>())
                .map_err(|e| e.to_string())?
        } else {
            poisoned(spec, &set.sizes).map_err(|e| e.to_string())?
        };
        let mut partial_zeros = zeros.clone();
        let width = spec.dtype.size_bytes();
        for part in [&mut partial_poison, &mut partial_zeros] {
            part.bytes[..written * width].copy_from_slice(&correct.bytes[..written * width]);
        }
        let mut degenerate = vec![("all zeros", zeros)];
        // A one-element output (a count) has no "constant" or "partial" version distinct from
        // its value; zeros must still fail unless the value is zero.
        if numel > 1 {
            degenerate.extend([
                ("a constant", constant),
                ("0.3% written, rest poison", partial_poison),
                ("0.3% written, rest zeros", partial_zeros),
            ]);
        } else if matches!(reference, OracleOutput::Int(v) if v == &[0])
            || matches!(reference, OracleOutput::Float(v) if v == &[0.0])
        {
            degenerate.clear();
        }
        // An in-place output left as it was (a kernel that does nothing): a tolerance on the
        // values rather than on the update cannot see a small step.
        if let (Role::InOut, Some(initial)) = (self.spec.role, self.initial) {
            if initial.numel() == numel {
                degenerate.push(("initial value, unchanged", initial.clone()));
            }
        }
        Ok(degenerate)
    }
}

fn constant_like(reference: &OracleOutput, value: f64) -> OracleOutput {
    match reference {
        OracleOutput::Float(v) => OracleOutput::Float(vec![value; v.len()]),
        OracleOutput::Int(v) => OracleOutput::Int(vec![value.round() as i64; v.len()]),
        OracleOutput::Rows(_) => unreachable!("densified before"),
    }
}

/// The test every problem module has: `self_test_case!(EmbeddingBagSum);` in its tests module
/// runs [`self_test`] at `ci` size.
#[cfg(test)]
macro_rules! self_test_case {
    ($problem:expr) => {
        #[test]
        fn self_test_rejects_degenerate_outputs() {
            $crate::selftest::self_test(&$problem, $crate::Preset::Ci).unwrap();
        }
    };
}
#[cfg(test)]
pub(crate) use self_test_case;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::find_problem;

    /// The degenerate verdicts of problem `name` at `ci`, and its tensors of a role `keep`
    /// accepts.
    fn verdicts_and_tensors(
        name: &str,
        keep: impl Fn(Role) -> bool,
    ) -> (Vec<DegenerateVerdict>, Vec<TensorSpec>) {
        let problem = find_problem(name).unwrap();
        let verdicts = degenerate_verdicts(problem, Preset::Ci).unwrap();
        let tensors = problem
            .tensors()
            .into_iter()
            .filter(|t| keep(t.role))
            .collect();
        (verdicts, tensors)
    }

    #[test]
    fn verdicts_cover_every_degenerate_output_and_ours_rejects_each() {
        let (verdicts, outputs) = verdicts_and_tensors("embedding_bag_sum", |r| r != Role::Input);
        // One output of many elements: four degenerate versions of it.
        assert_eq!(outputs.len(), 1);
        assert_eq!(
            verdicts.iter().map(|v| v.what).collect::<Vec<_>>(),
            [
                "all zeros",
                "a constant",
                "0.3% written, rest poison",
                "0.3% written, rest zeros"
            ]
        );
        for v in &verdicts {
            assert_eq!(v.output, outputs[0].name);
            assert!(!v.ours_passed && !v.ours_reason.is_empty(), "{v:?}");
            // A NaN is close to nothing, so poison left in a float output fails allclose too.
            if v.what.contains("poison") {
                assert!(!v.allclose_1e2 && !v.allclose_1e4, "{v:?}");
            }
        }
    }

    #[test]
    fn an_in_place_output_left_unchanged_is_a_degenerate_output() {
        let (verdicts, in_out) =
            verdicts_and_tensors("embedding_backward_rowwise_adagrad", |r| r == Role::InOut);
        assert!(!in_out.is_empty());
        for name in in_out.iter().map(|t| t.name) {
            let unchanged: Vec<_> = verdicts
                .iter()
                .filter(|v| v.output == name && v.what == "initial value, unchanged")
                .collect();
            assert_eq!(unchanged.len(), 1, "{name}");
            assert!(!unchanged[0].ours_passed, "{:?}", unchanged[0]);
        }
    }

    #[test]
    fn zeros_pass_allclose_on_a_small_reference_but_not_ours() {
        // Problem 1's oracle scaled down 10^4-fold: every |ref| ≤ 0.01, the case of the
        // KernelBench problems an all-zeros tensor passed.
        let problem = find_problem("embedding_bag_sum").unwrap();
        let sets = Sets::generate(problem, Preset::Ci).unwrap();
        let case = sets.output_cases(problem).unwrap().remove(0);
        let OracleOutput::Float(v) = &case.reference else {
            panic!("a float output")
        };
        let small = OracleOutput::Float(v.iter().map(|x| x * 1e-4).collect());
        let max = v.iter().fold(0.0f64, |m, x| m.max(x.abs())) * 1e-4;
        assert!(max < 0.01 && max > 1e-4, "{max}");
        let zeros = HostTensor::zeros(case.spec.dtype, case.shape.clone());
        assert_eq!(allclose(&zeros, &small, None, 1e-2, 1e-2), Ok(true));
        assert_eq!(allclose(&zeros, &small, None, 1e-4, 1e-4), Ok(false));
        let ours = crate::check::check_output(&zeros, &small, &case.tol);
        assert!(!ours.passed);
        assert!((ours.rel_l2 - 1.0).abs() < 1e-12, "{ours:?}");
    }

    #[test]
    fn the_table_has_one_row_per_verdict_and_counts_them() {
        let problems = [
            find_problem("embedding_bag_sum").unwrap(),
            find_problem("unique_indices").unwrap(),
        ];
        let table = allclose_table(&problems, Preset::Ci).unwrap();
        let mut verdicts = Vec::new();
        for p in problems {
            verdicts.extend(degenerate_verdicts(p, Preset::Ci).unwrap());
        }
        let rows: Vec<&str> = table
            .lines()
            .filter(|l| l.starts_with("| ") && !l.starts_with("| ---"))
            .collect();
        // The header and one row per verdict.
        assert_eq!(rows.len(), 1 + verdicts.len(), "{table}");
        let count = |f: fn(&DegenerateVerdict) -> bool| verdicts.iter().filter(|v| f(v)).count();
        assert_eq!(count(|v| v.ours_passed), 0);
        // A bound of 1e-4 + 1e-4·|ref| is inside 1e-2 + 1e-2·|ref|: what the tighter test
        // accepts, the looser one does.
        assert!(verdicts.iter().all(|v| v.allclose_1e2 || !v.allclose_1e4));
        let summary = format!(
            "Of {} degenerate outputs (2 problems, preset `ci`): ours accepts 0, allclose at \
             1e-2 accepts {}",
            verdicts.len(),
            count(|v| v.allclose_1e2)
        );
        assert!(table.contains(&summary), "{table}");
        assert!(table.contains(&format!(
            "allclose at 1e-4 accepts {}.",
            count(|v| v.allclose_1e4)
        )));
    }
}
