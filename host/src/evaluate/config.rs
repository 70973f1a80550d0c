//! How a problem is evaluated ([`EvalConfig`]) and which input sets that gives it: the public
//! sets from the public seed, the secret sets from the run's secret seed, then the problem's
//! edge cases.
use bench_problems::{Preset, Problem, Sizes};

/// How a problem is evaluated.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct EvalConfig {
    pub preset: Preset,
    /// The public seed; public input set k uses [`public_seed`]`(seed, k)`.
    pub seed: u64,
    /// Drawn at run start, written to `run.json` only when the run ends.
    #[serde(skip)]
    pub secret_seed: u64,
    pub public_sets: usize,
    pub secret_sets: usize,
    /// Input sets the timing rotates among: the first secret ones, which no check showed the
    /// candidate before its timed runs (every timed run is checked).
    pub rotation: usize,
    pub warm_l2: bool,
    pub min_pairs: usize,
    pub max_pairs: usize,
    /// Stop timing once the 95% interval's half-width is below this fraction of the median.
    pub target_half_width: f64,
    /// Seconds of timing per candidate at most.
    pub budget_s: f64,
    /// A win needs the speedup's lower 95% bound above this.
    pub win_threshold: f64,
}

/// Public input sets at a shape other than the default ([`EvalConfig::at_shape`]).
pub const SHAPE_PUBLIC_SETS: usize = 1;
/// Secret (timed) input sets at a shape other than the default, at most.
pub const SHAPE_SECRET_SETS: usize = 2;

/// Seed of public input set `k` of a run with public seed `seed` (also what `gen` writes).
pub(crate) fn public_seed(seed: u64, k: usize) -> u64 {
    data_gen::seed::derive(seed, k as u64)
}

/// Seed of the embedding tables every input set of a run with public seed `seed` shares (also
/// what `gen` writes): see [`bench_problems::Seeds`].
pub fn table_seed(seed: u64) -> u64 {
    data_gen::seed::derive_str(seed, "tables")
}

/// One input set to generate.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct SetPlan {
    /// `public-0`, `secret-1`, `edge-0`, ...
    pub label: String,
    pub sizes: Sizes,
    pub seed: u64,
    /// The seed of the tables ([`table_seed`] of the run's public seed, for every set).
    pub table_seed: u64,
    /// The problem's special-value set of this name instead of a plain generated one.
    pub special: Option<&'static str>,
}

impl SetPlan {
    /// The seeds the set is generated from.
    pub fn seeds(&self) -> bench_problems::Seeds {
        bench_problems::Seeds {
            set: self.seed,
            table: self.table_seed,
        }
    }
}

impl EvalConfig {
    /// The input sets of `problem`, in the order they are checked: public, secret, edge,
    /// special-value (seed `derive(seed, 2000 + k)`).
    pub(super) fn input_sets(&self, problem: &dyn Problem) -> Vec<SetPlan> {
        let base = problem.sizes(self.preset);
        let set = |label: String, sizes: &Sizes, seed: u64| SetPlan {
            label,
            sizes: sizes.clone(),
            seed,
            table_seed: table_seed(self.seed),
            special: None,
        };
        let public = (0..self.public_sets)
            .map(|k| set(format!("public-{k}"), &base, public_seed(self.seed, k)));
        let secret = (0..self.secret_sets).map(|k| {
            let seed = data_gen::seed::derive(self.secret_seed, k as u64);
            set(format!("secret-{k}"), &base, seed)
        });
        let edge = problem
            .edge_sizes(self.preset)
            .into_iter()
            .enumerate()
            .map(|(k, sizes)| {
                let seed = data_gen::seed::derive(self.seed, 1000 + k as u64);
                set(format!("edge-{k}"), &sizes, seed)
            });
        let special = problem
            .special_sets()
            .into_iter()
            .enumerate()
            .map(|(k, name)| SetPlan {
                special: Some(name),
                ..set(
                    format!("special-{name}"),
                    &base,
                    data_gen::seed::derive(self.seed, 2000 + k as u64),
                )
            });
        public.chain(secret).chain(edge).chain(special).collect()
    }

    /// The configuration at `problem`'s shape: the run's at the default shape; at another,
    /// [`SHAPE_PUBLIC_SETS`] public and at most [`SHAPE_SECRET_SETS`] secret sets (all of them
    /// timed), and the problem's edge sets at the shape ([`bench_problems::AtShape`]); the
    /// special-value sets are the default shape's. Every timed run at every shape is checked.
    pub fn at_shape(&self, problem: &dyn Problem) -> EvalConfig {
        match problem.shape_name() {
            Some(s) if s != bench_problems::DEFAULT_SHAPE => EvalConfig {
                public_sets: SHAPE_PUBLIC_SETS.min(self.public_sets),
                secret_sets: SHAPE_SECRET_SETS.min(self.secret_sets),
                rotation: SHAPE_SECRET_SETS.min(self.rotation),
                ..self.clone()
            },
            _ => self.clone(),
        }
    }

