//! Integer expressions over size symbols (`ceil_div(B * 32, 256)`, `B + 1`), for tensor shapes
//! and launch plans, evaluated with `evalexpr` plus `ceil_div`, `min`, `max`.
use crate::spec::{ProblemError, Sizes};
use evalexpr::{ContextWithMutableFunctions, ContextWithMutableVariables, EvalexprError, Function, HashMapContext, Value};

fn int_args(args: &Value, name: &str) -> Result<(i64, i64), EvalexprError> {
    let t = args.as_fixed_len_tuple(2)?;
    let (a, b) = (t[0].as_int()?, t[1].as_int()?);
    let _ = name;
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
            let (x, y) = int_args(a, "ceil_div")?;
            if y <= 0 {
                return Err(EvalexprError::CustomMessage(format!("ceil_div by {y}")));
            }
            Ok(Value::Int((x + y - 1).div_euclid(y)))
        }),
    )?;
    ctx.set_function("min".into(), Function::new(|a| int_args(a, "min").map(|(x, y)| Value::Int(x.min(y)))))?;
    ctx.set_function("max".into(), Function::new(|a| int_args(a, "max").map(|(x, y)| Value::Int(x.max(y)))))?;
    Ok(ctx)
}

/// Evaluates `expr` to an integer with the size symbols of `sizes` bound.
pub fn eval(expr: &str, sizes: &Sizes) -> Result<i64, ProblemError> {
    let err = |message: String| ProblemError::Expr { expr: expr.to_string(), message };
    let ctx = context(sizes).map_err(|e| err(e.to_string()))?;
    match evalexpr::eval_with_context(expr, &ctx).map_err(|e| err(e.to_string()))? {
        Value::Int(v) => Ok(v),
        other => Err(err(format!("evaluates to {other}, not an integer"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes() -> Sizes {
        [("B".to_string(), 1000i64), ("D".to_string(), 128)].into_iter().collect()
    }

    #[test]
    fn evaluates_symbols_and_helpers() {
        assert_eq!(eval("B + 1", &sizes()).unwrap(), 1001);
        assert_eq!(eval("ceil_div(B * 32, 256)", &sizes()).unwrap(), 125);
        assert_eq!(eval("ceil_div(B * 32 + 1, 256)", &sizes()).unwrap(), 126);
        assert_eq!(eval("min(1024, ceil_div(B * ceil_div(D, 32), 8))", &sizes()).unwrap(), 500);
        assert_eq!(eval("max(D, 7)", &sizes()).unwrap(), 128);
        assert_eq!(eval("256", &sizes()).unwrap(), 256);
    }

    #[test]
    fn bad_expressions_name_themselves() {
        let e = eval("B + X", &sizes()).unwrap_err().to_string();
        assert!(e.contains("B + X"), "{e}");
        assert!(eval("ceil_div(B, 0)", &sizes()).is_err());
        assert!(eval("B / 3.5", &sizes()).is_err());
        assert!(eval("B +", &sizes()).is_err());
    }
}
