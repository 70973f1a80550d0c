//! Size symbols and presets: the values of `B`, `E`, `D`, `N`, ... for a preset, and the one
//! lookup every problem uses.
use crate::error::ProblemError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Values of the size symbols (B, E, D, N, ...). Data-dependent ones (N) are filled in by
/// [`Problem::generate`](crate::Problem::generate).
pub type Sizes = BTreeMap<String, i64>;

/// Problem-size presets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Preset {
    /// Seconds on the CPU emulator.
    Ci,
    /// A quick GPU check.
    Small,
    /// The benchmark size on an H200.
    Full,
}

impl Preset {
    /// Every preset, smallest first.
    pub const ALL: [Preset; 3] = [Preset::Ci, Preset::Small, Preset::Full];

    pub fn name(self) -> &'static str {
        match self {
            Preset::Ci => "ci",
            Preset::Small => "small",
            Preset::Full => "full",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Preset::ALL.into_iter().find(|p| p.name() == s)
    }
}

/// Sizes from `(symbol, value)` pairs: `sizes_of(&[("B", 64), ("D", 40)])`.
pub fn sizes_of(pairs: &[(&str, i64)]) -> Sizes {
    pairs.iter().map(|&(k, v)| (k.to_string(), v)).collect()
}

/// The value of size symbol `name`, or an error naming `problem`.
pub fn size(sizes: &Sizes, problem: &str, name: &str) -> Result<i64, ProblemError> {
    sizes
        .get(name)
        .copied()
        .ok_or_else(|| ProblemError::invalid(problem, format!("size {name} is not set")))
}

/// Size symbols `names` of `sizes`, in order; a missing one is an error naming `problem`.
pub fn sizes_in<const K: usize>(
    sizes: &Sizes,
    problem: &str,
    names: [&str; K],
) -> Result<[i64; K], ProblemError> {
    let mut values = [0; K];
    for (v, name) in values.iter_mut().zip(names) {
        *v = size(sizes, problem, name)?;
    }
    Ok(values)
}

/// Size symbols `names` of `sizes` as counts; a missing or negative one is an error naming
/// `problem`.
pub fn counts_in<const K: usize>(
    sizes: &Sizes,
    problem: &str,
    names: [&str; K],
) -> Result<[usize; K], ProblemError> {
    let mut counts = [0; K];
    for (c, (v, name)) in counts
        .iter_mut()
        .zip(sizes_in(sizes, problem, names)?.into_iter().zip(names))
    {
        *c = usize::try_from(v).map_err(|_| {
            ProblemError::invalid(problem, format!("size {name} is negative ({v})"))
        })?;
    }
    Ok(counts)
}

/// The value of size symbol `name` as a count, 0 when it is not set (for work counts and
/// statistics, which never fail).
pub fn size_or_zero(sizes: &Sizes, name: &str) -> usize {
    sizes.get(name).copied().unwrap_or(0).max(0) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_round_trip_by_name() {
        for p in Preset::ALL {
            assert_eq!(Preset::parse(p.name()), Some(p));
        }
        assert_eq!(Preset::parse("huge"), None);
    }

    #[test]
    fn a_missing_size_names_problem_and_symbol() {
        let s = sizes_of(&[("B", 3)]);
        assert_eq!(size(&s, "p", "B").unwrap(), 3);
        let e = size(&s, "p", "D").unwrap_err().to_string();
        assert!(e.contains("problem p") && e.contains("size D"), "{e}");
        assert_eq!(size_or_zero(&s, "D"), 0);
        assert_eq!(sizes_in(&s, "p", ["B"]).unwrap(), [3]);
        assert!(sizes_in(&s, "p", ["B", "D"]).is_err());
        let neg = counts_in(&sizes_of(&[("B", -1)]), "p", ["B"]).unwrap_err();
        assert!(neg.to_string().contains("size B is negative"), "{neg}");
    }
}
