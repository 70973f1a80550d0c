//! The degenerate-output self-test every problem must pass: its oracle output is not
//! near-constant and changes with the seed, the correct output passes the check, and zeros, a
//! constant, and an output with only 0.3% of its elements written (the rest poison, or the rest
//! zeros) all fail. Each problem's tests call [`self_test`] at `ci` size.
use crate::check::{check_output_with, encode, CheckContext};
use crate::spec::{poisoned, shape_of, OracleOutput, Preset, Problem, Role};
use data_gen::HostTensor;

/// Runs the self-test; `Err` says which part failed.
pub fn self_test(problem: &dyn Problem, preset: Preset) -> Result<(), String> {
    let sizes = problem.sizes(preset);
    let a = problem
        .generate(preset, &sizes, 11.into())
        .map_err(|e| e.to_string())?;
    let b = problem
        .generate(preset, &sizes, 12.into())
        .map_err(|e| e.to_string())?;
    let oracle_a = problem.oracle(&a).map_err(|e| e.to_string())?;
    let oracle_b = problem.oracle(&b).map_err(|e| e.to_string())?;
    for spec in problem.tensors().iter().filter(|t| t.role != Role::Input) {
        let name = spec.name;
        let given = oracle_a
            .get(name)
            .ok_or(format!("oracle gives no `{name}`"))?;
        // A row-update oracle (an in-place output) is judged on its whole value here, and
        // checked the way the runner checks it: against the initial value.
        let initial = a.tensors.get(name).ok();
        let ctx = CheckContext {
            encoded: None,
            initial,
        };
        let reference = &given.densified(initial)?;
        let check_output =
            |out: &HostTensor, _: &OracleOutput, tol| check_output_with(out, given, tol, ctx);
        let mut shape = shape_of(spec, &a.sizes).map_err(|e| e.to_string())?;
        // An output with a data-dependent valid length is checked on its valid prefix only,
        // as the runner does.
        let prefix_only =
            problem.checked_prefix(name) && reference.len() < shape.iter().product::<usize>();
        if prefix_only {
            shape = vec![reference.len()];
        }
        let tol = problem.tolerance(spec);
        let other = oracle_b
            .get(name)
            .map(|o| o.densified(b.tensors.get(name).ok()))
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
        let correct = encode(reference, spec.dtype, shape.clone()).map_err(|e| e.to_string())?;
        let rep = check_output(&correct, reference, &tol);
        if !rep.passed {
            return Err(format!(
                "{name}: the correct output fails the check: {}",
                rep.reason
            ));
        }
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
        let mut partial_poison = if prefix_only {
            let pattern = crate::check::poison_pattern(spec.dtype);
            let bytes = pattern
                .iter()
                .copied()
                .cycle()
                .take(numel * spec.dtype.size_bytes());
            HostTensor::new(spec.dtype, shape.clone(), bytes.collect::<Vec<u8>>())
                .map_err(|e| e.to_string())?
        } else {
            poisoned(spec, &a.sizes).map_err(|e| e.to_string())?
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
        for (what, out) in degenerate {
            if check_output(&out, reference, &tol).passed {
                return Err(format!("{name}: {what} passes the check"));
            }
        }
    }
    Ok(())
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
