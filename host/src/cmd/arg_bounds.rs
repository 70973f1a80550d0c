//! Value parsers of the command line's bounded options: each refuses, with a message saying
//! why, a value the run would take but could not honour (a win threshold below 1 makes slower
//! kernels wins; no public set, no rotation, no time).
use std::str::FromStr;

/// A count of at least one (`--public-sets`, `--rotation`, `--max-pairs`, ...).
pub fn at_least_one(s: &str) -> Result<usize, String> {
    let n = usize::from_str(s).map_err(|e| format!("`{s}` is not a count: {e}"))?;
    if n == 0 {
        return Err("must be at least 1".into());
    }
    Ok(n)
}

/// A finite number of seconds above zero (`--timeout-s`, `--budget-s`).
pub fn positive_seconds(s: &str) -> Result<f64, String> {
    let x = f64::from_str(s).map_err(|e| format!("`{s}` is not a number of seconds: {e}"))?;
    if !(x.is_finite() && x > 0.0) {
        return Err(format!("`{s}`: must be a finite number of seconds above 0"));
    }
    Ok(x)
}

/// A win threshold: a speedup's lower bound of at least 1 (below 1, a kernel slower than the
/// reference would count as a win: a 0.135x kernel did at 0.1).
pub fn win_threshold(s: &str) -> Result<f64, String> {
    let x = f64::from_str(s).map_err(|e| format!("`{s}` is not a number: {e}"))?;
    if !(x.is_finite() && x >= 1.0) {
        return Err(format!(
            "`{s}`: must be at least 1.0 (a speedup below 1 is a slowdown, never a win)"
        ));
    }
    Ok(x)
}

/// `--min-pairs` and `--max-pairs` as the run uses them: a `--min-pairs` left out is 20, or
/// `--max-pairs` when that is lower; a `--min-pairs` given above `--max-pairs` is an error.
pub fn pairs(min: Option<usize>, max: Option<usize>) -> anyhow::Result<(usize, usize)> {
    let max_pairs = max.unwrap_or(400);
    let min_pairs = min.unwrap_or(20.min(max_pairs));
    anyhow::ensure!(
        min_pairs <= max_pairs,
        "--min-pairs {min_pairs} is greater than --max-pairs {max_pairs}"
    );
    Ok((min_pairs, max_pairs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_refuse_what_a_run_cannot_honour() {
        assert_eq!(at_least_one("3"), Ok(3));
        assert!(at_least_one("0").unwrap_err().contains("at least 1"));
        assert!(at_least_one("-1").is_err());
        assert_eq!(positive_seconds("2.5"), Ok(2.5));
        for bad in ["0", "-1", "NaN", "inf"] {
            assert!(positive_seconds(bad).is_err(), "{bad}");
        }
        assert_eq!(win_threshold("1.05"), Ok(1.05));
        assert!(win_threshold("0.1").unwrap_err().contains("at least 1.0"));
        assert!(win_threshold("NaN").is_err());
        assert_eq!(pairs(None, None).unwrap(), (20, 400));
        assert_eq!(pairs(None, Some(3)).unwrap(), (3, 3));
        assert_eq!(pairs(Some(5), None).unwrap(), (5, 400));
        let e = pairs(Some(9), Some(3)).unwrap_err().to_string();
        assert_eq!(e, "--min-pairs 9 is greater than --max-pairs 3");
    }
}
