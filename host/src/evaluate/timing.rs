//! Timing (docs/design.md §7): one timed run on the stream (its outputs prepared and the L2 flushed
//! first, outside the timed region, unless `warm_l2`), the reference's own series, and
//! interleaved reference/candidate pairs on the rotation (the secret sets, which no check
//! showed the candidate) until the 95% interval of the median ratio is narrow enough or the
//! budget is spent; then the statistics of a series.
//!
//! No timed run of a candidate goes unchecked, and none can lean on an earlier one: before each,
//! its outputs get a fresh canary ([`OutputFill::Canary`]) and its scratch a fresh byte; after
//! each, its outputs are compared with the reference's on the same inputs
//! ([`Verifier::check_timed`]) and its module's globals must be as loaded
//! ([`Verifier::state_left`], which also restores them). A failure ends the timing as
//! `incorrect`, naming the run and the set. The reference's outputs and scratch are zeroed after
//! each comparison (or, when no comparison follows, right after its run), so that no candidate
//! run finds them.
use super::config::EvalConfig;
use super::fresh::Freshener;
use super::inputs::{DeviceSet, OutputFill, Side};
use super::load::Loaded;
use super::verify::Verifier;
use crate::backend::{Backend, BackendError};
use crate::evaluate::quantiles;
use crate::results::record::{Ceilings, Speedup, Timing};
use crate::runner::activity::CandidateRun;
use bench_problems::{Problem, Work};
use std::ops::Range;
use std::time::Instant;

/// Times plans of one problem on its device sets.
pub(super) struct Timer<'a> {
    pub backend: &'a mut dyn Backend,
    pub problem: &'static dyn Problem,
    pub cfg: &'a EvalConfig,
    /// Rewrites the timed set's relabelable inputs before each pair ([`Freshener`]).
    pub fresh: Option<&'a Freshener>,
}

/// Why timing stopped before it had its pairs.
#[derive(Debug)]
pub(super) enum TimingFailure {
    /// A timed run of the candidate was wrong or left state behind (the message says which).
    Incorrect(String),
    /// The device failed.
    Device(BackendError),
}

impl From<BackendError> for TimingFailure {
    fn from(e: BackendError) -> Self {
        TimingFailure::Device(e)
    }
}

/// Times of interleaved pairs: reference ms, candidate ms, and reference / candidate.
pub(super) struct PairTimes {
    pub reference: Vec<f64>,
    pub candidate: Vec<f64>,
    pub ratios: Vec<f64>,
    /// Timed runs of the candidate checked (warm-up included).
    pub checked: usize,
    /// Seconds of those checks (inside the timing phase, outside every timed region).
    pub check_s: f64,
}

impl PairTimes {
    /// The median ratio with its bootstrap 95% interval.
    pub fn speedup(&self, seed: u64) -> Speedup {
        let (lo, hi) = quantiles::bootstrap_median_ci(&self.ratios, 2000, seed);
        Speedup {
            median: quantiles::median(&self.ratios),
            ci_low: lo,
            ci_high: hi,
            pairs: self.ratios.len(),
        }
    }
}