    /// A quick check on the emulator (the tests' configuration): `ci` sizes, two public and one
    /// secret input set, the secret set timed, two timed pairs, at most 5 s of timing.
    pub fn quick_ci(seed: u64, secret_seed: u64) -> Self {
        EvalConfig {
            preset: Preset::Ci,
            seed,
            secret_seed,
            public_sets: 2,
            secret_sets: 1,
            rotation: 2,
            warm_l2: false,
            min_pairs: 2,
            max_pairs: 2,
            target_half_width: 0.01,
            budget_s: 5.0,
            win_threshold: 1.0,
        }
    }

    /// The indices (in [`Self::input_sets`]' order) of the sets the timing rotates among: the
    /// first `rotation` secret sets. The candidate's checks skip them, so its first run on each
    /// is a timed one (checked like every timed run): a memo of what the checks showed it
    /// misses there. Empty when the run has no secret set (which `run` refuses).
    pub(super) fn rotation_range(&self) -> std::ops::Range<usize> {
        let n = self.rotation.max(1).min(self.secret_sets);
        self.public_sets..self.public_sets + n
    }
}

/// `quick_ci` with `public_sets` public and `secret_sets` secret sets (the timing rotates among
/// the secret ones), for the tests of `evaluate`.
#[cfg(test)]
pub(super) fn ci_config(public_sets: usize, secret_sets: usize) -> EvalConfig {
    EvalConfig {
        public_sets,
        secret_sets,
        ..EvalConfig::quick_ci(7, 99)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_shape_has_one_public_two_timed_secret_and_its_edge_sets() {
        let p = bench_problems::find_problem("embedding_bag_sum").unwrap();
        let cfg = ci_config(3, 3);
        let default = bench_problems::at_shape(p, Preset::Ci, "default").unwrap();
        assert_eq!(
            cfg.at_shape(&default).input_sets(&default),
            cfg.input_sets(p)
        );
        let other = bench_problems::at_shape(p, Preset::Ci, "one-hot").unwrap();
        let at = cfg.at_shape(&other);
        let labels: Vec<String> = at.input_sets(&other).into_iter().map(|s| s.label).collect();
        assert_eq!(labels, ["public-0", "secret-0", "secret-1", "edge-0"]);
        assert_eq!(at.rotation_range(), 1..3, "both secret sets timed");
    }

    #[test]
    fn sets_are_public_then_secret_then_edge_then_special_with_their_seeds() {
        let problem = bench_problems::find_problem("embedding_bag_sum").unwrap();
        let cfg = ci_config(2, 1);
        let sets = cfg.input_sets(problem);
        let edges = problem.edge_sizes(Preset::Ci);
        assert!(!edges.is_empty());
        let labels: Vec<&str> = sets.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(&labels[..3], ["public-0", "public-1", "secret-0"]);
        let specials = problem.special_sets();
        assert!(!specials.is_empty());
        assert_eq!(labels.len(), 3 + edges.len() + specials.len());
        let last = sets.last().unwrap();
        assert_eq!(last.label, format!("special-{}", specials[0]));
        assert_eq!(last.special, Some(specials[0]));
        assert_eq!(last.seed, data_gen::seed::derive(7, 2000));
        assert_eq!(sets[1].seed, public_seed(7, 1));
        assert_eq!(sets[2].seed, data_gen::seed::derive(99, 0));
        assert_eq!(sets[3].seed, data_gen::seed::derive(7, 1000));
        assert_eq!(sets[0].sizes, problem.sizes(Preset::Ci));
        assert!(
            sets.iter().all(|s| s.table_seed == table_seed(7)),
            "one table for every set, secret ones too"
        );
        assert_eq!(sets[3].sizes, edges[0]);
    }

    #[test]
    fn the_rotation_takes_one_to_all_secret_sets_after_the_public_ones() {
        assert_eq!(ci_config(1, 1).rotation_range(), 1..2);
        let mut cfg = ci_config(3, 5);
        assert_eq!(cfg.rotation_range(), 3..5, "quick_ci rotates 2");
        cfg.rotation = 0;
        assert_eq!(cfg.rotation_range(), 3..4);
        cfg.rotation = 9;
        assert_eq!(cfg.rotation_range(), 3..8);
        let labels: Vec<String> = cfg
            .input_sets(bench_problems::find_problem("fm_interaction").unwrap())
            .into_iter()
            .map(|p| p.label)
            .collect();
        assert!(labels[cfg.rotation_range()]
            .iter()
            .all(|l| l.starts_with("secret-")));
        assert!(
            ci_config(2, 0).rotation_range().is_empty(),
            "no secret set, no rotation"
        );
    }
}
