//! Timed shapes: a problem is checked and timed at a set of shapes per preset ([`Shape`], from
//! [`Problem::shapes`]), the first of which is the preset's own sizes ([`Problem::sizes`],
//! named [`DEFAULT_SHAPE`]). [`AtShape`] is a problem at one of its shapes: the runner evaluates
//! it like any problem (its sizes are the shape's), its edge sets changed as the shape changes
//! the preset's sizes; only the default shape carries the special-value sets (their generators
//! take the preset's sizes).
use crate::check::Tolerance;
use crate::error::ProblemError;
use crate::input_set::{InputSet, Seeds};
use crate::launch::{LaunchSpec, ScratchSpec};
use crate::oracle::{Oracle, Work};
use crate::problem::Problem;
use crate::signature::TensorSpec;
use crate::sizes::{Preset, Sizes};
use data_gen::HostTensor;
use serde::{Deserialize, Serialize};

/// Name of a problem's first shape: its preset's own sizes.
pub const DEFAULT_SHAPE: &str = "default";

/// One timed shape of a problem: a name (unique within the problem), its sizes (every symbol of
/// [`Problem::sizes`], some changed, plus recipe knobs such as `POOL`), and what it stands for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Shape {
    pub name: String,
    pub sizes: Sizes,
    pub about: String,
}

impl Shape {
    /// The default shape: `sizes`, the preset's own.
    pub fn default_of(sizes: Sizes) -> Self {
        Shape {
            name: DEFAULT_SHAPE.into(),
            sizes,
            about: "the preset's sizes".into(),
        }
    }

    /// `base` with `changes` applied, named `name`.
    pub fn varied(name: &str, base: &Sizes, changes: &[(&str, i64)], about: &str) -> Self {
        let mut sizes = base.clone();
        for &(k, v) in changes {
            sizes.insert(k.to_string(), v);
        }
        Shape {
            name: name.into(),
            sizes,
            about: about.into(),
        }
    }
}

/// A shape as a variation of the default: its name, the size symbols it changes, what it
/// stands for.
pub type Variation<'a> = (&'a str, &'a [(&'a str, i64)], &'a str);

/// The size symbols `sizes` sets to other values than `base` (or that `base` lacks), in order:
/// what a shape changes from its preset's sizes.
pub fn changed_from<'a>(sizes: &'a Sizes, base: &Sizes) -> Vec<(&'a String, &'a i64)> {
    sizes
        .iter()
        .filter(|(k, v)| base.get(*k) != Some(*v))
        .collect()
}

/// The default shape of `base` followed by the variations `(name, changes, about)` of it.
pub fn shapes_of(base: Sizes, variations: &[Variation]) -> Vec<Shape> {
    let mut shapes = vec![Shape::default_of(base.clone())];
    shapes.extend(
        variations
            .iter()
            .map(|(name, changes, about)| Shape::varied(name, &base, changes, about)),
    );
    shapes
}

/// `edges` (edge sets of a preset whose sizes are `preset_sizes`) at a shape of sizes `base`:
/// each edge set with the symbols `base` changes from the preset's changed alike, where the edge
/// set keeps the preset's value (a kernel that branches on a width meets the edge cases in that
/// branch too); an edge set that sets such a symbol itself keeps its own value; one equal to
/// `base` or to an earlier one is left out.
pub fn overlay_edges(preset_sizes: &Sizes, edges: Vec<Sizes>, base: &Sizes) -> Vec<Sizes> {
    let changed = changed_from(base, preset_sizes);
    let mut out: Vec<Sizes> = Vec::new();
    for mut edge in edges {
        for &(k, v) in &changed {
            if edge.get(k) == preset_sizes.get(k) {
                edge.insert(k.clone(), *v);
            }
        }
        if &edge != base && !out.contains(&edge) {
            out.push(edge);
        }
    }
    out
}

/// Problem `problem` at its shape `name` of `preset`; an error listing its shapes when it has
/// none of that name.
pub fn at_shape(
    problem: &'static dyn Problem,
    preset: Preset,
    name: &str,
) -> Result<AtShape, ProblemError> {
    let shapes = problem.shapes(preset);
    let names: Vec<&str> = shapes.iter().map(|s| s.name.as_str()).collect();
    let shape = shapes.iter().find(|s| s.name == name).cloned();
    shape
        .map(|shape| AtShape::new(problem, shape))
        .ok_or_else(|| {
            ProblemError::invalid(
                problem.name(),
                format!(
                    "no shape `{name}` at {}; its shapes: {}",
                    preset.name(),
                    names.join(", ")
                ),
            )
        })
}