impl Timer<'_> {
    /// One timed run of `plan` on set `i`, writing `side`'s outputs: the reference's in-out
    /// tensors restored first (its other outputs keep what they hold); the candidate's outputs
    /// filled with the canary of `salt` and all its scratch with a byte of it, and the local and
    /// shared memory its threads could find again overwritten. The reference's
    /// outputs and scratch are zeroed after it unless `keep_reference`.
    fn time_once(
        &mut self,
        sets: &[DeviceSet],
        i: usize,
        plan: &Loaded,
        side: Side,
        salt: u64,
        keep_reference: bool,
    ) -> Result<f64, BackendError> {
        let set = &sets[i];
        match side {
            Side::Reference if set.has_in_out() => {
                set.reset_outputs(&mut *self.backend, self.problem, side, OutputFill::Keep)?
            }
            Side::Reference => {}
            Side::Candidate => {
                let (fill, byte) = (OutputFill::Canary(salt), salt.to_le_bytes()[3] | 1);
                plan.prepare_run(&mut *self.backend, set, self.problem, side, fill, byte)?;
            }
        }
        if !self.cfg.warm_l2 {
            self.backend.flush_l2()?;
        } else if side == Side::Reference {
            // The candidate's runs follow the thread-state scrub, which sweeps L2: with a warm
            // L2 the reference's must start from the same.
            self.backend.clear_thread_state()?;
        }
        let ms = {
            let _running = CandidateRun::start(side == Side::Candidate);
            self.backend.timer_start()?;
            plan.run(&mut *self.backend, i)?;
            self.backend.timer_stop()?
        };
        if side == Side::Reference && !keep_reference {
            // Outside the timed region: the candidate timed next must not find the answer.
            self.clear_reference(set, i, plan)?;
        }
        Ok(ms)
    }

    /// Zeroes the reference's outputs and scratch of set `i`.
    fn clear_reference(
        &mut self,
        set: &DeviceSet,
        i: usize,
        reference: &Loaded,
    ) -> Result<(), BackendError> {
        set.clear_outputs(&mut *self.backend, Side::Reference)?;
        reference.clear_scratch(&mut *self.backend, i)
    }

    /// The reference alone on the sets `rotation` (indices into `sets`): one warm-up pass over
    /// them, then 2 · max(min_pairs, 10) timed runs or the budget, whichever ends first, but
    /// never fewer than min_pairs (at least one) timed runs: a warm-up longer than the budget
    /// once left none, a NaN median, and a record the runner could not read.
    pub(crate) fn reference_series(
        &mut self,
        sets: &[DeviceSet],
        rotation: Range<usize>,
        reference: &Loaded,
    ) -> Result<Vec<f64>, BackendError> {
        let order: Vec<usize> = rotation.collect();
        let r = order.len();
        let n = self.cfg.min_pairs.max(10) * 2;
        let started = Instant::now();
        let mut ms = Vec::new();
        for i in 0..n + r {
            let t = self.time_once(sets, order[i % r], reference, Side::Reference, 0, false)?;
            if i >= r {
                ms.push(t); // the first pass over the sets is warm-up
            }
            let enough = ms.len() >= self.cfg.min_pairs.max(1);
            if enough && started.elapsed().as_secs_f64() > self.cfg.budget_s {
                break;
            }
        }
        Ok(ms)
    }

    /// One pair on set `s`, the reference first when `reference_first`, then the check of the
    /// candidate's run (`run`: its number, for the message). Returns (reference ms, candidate
    /// ms) and adds the check's seconds to `check_s`.
    #[allow(clippy::too_many_arguments)]
    fn pair(
        &mut self,
        sets: &[DeviceSet],
        s: usize,
        reference: &Loaded,
        candidate: &Loaded,
        reference_first: bool,
        run: usize,
        check_s: &mut f64,
    ) -> Result<(f64, f64), TimingFailure> {
        let salt = data_gen::seed::derive(self.cfg.secret_seed ^ 0x7133_D0C5, run as u64);
        let relabeled = match self.fresh {
            Some(fresh) => fresh.apply(&mut *self.backend, s, run as u64)?,
            None => Vec::new(),
        };
        let needs_reference = {
            let v = Verifier {
                backend: &mut *self.backend,
                problem: self.problem,
            };
            v.timed_check_needs_reference(&sets[s])
        };
        let (t_ref, t_cand) = if reference_first {
            let a = self.time_once(sets, s, reference, Side::Reference, 0, false)?;
            (
                a,
                self.time_once(sets, s, candidate, Side::Candidate, salt, false)?,
            )
        } else {
            let b = self.time_once(sets, s, candidate, Side::Candidate, salt, false)?;
            let keep = needs_reference;
            (
                self.time_once(sets, s, reference, Side::Reference, 0, keep)?,
                b,
            )
        };
        // The relabelled ids must be as written: a candidate that rewrote them (all to one row,
        // say) would be compared with a reference run on its choice of inputs.
        for (name, buffer, fingerprint) in relabeled {
            if self.backend.fingerprint(&buffer)? != fingerprint {
                let msg = format!(
                    "timed run {run} on {}: input `{name}` was modified",
                    sets[s].label
                );
                self.clear_reference(&sets[s], s, reference)?;
                return Err(TimingFailure::Incorrect(msg));
            }
        }
        let started = Instant::now();
        let verdict = self.check_run(
            sets,
            s,
            reference,
            candidate,
            reference_first && needs_reference,
            run,
        );
        *check_s += started.elapsed().as_secs_f64();
        match verdict? {
            None => Ok((t_ref, t_cand)),
            Some(msg) => Err(TimingFailure::Incorrect(msg)),
        }
    }

    /// The check of the candidate's timed run `run` on set `s` (the reference run again first,
    /// untimed, when `rerun_reference`), then its module's globals; the reference's outputs and
    /// scratch are zeroed after, whatever the verdict.
    fn check_run(
        &mut self,
        sets: &[DeviceSet],
        s: usize,
        reference: &Loaded,
        candidate: &Loaded,
        rerun_reference: bool,
        run: usize,
    ) -> Result<Option<String>, BackendError> {
        let set = &sets[s];
        let label = format!("timed run {run} on {}", set.label);
        let mut v = Verifier {
            backend: &mut *self.backend,
            problem: self.problem,
        };
        if rerun_reference {
            v.run_reference(set, s, reference)?;
        } else {
            v.backend.synchronize()?;
        }
        let verdict = v.check_timed(set, &label);
        let state = v.state_left(candidate);
        self.clear_reference(set, s, reference)?;
        if let Some(msg) = verdict? {
            return Ok(Some(msg));
        }
        Ok(state?.map(|msg| format!("{label}: {msg}")))
    }

    /// After a timing on relabeled inputs, with the generated ones back: one more run of the
    /// candidate on each set of `rotation`, prepared as a timed run and its module's globals
    /// checked, so the recheck finds outputs of the inputs its oracle was computed for.
    pub(crate) fn settle(
        &mut self,
        sets: &[DeviceSet],
        rotation: Range<usize>,
        candidate: &Loaded,
    ) -> Result<Option<String>, BackendError> {
        for s in rotation {
            let salt = data_gen::seed::derive(self.cfg.secret_seed ^ 0x005E_771E, s as u64);
            self.time_once(sets, s, candidate, Side::Candidate, salt, false)?;
            self.backend.synchronize()?;
            let mut v = Verifier {
                backend: &mut *self.backend,
                problem: self.problem,
            };
            if let Some(msg) = v.state_left(candidate)? {
                return Ok(Some(format!(
                    "the run after the timing on {}: {msg}",
                    sets[s].label
                )));
            }
        }
        Ok(None)
    }

    /// Interleaved pairs (A B, then B A) on the sets `rotation` (indices into `sets`), after one
    /// warm-up pair per set; every run of the candidate checked.
    pub fn pairs(
        &mut self,
        sets: &[DeviceSet],
        rotation: Range<usize>,
        reference: &Loaded,
        candidate: &Loaded,
    ) -> Result<PairTimes, TimingFailure> {
        let order: Vec<usize> = rotation.collect();
        let r = order.len();
        let mut check_s = 0.0;
        let mut run = 0;
        for &s in &order {
            run += 1;
            self.pair(sets, s, reference, candidate, true, run, &mut check_s)?;
        }
        self.backend.synchronize()?;
        let (mut ref_ms, mut cand_ms, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        let started = Instant::now();
        let checks_before = check_s;
        for i in 0..self.cfg.max_pairs {
            run += 1;
            let s = order[i % r];
            let (t_ref, t_cand) =
                self.pair(sets, s, reference, candidate, i % 2 == 0, run, &mut check_s)?;
            ref_ms.push(t_ref);
            cand_ms.push(t_cand);
            ratios.push(t_ref / t_cand.max(1e-9));
            let n = ratios.len();
            if n >= self.cfg.min_pairs && n % 10 == 0 {
                let m = quantiles::median(&ratios);
                let (lo, hi) = quantiles::bootstrap_median_ci(&ratios, 500, n as u64);
                if (hi - lo) / 2.0 <= self.cfg.target_half_width * m {
                    break;
                }
            }
            // The budget is of timing: the checks between the timed runs do not spend it.
            let timing_s = started.elapsed().as_secs_f64() - (check_s - checks_before);
            if n >= self.cfg.min_pairs && timing_s > self.cfg.budget_s {
                break;
            }
        }
        self.backend.synchronize()?;
        Ok(PairTimes {
            reference: ref_ms,
            candidate: cand_ms,
            ratios,
            checked: run,
            check_s,
        })
    }
}

