//! Integer expressions over size symbols (`ceil_div(B * 32, 256)`, `B + 1`), for tensor shapes
//! and launch plans, evaluated with `evalexpr` plus `ceil_div`, `min`, `max`.
use crate::error::ProblemError;
use crate::sizes::Sizes;
use evalexpr::{
    ContextWithMutableFunctions, ContextWithMutableVariables, EvalexprError, Function,
    HashMapContext, Value,
};

fn int_args(args: &Value) -> Result<(i64, i64), EvalexprError> {
    let t = args.as_fixed_len_tuple(2)?;
    let (a, b) = (t[0].as_int()?, t[1].as_int()?);
    Ok((a, b))
}

fn context(sizes: &Sizes) -> Result<HashMapContext, EvalexprError> {
    let mut ctx = HashMapContext::new();
    for (k, v) in sizes {
        ctx.set_value(k.clone(), Value::Int(*v))?;
    }
    ctx.set_function(
        "ceil_div".into(),
        Function::new(|a| {
            let (x, y) = int_args(a)?;
            if y <= 0 {
                return Err(EvalexprError::CustomMessage(format!("ceil_div by {y}")));
            }
            // x + y - 1 can overflow; the quotient rounded up cannot.
            Ok(Value::Int(
                x.div_euclid(y) + i64::from(x.rem_euclid(y) != 0),
            ))
        }),
    )?;
    ctx.set_function(
        "min".into(),
        Function::new(|a| int_args(a).map(|(x, y)| Value::Int(x.min(y)))),
    )?;
    ctx.set_function(
        "max".into(),
        Function::new(|a| int_args(a).map(|(x, y)| Value::Int(x.max(y)))),
    )?;
    Ok(ctx)
}

/// Evaluates `expr` to an integer with the size symbols of `sizes` bound.
pub fn eval(expr: &str, sizes: &Sizes) -> Result<i64, ProblemError> {
    match eval_number(expr, sizes, &Default::default())? {
        Number::Int(v) => Ok(v),
        Number::Float(v) => Err(ProblemError::Expr {
            expr: expr.to_string(),
            message: format!("evaluates to {v}, not an integer"),
        }),
    }
}

/// A kernel argument's value: an integer, or a float (from a float scalar such as `lr`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Number {
    Int(i64),
    Float(f64),
}

/// The longest expression accepted, in bytes.
pub const MAX_EXPR_LEN: usize = 4096;
/// The deepest nesting of parentheses accepted (the evaluator recurses once per level, so an
/// expression nested thousands deep would overflow the stack instead of failing).
pub const MAX_EXPR_DEPTH: usize = 64;

/// Refuses expressions too long or too deeply nested to evaluate safely.
fn check_shape(expr: &str) -> Result<(), String> {
    if expr.len() > MAX_EXPR_LEN {
        return Err(format!(
            "{} bytes long: at most {MAX_EXPR_LEN} are accepted",
            expr.len()
        ));
    }
    let mut depth = 0usize;
    for c in expr.chars() {
        match c {
            '(' => {
                depth += 1;
                if depth > MAX_EXPR_DEPTH {
                    return Err(format!(
                        "parentheses nested more than {MAX_EXPR_DEPTH} deep"
                    ));
                }
            }
            ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// Evaluates `expr` with the size symbols (integers) and float scalars bound.
pub fn eval_number(
    expr: &str,
    sizes: &Sizes,
    scalars: &std::collections::BTreeMap<String, f64>,
) -> Result<Number, ProblemError> {
    let err = |message: String| ProblemError::Expr {
        expr: expr.to_string(),
        message,
    };
    check_shape(expr).map_err(err)?;
    let mut ctx = context(sizes).map_err(|e| err(e.to_string()))?;
    for (k, v) in scalars {
        ctx.set_value(k.clone(), Value::Float(*v))
            .map_err(|e| err(e.to_string()))?;
    }
    match evalexpr::eval_with_context(expr, &ctx).map_err(|e| err(e.to_string()))? {
        Value::Int(v) => Ok(Number::Int(v)),
        Value::Float(v) => Ok(Number::Float(v)),
        other => Err(err(format!("evaluates to {other}, not a number"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes() -> Sizes {
        [("B".to_string(), 1000i64), ("D".to_string(), 128)]
            .into_iter()
            .collect()
    }

    #[test]
    fn evaluates_symbols_and_helpers() {
        assert_eq!(eval("B + 1", &sizes()).unwrap(), 1001);
        assert_eq!(eval("ceil_div(B * 32, 256)", &sizes()).unwrap(), 125);
        assert_eq!(eval("ceil_div(B * 32 + 1, 256)", &sizes()).unwrap(), 126);
        assert_eq!(
            eval("min(1024, ceil_div(B * ceil_div(D, 32), 8))", &sizes()).unwrap(),
            500
        );
        assert_eq!(eval("max(D, 7)", &sizes()).unwrap(), 128);
        assert_eq!(eval("256", &sizes()).unwrap(), 256);
    }

    #[test]
    fn float_scalars_evaluate_to_floats() {
        let scalars = [("lr".to_string(), 0.5)].into_iter().collect();
        assert_eq!(
            eval_number("lr", &sizes(), &scalars).unwrap(),
            Number::Float(0.5)
        );
        assert_eq!(
            eval_number("lr * 2", &sizes(), &scalars).unwrap(),
            Number::Float(1.0)
        );
        assert_eq!(
            eval_number("D", &sizes(), &scalars).unwrap(),
            Number::Int(128)
        );
        assert!(
            eval("lr", &sizes()).is_err(),
            "lr is unknown without scalars"
        );
    }

    #[test]
    fn bad_expressions_name_themselves() {
        let e = eval("B + X", &sizes()).unwrap_err().to_string();
        assert!(e.contains("B + X"), "{e}");
        assert!(eval("ceil_div(B, 0)", &sizes()).is_err());
        assert!(eval("B / 3.5", &sizes()).is_err());
        assert!(eval("B +", &sizes()).is_err());
    }

    #[test]
    fn deep_nesting_and_overflow_are_errors_not_crashes() {
        // Issue 13: 50k parentheses or 12k nested `min(` overflowed the stack.
        let parens = format!("{}1{}", "(".repeat(50_000), ")".repeat(50_000));
        let e = eval(&parens, &sizes()).unwrap_err().to_string();
        assert!(e.contains("bytes long"), "{e}");
        let mins = format!("{}1{}", "min(1, ".repeat(12_000), ")".repeat(12_000));
        assert!(eval(&mins, &sizes()).is_err());
        let deep = format!("{}B{}", "(".repeat(65), ")".repeat(65));
        let e = eval(&deep, &sizes()).unwrap_err().to_string();
        assert!(e.contains("nested more than 64 deep"), "{e}");
        let ok = format!("{}B{}", "(".repeat(64), ")".repeat(64));
        assert_eq!(eval(&ok, &sizes()).unwrap(), 1000);
        // Overflow: an error (or a value), never a panic.
        let max = i64::MAX;
        assert_eq!(
            eval(&format!("ceil_div({max}, 2)"), &sizes()).unwrap(),
            max / 2 + 1
        );
        assert_eq!(eval("ceil_div(-7, 2)", &sizes()).unwrap(), -3);
        assert!(eval(&format!("{max} + 1"), &sizes()).is_err());
        assert!(eval(&format!("{max} * B"), &sizes()).is_err());
    }
}