/// A problem at one of its shapes: everything is the problem's, but its sizes are the shape's,
/// and only the default shape has edge and special-value sets.
pub struct AtShape {
    problem: &'static dyn Problem,
    shape: Shape,
}

impl AtShape {
    /// `problem` at `shape` (any sizes: a test may scale a shape down; the runner takes its
    /// shapes from [`at_shape`]).
    pub fn new(problem: &'static dyn Problem, shape: Shape) -> Self {
        AtShape { problem, shape }
    }

    /// The shape.
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    fn is_default(&self) -> bool {
        self.shape.name == DEFAULT_SHAPE
    }
}

impl Problem for AtShape {
    fn number(&self) -> u32 {
        self.problem.number()
    }
    fn name(&self) -> &'static str {
        self.problem.name()
    }
    fn summary(&self) -> &'static str {
        self.problem.summary()
    }
    fn shape_name(&self) -> Option<&str> {
        Some(&self.shape.name)
    }
    fn tensors(&self) -> Vec<TensorSpec> {
        self.problem.tensors()
    }
    fn sizes(&self, _preset: Preset) -> Sizes {
        self.shape.sizes.clone()
    }
    fn shapes(&self, _preset: Preset) -> Vec<Shape> {
        vec![self.shape.clone()]
    }
    fn recipe(&self, preset: Preset) -> serde_json::Value {
        let mut recipe = self.problem.recipe(preset);
        if let serde_json::Value::Object(map) = &mut recipe {
            map.insert(
                "shape".into(),
                serde_json::json!({"name": self.shape.name, "sizes": self.shape.sizes, "about": self.shape.about}),
            );
        }
        recipe
    }
    fn generate(
        &self,
        preset: Preset,
        sizes: &Sizes,
        seeds: Seeds,
    ) -> Result<InputSet, ProblemError> {
        self.problem.generate(preset, sizes, seeds)
    }
    fn edge_sizes(&self, preset: Preset) -> Vec<Sizes> {
        self.problem.edge_sizes_at(preset, &self.shape.sizes)
    }
    fn special_sets(&self) -> Vec<&'static str> {
        match self.is_default() {
            true => self.problem.special_sets(),
            false => Vec::new(),
        }
    }
    fn generate_special(
        &self,
        name: &str,
        preset: Preset,
        seeds: Seeds,
    ) -> Result<InputSet, ProblemError> {
        self.problem.generate_special(name, preset, seeds)
    }
    fn oracle(&self, inputs: &InputSet) -> Result<Oracle, ProblemError> {
        self.problem.oracle(inputs)
    }
    fn tolerance(&self, output: &TensorSpec) -> Tolerance {
        self.problem.tolerance(output)
    }
    fn work(&self, inputs: &InputSet) -> Work {
        self.problem.work(inputs)
    }
    fn checked_prefix(&self, output: &str) -> bool {
        self.problem.checked_prefix(output)
    }
    fn relabeled_inputs(&self) -> Vec<(&'static str, &'static str)> {
        self.problem.relabeled_inputs()
    }
    fn custom_checked(&self, output: &str) -> bool {
        self.problem.custom_checked(output)
    }
    fn custom_check(
        &self,
        output: &TensorSpec,
        got: &HostTensor,
        inputs: &InputSet,
    ) -> Option<String> {
        self.problem.custom_check(output, got, inputs)
    }
    fn input_stats(&self, inputs: &InputSet) -> serde_json::Value {
        self.problem.input_stats(inputs)
    }
    fn reference(&self) -> Vec<LaunchSpec> {
        self.problem.reference()
    }
    fn reference_scratch(&self) -> Vec<ScratchSpec> {
        self.problem.reference_scratch()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::all_problems;
    use std::collections::BTreeSet;

    #[test]
    fn every_problem_has_four_full_shapes_the_first_its_sizes_and_names_unique() {
        for p in all_problems() {
            for preset in Preset::ALL {
                let shapes = p.shapes(preset);
                assert_eq!(shapes[0].name, DEFAULT_SHAPE, "{}", p.name());
                assert_eq!(
                    shapes[0].sizes,
                    p.sizes(preset),
                    "{} at {}",
                    p.name(),
                    preset.name()
                );
                let names: BTreeSet<&str> = shapes.iter().map(|s| s.name.as_str()).collect();
                assert_eq!(
                    names.len(),
                    shapes.len(),
                    "{}: shape names repeat",
                    p.name()
                );
                let distinct: BTreeSet<String> =
                    shapes.iter().map(|s| format!("{:?}", s.sizes)).collect();
                assert_eq!(
                    distinct.len(),
                    shapes.len(),
                    "{}: two shapes alike",
                    p.name()
                );
                for s in &shapes {
                    let keys: BTreeSet<&String> = s.sizes.keys().collect();
                    assert!(
                        p.sizes(preset).keys().all(|k| keys.contains(k)),
                        "{} {}: a size symbol is missing",
                        p.name(),
                        s.name
                    );
                }
            }
            assert!(p.shapes(Preset::Full).len() >= 4, "{}", p.name());
            assert!(p.shapes(Preset::Ci).len() >= 2, "{}", p.name());
        }
    }

    #[test]
    fn a_problem_at_a_shape_has_its_sizes_and_edge_sets_and_only_the_default_special_sets() {
        let p = crate::find_problem("embedding_bag_sum").unwrap();
        let names: Vec<String> = p.shapes(Preset::Ci).into_iter().map(|s| s.name).collect();
        let other = at_shape(p, Preset::Ci, &names[1]).unwrap();
        assert_eq!(other.shape_name(), Some(names[1].as_str()));
        assert_ne!(other.sizes(Preset::Ci), p.sizes(Preset::Ci));
        assert!(other.special_sets().is_empty());
        // The one-bag edge set at the shape: B = 1 kept, the shape's POOL = 1 added.
        let edges = other.edge_sizes(Preset::Ci);
        assert_eq!(edges.len(), p.edge_sizes(Preset::Ci).len());
        assert_eq!(edges[0]["B"], 1);
        assert_eq!(edges[0].get("POOL"), Some(&1));
        assert_eq!(other.recipe(Preset::Ci)["shape"]["name"], names[1].as_str());
        let default = at_shape(p, Preset::Ci, DEFAULT_SHAPE).unwrap();
        assert_eq!(default.edge_sizes(Preset::Ci), p.edge_sizes(Preset::Ci));
        assert_eq!(default.special_sets(), p.special_sets());
        let e = at_shape(p, Preset::Ci, "huge").err().unwrap().to_string();
        assert!(
            e.contains("no shape `huge`") && e.contains(DEFAULT_SHAPE),
            "{e}"
        );
    }

    #[test]
    fn a_one_hot_shape_draws_bags_of_one_lookup_but_the_empty_bag_0() {
        let p = crate::find_problem("embedding_bag_sum").unwrap();
        let s = at_shape(p, Preset::Full, "one-hot").unwrap();
        let mut sizes = s.sizes(Preset::Full);
        sizes.insert("B".into(), 5000);
        sizes.insert("E".into(), 1 << 16);
        let set = s
            .generate(Preset::Full, &sizes, Seeds { set: 1, table: 2 })
            .unwrap();
        let offsets = set.i64s("offsets").unwrap();
        let lengths: Vec<i64> = offsets.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(lengths[0], 0);
        assert!(lengths[1..].iter().all(|&l| l == 1), "{:?}", &lengths[..20]);
    }

    #[test]
    fn every_shape_and_its_edge_sets_generate_at_ci() {
        for p in all_problems() {
            for s in p.shapes(Preset::Ci) {
                let at = at_shape(p, Preset::Ci, &s.name).unwrap();
                let sets = std::iter::once(s.sizes.clone()).chain(at.edge_sizes(Preset::Ci));
                for sizes in sets {
                    let set = p
                        .generate(Preset::Ci, &sizes, Seeds { set: 3, table: 4 })
                        .unwrap_or_else(|e| panic!("{} {} {sizes:?}: {e}", p.name(), s.name));
                    p.oracle(&set)
                        .unwrap_or_else(|e| panic!("{} {}: {e}", p.name(), s.name));
                }
            }
        }
    }

    #[test]
    fn unique_indices_edge_sets_stay_valid_at_every_shape() {
        // Its all-distinct edge set sets E from N: at a shape that narrows E or grows N, an
        // overlay of the preset's edge sets would ask for more distinct ids than rows.
        let p = crate::find_problem("unique_indices").unwrap();
        for preset in Preset::ALL {
            for s in p.shapes(preset) {
                let at = at_shape(p, preset, &s.name).unwrap();
                for e in at.edge_sizes(preset) {
                    if e.get("DISTINCT") == Some(&1) {
                        assert!(e["N"] <= e["E"], "{} {}: {e:?}", preset.name(), s.name);
                    }
                }
            }
        }
    }
}
