//! The shapes a run measures: each selected problem at each of its shapes that `--shapes`
//! names (or all of them), as problems of their own ([`bench_problems::AtShape`]) that the rest
//! of the runner schedules, evaluates and records like any problem.
use super::options::ALL_SHAPES;
use bench_problems::{at_shape, Preset, Problem};

/// `problems` at each of their shapes of `preset` that `names` picks ([`ALL_SHAPES`]: every
/// one), problem by problem, in each problem's order of shapes. A name no selected problem
/// has is an error listing the shapes there are; a problem with none of the names is left
/// out, saying so.
pub(super) fn at_shapes(
    problems: &[&'static dyn Problem],
    preset: Preset,
    names: &[String],
) -> anyhow::Result<Vec<&'static dyn Problem>> {
    let all = names.is_empty() || names.iter().any(|n| n == ALL_SHAPES);
    let known = |n: &String| {
        problems
            .iter()
            .any(|p| p.shapes(preset).iter().any(|s| &s.name == n))
    };
    if let Some(unknown) = names.iter().find(|n| *n != ALL_SHAPES && !known(n)) {
        let mut there: Vec<String> = problems
            .iter()
            .flat_map(|p| p.shapes(preset).into_iter().map(|s| s.name))
            .collect();
        there.sort();
        there.dedup();
        anyhow::bail!(
            "--shapes: no problem selected has a shape `{unknown}` at {}; there are: {ALL_SHAPES}, {}",
            preset.name(),
            there.join(", ")
        );
    }
    let mut out: Vec<&'static dyn Problem> = Vec::new();
    for &p in problems {
        let picked: Vec<String> = p
            .shapes(preset)
            .into_iter()
            .map(|s| s.name)
            .filter(|n| all || names.contains(n))
            .collect();
        if picked.is_empty() {
            eprintln!(
                "note: {} has none of the shapes asked for: not run",
                p.name()
            );
        }
        for name in picked {
            // A run holds a few dozen of these for its whole life.
            let shaped: &'static dyn Problem = Box::leak(Box::new(at_shape(p, preset, &name)?));
            out.push(shaped);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(ps: &[&'static dyn Problem]) -> Vec<String> {
        ps.iter()
            .map(|p| format!("{}@{}", p.name(), p.shape_name().unwrap()))
            .collect()
    }

    #[test]
    fn all_gives_every_shape_of_each_problem_in_order() {
        let p = bench_problems::find_problem("fm_interaction").unwrap();
        let got = at_shapes(&[p], Preset::Full, &["all".into()]).unwrap();
        let want: Vec<String> = p
            .shapes(Preset::Full)
            .iter()
            .map(|s| format!("fm_interaction@{}", s.name))
            .collect();
        assert_eq!(names(&got), want);
        assert_eq!(got[1].sizes(Preset::Full), p.shapes(Preset::Full)[1].sizes);
    }

    #[test]
    fn names_pick_shapes_and_an_unknown_one_lists_those_there_are() {
        let a = bench_problems::find_problem("fm_interaction").unwrap();
        let b = bench_problems::find_problem("unique_indices").unwrap();
        let got = at_shapes(&[a, b], Preset::Full, &["default".into(), "k32".into()]).unwrap();
        assert_eq!(
            names(&got),
            [
                "fm_interaction@default",
                "fm_interaction@k32",
                "unique_indices@default"
            ]
        );
        let e = at_shapes(&[a], Preset::Full, &["d999".into()])
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("`d999`") && e.contains("k32") && e.contains("all"),
            "{e}"
        );
    }
}
