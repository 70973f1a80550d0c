//! Input sets made ahead: while the workers measure one problem at one shape, a thread of the
//! orchestrator makes the input sets and oracles of the units after it into the run's input
//! cache ([`crate::evaluate::prefetch`]), so a worker reads them and goes straight to the
//! device: on a GPU host the CPUs' part of preparing (generating, computing oracles) overlaps
//! the GPU's part of the unit before. A set the worker asks for before it is made the worker
//! makes itself (both write atomically: the same bytes). Its seconds are in `run.json`'s
//! setup as `inputs_made_ahead` (overlapped, so not added to the wall time's phases).
use crate::evaluate::{EvalConfig, InputCache};
use bench_problems::Problem;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

/// Makes the sets of each `(problem, cache root)` in turn, stopping between sets once `stop`
/// is set; the seconds it took. A failure is a warning: the worker makes the set itself.
pub(super) fn prefetch(
    ahead: &[(&'static dyn Problem, PathBuf)],
    eval: &EvalConfig,
    stop: &AtomicBool,
) -> f64 {
    let mut seconds = 0.0;
    for (problem, root) in ahead {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
        let cache = InputCache::new(root, *problem);
        match crate::evaluate::prefetch(*problem, eval, &cache, stop) {
            Ok(s) => seconds += s,
            Err(e) => eprintln!(
                "warning: making {}'s inputs ahead: {e:#} (its worker makes them)",
                problem.name()
            ),
        }
    }
    seconds
}