/// The statistics of a series of times (ms) of a plan doing `work`; the share of the physical
/// floor when the ceilings are known.
pub(crate) fn timing_stats(ms: &[f64], work: &Work, ceilings: Option<Ceilings>) -> Timing {
    let median = quantiles::median(ms);
    let floor = ceilings.map(|c| c.floor_ms(work));
    Timing {
        median_ms: median,
        p10_ms: quantiles::quantile(ms, 0.1),
        p90_ms: quantiles::quantile(ms, 0.9),
        samples: ms.len(),
        compulsory_gbps: work.compulsory_bytes / median / 1e6,
        logical_gbps: work.logical_bytes / median / 1e6,
        gflops: work.flops / median / 1e6,
        floor_fraction: floor.map(|f| f / median),
        gather_floor_fraction: None,
    }
}

/// `t` with its share of the gather floor ([`Ceilings::gather_floor_ms`]), when the work
/// gathers rows and the gather ceilings are known.
pub(crate) fn with_gather_floor(mut t: Timing, work: &Work, ceilings: Option<Ceilings>) -> Timing {
    let floor = ceilings.and_then(|c| c.gather_floor_ms(work));
    t.gather_floor_fraction = floor.map(|f| f / t.median_ms).filter(|f| f.is_finite());
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timing_stats_give_rates_at_the_median_and_the_share_of_the_floor() {
        let work = Work {
            compulsory_bytes: 2e9,
            logical_bytes: 4e9,
            flops: 1e9,
            gathered: None,
        };
        let ms = [3.0, 1.0, 2.0, 5.0, 4.0];
        let t = timing_stats(&ms, &work, None);
        assert_eq!((t.median_ms, t.samples), (3.0, 5));
        assert!(t.p10_ms <= t.median_ms && t.median_ms <= t.p90_ms);
        // 2 GB in 3 ms.
        assert!((t.compulsory_gbps - 2e9 / 3e-3 / 1e9).abs() < 1e-6);
        assert!((t.logical_gbps - 2.0 * t.compulsory_gbps).abs() < 1e-6);
        assert!(t.floor_fraction.is_none());
        let mut ceilings = Ceilings {
            hbm_bytes_per_s: 2e12, // floor: 1 ms for the compulsory bytes
            l2_bytes_per_s: 8e12,
            fp32_flops_per_s: 1e13,
            gathers: None,
        };
        let t = timing_stats(&ms, &work, Some(ceilings));
        assert!((t.floor_fraction.unwrap() - 1.0 / 3.0).abs() < 1e-9);
        // Rows of 300 bytes, 1.5 GB of the 2 GB compulsory bytes distinct rows, every lookup
        // 3 GB of the 4 GB logical ones: at the 256-byte rates (the widest not above 300) of
        // 1 TB/s from HBM and 2 TB/s from L2, 1.5 ms + 0.25 ms compulsory against 1.5 ms +
        // 0.125 ms logical: 1.75 ms, 7/12 of the median.
        let gather = |row_bytes: u32, hbm: f64, l2: f64| crate::results::record::GatherCeiling {
            row_bytes,
            hbm_bytes_per_s: hbm,
            l2_bytes_per_s: l2,
            atomic_bytes_per_s: 1e11,
        };
        ceilings.gathers = Some(crate::results::record::GATHER_ROW_BYTES.map(|b| match b {
            256 => gather(b, 1e12, 2e12),
            _ => gather(b, 1.5e12, 3e12),
        }));
        let rows = |row_bytes| bench_problems::Gathered {
            row_bytes,
            distinct_bytes: 1.5e9,
            lookup_bytes: 3e9,
        };
        let gathering = Work {
            gathered: Some(rows(300.0)),
            ..work
        };
        let g = with_gather_floor(t.clone(), &gathering, Some(ceilings));
        assert!((g.gather_floor_fraction.unwrap() - 1.75 / 3.0).abs() < 1e-9);
        // Rows narrower than any measured take the narrowest's rates (64 B: 1.5 TB/s).
        let narrow = Work {
            gathered: Some(rows(32.0)),
            ..work
        };
        let n = with_gather_floor(t.clone(), &narrow, Some(ceilings));
        assert!((n.gather_floor_fraction.unwrap() - (1.0 + 0.25) / 3.0).abs() < 1e-9);
        assert!(with_gather_floor(t, &work, Some(ceilings))
            .gather_floor_fraction
            .is_none());
    }

    #[test]
    fn the_speedup_is_the_median_ratio_inside_its_interval() {
        let ratios = vec![1.9, 2.0, 2.1, 2.0, 2.05, 1.95];
        let p = PairTimes {
            reference: vec![2.0; 6],
            candidate: vec![1.0; 6],
            ratios,
            checked: 9,
            check_s: 0.0,
        };
        let s = p.speedup(1);
        assert_eq!(s.pairs, 6);
        assert!(s.ci_low <= s.median && s.median <= s.ci_high, "{s:?}");
        assert!((s.median - 2.0).abs() < 0.03);
    }
}
