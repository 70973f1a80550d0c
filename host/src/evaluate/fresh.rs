//! Fresh inputs for every timed pair (docs/checks-and-timing.md): for a problem that names
//! relabelable inputs ([`Problem::relabeled_inputs`]), before each pair the row ids of the
//! timed set are rewritten on the device, from a kept copy of the originals, by a bijection
//! `r ↦ (a·r + b) mod bound` drawn for that pair from the run's secret seed. Reference and
//! candidate then run on inputs no earlier run saw, so a memo of earlier answers misses wherever
//! it is kept (module globals, another buffer found by address arithmetic, the gaps between
//! allocations), while the workload — which rows are hot, how long the bags are — stays as
//! generated. After the timing the originals are put back.
use super::inputs::DeviceSet;
use crate::backend::{Backend, BackendError, Buffer};
use bench_problems::Problem;
use std::ops::Range;

/// One relabelable input of one timed set.
struct Fresh {
    /// Its name (`indices`).
    name: &'static str,
    /// The index of the set in the run's sets.
    set: usize,
    /// The input the plans read (rewritten before each pair).
    target: Buffer,
    /// Its ids as generated.
    original: Buffer,
    ids: usize,
    bound: u64,
}

/// The relabelable inputs of the timed sets, with their originals.
pub(super) struct Freshener {
    items: Vec<Fresh>,
    seed: u64,
}

impl Freshener {
    /// Copies the relabelable inputs of the sets `rotation` (none when the problem names none,
    /// or a bound is not below 2^32).
    pub fn prepare(
        backend: &mut dyn Backend,
        problem: &dyn Problem,
        sets: &[DeviceSet],
        rotation: Range<usize>,
        seed: u64,
    ) -> Result<Self, BackendError> {
        let mut fresh = Freshener {
            items: Vec::new(),
            seed,
        };
        for (name, symbol) in problem.relabeled_inputs() {
            for i in rotation.clone() {
                let set = &sets[i];
                let (Some(&target), Some(&bound)) =
                    (set.inputs.get(name), set.input.sizes.get(symbol))
                else {
                    continue;
                };
                if !(2..1 << 32).contains(&bound) {
                    continue;
                }
                let original = match backend.alloc(target.bytes) {
                    Ok(b) => b,
                    Err(e) => return Err(fresh.release(backend, e)),
                };
                fresh.items.push(Fresh {
                    name,
                    set: i,
                    target,
                    original,
                    ids: target.bytes / 8,
                    bound: bound as u64,
                });
                if let Err(e) = backend.copy(&original, &target) {
                    return Err(fresh.release(backend, e));
                }
            }
        }
        Ok(fresh)
    }

    /// Frees the copies after a failure, and gives the failure back.
    fn release(self, backend: &mut dyn Backend, e: BackendError) -> BackendError {
        for f in self.items {
            backend.free(f.original);
        }
        e
    }

    /// Whether any input is relabeled.
    pub(crate) fn is_active(&self) -> bool {
        !self.items.is_empty()
    }

    /// Rewrites the relabelable inputs of set `set` with the bijection of draw `draw`, and
    /// returns each one's name, buffer and fingerprint after it: what must still be there when
    /// the pair is over (a candidate that wrote them would be judged on ids of its choosing).
    pub(crate) fn apply(
        &self,
        backend: &mut dyn Backend,
        set: usize,
        draw: u64,
    ) -> Result<Vec<(&'static str, Buffer, u64)>, BackendError> {
        let mut written = Vec::new();
        for f in self.items.iter().filter(|f| f.set == set) {
            let map = affine_bijection(f.bound, data_gen::seed::derive(self.seed, draw));
            backend.relabel_rows(&f.original, &f.target, f.ids, f.bound, map)?;
            written.push((f.name, f.target, backend.fingerprint(&f.target)?));
        }
        Ok(written)
    }

    /// Puts the original ids back and frees the copies.
    pub(crate) fn restore(self, backend: &mut dyn Backend) -> Result<(), BackendError> {
        let mut result = Ok(());
        for f in self.items {
            if result.is_ok() {
                result = backend.copy(&f.target, &f.original);
            }
            backend.free(f.original);
        }
        result
    }
}

/// `(a, b)` of a bijection `r ↦ (a·r + b) mod bound` of `0..bound` (`a` coprime to `bound`, not
/// 1 unless nothing else is), drawn from `draw`.
pub(super) fn affine_bijection(bound: u64, draw: u64) -> (u64, u64) {
    let gcd = |mut x: u64, mut y: u64| {
        while y != 0 {
            (x, y) = (y, x % y);
        }
        x
    };
    let b = data_gen::seed::derive(draw, 1) % bound;
    let a = (2..64)
        .map(|k| 2 + data_gen::seed::derive(draw, k) % (bound - 1).max(1))
        .find(|&a| a < bound && gcd(a, bound) == 1)
        .unwrap_or(1);
    (a, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_drawn_map_is_a_bijection_and_differs_between_draws() {
        for bound in [2u64, 7, 1000, 4096, 8_388_608, 25_156_108] {
            let (a, b) = affine_bijection(bound, 11);
            assert!(a < bound && b < bound, "{bound}");
            let gcd = |mut x: u64, mut y: u64| {
                while y != 0 {
                    (x, y) = (y, x % y);
                }
                x
            };
            assert_eq!(
                gcd(a, bound),
                1,
                "{bound}: a coprime factor, so a bijection"
            );
            let small = bound.min(5000);
            if bound == small {
                let mut seen = vec![false; bound as usize];
                for r in 0..bound {
                    seen[((a * r + b) % bound) as usize] = true;
                }
                assert!(seen.iter().all(|&s| s), "{bound}: a bijection");
            }
        }
        let maps: std::collections::BTreeSet<(u64, u64)> =
            (0..50).map(|d| affine_bijection(8_388_608, d)).collect();
        assert!(maps.len() >= 49, "a new map for (nearly) every draw");
        assert_ne!(affine_bijection(8_388_608, 3).0, 1);
    }
}
