//! Value parsers of the command line's bounded options: each refuses, with a message saying
//! why, a value the run would take but could not honour (a win threshold below 1 makes slower
//! kernels wins; no public set, no rotation, no time; a time past a day or a count of sets past
//! what a disk holds, which would overflow or run for ever). The ranges:
//!
//! | option | range |
//! | --- | --- |
//! | `--timeout-s`, `--budget-s`, `--answer-timeout-s` | above 0 to 86,400 s |
//! | `--public-sets`, `--secret-sets`, `--rotation`, `gen --sets` | 1 to 64 |
//! | `--min-pairs`, `--max-pairs` | 1 to 100,000 |
//! | `--win-threshold` | 1 to 1,000 |
//! | `stats --batch` | 1 to 16,777,216 |
use std::str::FromStr;

/// Seconds any time option may give at most (a day).
pub const MAX_SECONDS: f64 = 86_400.0;
/// Input sets of one kind at most (each can be gigabytes at `full`).
pub const MAX_SETS: usize = 64;
/// Timed pairs at most.
pub const MAX_PAIRS: usize = 100_000;
/// `stats --batch` at most (2^24 bags).
pub const MAX_BATCH: usize = 1 << 24;

/// A count from `lo` to `hi`.
fn count_in(s: &str, lo: usize, hi: usize) -> Result<usize, String> {
    let n = usize::from_str(s).map_err(|e| format!("`{s}` is not a count: {e}"))?;
    if n < lo {
        return Err(format!("must be at least {lo}"));
    }
    if n > hi {
        return Err(format!("`{s}`: must be at most {hi}"));
    }
    Ok(n)
}

/// A count of at least one pair, at most [`MAX_PAIRS`] (`--min-pairs`, `--max-pairs`).
pub fn at_least_one(s: &str) -> Result<usize, String> {
    count_in(s, 1, MAX_PAIRS)
}

/// A count of input sets, 1 to [`MAX_SETS`] (`--public-sets`, `--rotation`, `gen --sets`).
pub fn set_count(s: &str) -> Result<usize, String> {
    count_in(s, 1, MAX_SETS)
}

/// A batch of 1 to [`MAX_BATCH`] bags (`stats --batch`).
pub fn batch(s: &str) -> Result<usize, String> {
    count_in(s, 1, MAX_BATCH)
}

/// A finite number of seconds above zero, at most [`MAX_SECONDS`] (`--timeout-s`,
/// `--budget-s`).
pub fn positive_seconds(s: &str) -> Result<f64, String> {
    let x = f64::from_str(s).map_err(|e| format!("`{s}` is not a number of seconds: {e}"))?;
    check_seconds(x).map_err(|e| format!("`{s}`: {e}"))
}

/// [`positive_seconds`] of a number already read (a resumed `run.json`'s).
pub fn check_seconds(x: f64) -> Result<f64, String> {
    if !(x.is_finite() && x > 0.0 && x <= MAX_SECONDS) {
        return Err(format!(
            "must be a number of seconds above 0 and at most {MAX_SECONDS} (a day)"
        ));
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
    if x > 1000.0 {
        return Err(format!("`{s}`: must be at most 1000"));
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
    use proptest::strategy::Strategy;

    #[test]
    fn bounds_refuse_what_a_run_cannot_honour() {
        assert_eq!(at_least_one("3"), Ok(3));
        assert!(at_least_one("0").unwrap_err().contains("at least 1"));
        assert!(at_least_one("-1").is_err());
        assert_eq!(positive_seconds("2.5"), Ok(2.5));
        for bad in ["0", "-1", "NaN", "inf", "1e308", "86401"] {
            assert!(positive_seconds(bad).is_err(), "{bad}");
        }
        assert_eq!(positive_seconds("86400"), Ok(86400.0));
        assert!(at_least_one("100001")
            .unwrap_err()
            .contains("at most 100000"));
        assert!(set_count("65").unwrap_err().contains("at most 64"));
        assert!(set_count("18446744073709551615").is_err());
        assert!(set_count("18446744073709551616").is_err());
        assert!(batch("18446744073709551615")
            .unwrap_err()
            .contains("at most"));
        assert_eq!(win_threshold("1.05"), Ok(1.05));
        assert!(win_threshold("0.1").unwrap_err().contains("at least 1.0"));
        assert!(win_threshold("NaN").is_err());
        assert_eq!(pairs(None, None).unwrap(), (20, 400));
        assert_eq!(pairs(None, Some(3)).unwrap(), (3, 3));
        assert_eq!(pairs(Some(5), None).unwrap(), (5, 400));
        let e = pairs(Some(9), Some(3)).unwrap_err().to_string();
        assert_eq!(e, "--min-pairs 9 is greater than --max-pairs 3");
    }

    proptest::proptest! {
        /// No text given to a numeric option panics, and what is accepted is within its range.
        #[test]
        fn any_text_is_refused_or_within_range(
            text in proptest::prop_oneof![
                "[-+]?[0-9]{0,25}(\\.[0-9]{0,5})?(e[-+]?[0-9]{1,4})?",
                proptest::num::f64::ANY.prop_map(|x| x.to_string()),
                proptest::num::u64::ANY.prop_map(|x| x.to_string()),
                ".{0,12}",
            ]
        ) {
            if let Ok(x) = positive_seconds(&text) {
                proptest::prop_assert!(x > 0.0 && x <= MAX_SECONDS);
            }
            if let Ok(n) = set_count(&text) {
                proptest::prop_assert!((1..=MAX_SETS).contains(&n));
            }
            if let Ok(n) = at_least_one(&text) {
                proptest::prop_assert!((1..=MAX_PAIRS).contains(&n));
            }
            if let Ok(n) = batch(&text) {
                proptest::prop_assert!((1..=MAX_BATCH).contains(&n));
            }
            if let Ok(x) = win_threshold(&text) {
                proptest::prop_assert!((1.0..=1000.0).contains(&x));
            }
        }
    }
}
