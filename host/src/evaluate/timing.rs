//! Timing (DESIGN §7): one timed run on the stream (in-out tensors restored and the L2 flushed
//! first, outside the timed region, unless `warm_l2`; after a run of the reference its outputs
//! and scratch are zeroed, so that the candidate timed next cannot copy them), the reference's own series, and
//! interleaved reference/candidate pairs on rotating input sets until the 95% interval of the
//! median ratio is narrow enough or the budget is spent; then the statistics of a series.
use super::config::EvalConfig;
use super::inputs::{DeviceSet, Side};
use super::load::Loaded;
use crate::activity::CandidateRun;
use crate::backend::{Backend, BackendError};
use crate::record::{Ceilings, Speedup, Timing};
use crate::stats;
use bench_problems::{Problem, Work};
use std::time::Instant;

/// Times plans of one problem on its device sets.
pub(super) struct Timer<'a> {
    pub backend: &'a mut dyn Backend,
    pub problem: &'static dyn Problem,
    pub cfg: &'a EvalConfig,
}

/// Times of interleaved pairs: reference ms, candidate ms, and reference / candidate.
pub(super) struct PairTimes {
    pub reference: Vec<f64>,
    pub candidate: Vec<f64>,
    pub ratios: Vec<f64>,
}

impl PairTimes {
    /// The median ratio with its bootstrap 95% interval.
    pub fn speedup(&self, seed: u64) -> Speedup {
        let (lo, hi) = stats::bootstrap_median_ci(&self.ratios, 2000, seed);
        Speedup {
            median: stats::median(&self.ratios),
            ci_low: lo,
            ci_high: hi,
            pairs: self.ratios.len(),
        }
    }
}

impl Timer<'_> {
    /// One timed run of `plan` on set `i` of `sets`, writing `side`'s outputs.
    fn time_once(
        &mut self,
        sets: &[DeviceSet],
        i: usize,
        plan: &Loaded,
        side: Side,
    ) -> Result<f64, BackendError> {
        let set = &sets[i];
        if set.has_in_out() {
            set.reset_outputs(&mut *self.backend, self.problem, side, false)?;
        }
        if !self.cfg.warm_l2 {
            self.backend.flush_l2()?;
        }
        let ms = {
            let _running = CandidateRun::start(side == Side::Candidate);
            self.backend.timer_start()?;
            plan.run(&mut *self.backend, i)?;
            self.backend.timer_stop()?
        };
        if side == Side::Reference {
            // Outside the timed region: the candidate timed next must not find the answer.
            set.clear_outputs(&mut *self.backend, Side::Reference)?;
            plan.clear_scratch(&mut *self.backend, i)?;
        }
        Ok(ms)
    }

    /// The reference alone on the rotation `sets`: one warm-up pass over them, then
    /// 2 · max(min_pairs, 10) timed runs or the budget, whichever ends first.
    pub fn reference_series(
        &mut self,
        sets: &[DeviceSet],
        reference: &Loaded,
    ) -> Result<Vec<f64>, BackendError> {
        let r = sets.len();
        let n = self.cfg.min_pairs.max(10) * 2;
        let started = Instant::now();
        let mut ms = Vec::new();
        for i in 0..n + r {
            let t = self.time_once(sets, i % r, reference, Side::Reference)?;
            if i >= r {
                ms.push(t); // the first pass over the sets is warm-up
            }
            if started.elapsed().as_secs_f64() > self.cfg.budget_s {
                break;
            }
        }
        Ok(ms)
    }

    /// Interleaved pairs (A B, then B A) on the rotation `sets`, after one warm-up pair per set.
    pub fn pairs(
        &mut self,
        sets: &[DeviceSet],
        reference: &Loaded,
        candidate: &Loaded,
    ) -> Result<PairTimes, BackendError> {
        let r = sets.len();
        for s in 0..r {
            self.time_once(sets, s, reference, Side::Reference)?;
            self.time_once(sets, s, candidate, Side::Candidate)?;
        }
        self.backend.synchronize()?;
        let (mut ref_ms, mut cand_ms, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        let started = Instant::now();
        for i in 0..self.cfg.max_pairs {
            let s = i % r;
            let (t_ref, t_cand) = if i % 2 == 0 {
                let a = self.time_once(sets, s, reference, Side::Reference)?;
                (a, self.time_once(sets, s, candidate, Side::Candidate)?)
            } else {
                let b = self.time_once(sets, s, candidate, Side::Candidate)?;
                (self.time_once(sets, s, reference, Side::Reference)?, b)
            };
            ref_ms.push(t_ref);
            cand_ms.push(t_cand);
            ratios.push(t_ref / t_cand.max(1e-9));
            let n = ratios.len();
            if n >= self.cfg.min_pairs && n % 10 == 0 {
                let m = stats::median(&ratios);
                let (lo, hi) = stats::bootstrap_median_ci(&ratios, 500, n as u64);
                if (hi - lo) / 2.0 <= self.cfg.target_half_width * m {
                    break;
                }
            }
            if n >= self.cfg.min_pairs && started.elapsed().as_secs_f64() > self.cfg.budget_s {
                break;
            }
        }
        self.backend.synchronize()?;
        Ok(PairTimes {
            reference: ref_ms,
            candidate: cand_ms,
            ratios,
        })
    }
}

/// The statistics of a series of times (ms) of a plan doing `work`; the share of the physical
/// floor when the ceilings are known.
pub fn timing_stats(ms: &[f64], work: &Work, ceilings: Option<Ceilings>) -> Timing {
    let median = stats::median(ms);
    let floor = ceilings.map(|c| c.floor_ms(work));
    Timing {
        median_ms: median,
        p10_ms: stats::quantile(ms, 0.1),
        p90_ms: stats::quantile(ms, 0.9),
        samples: ms.len(),
        compulsory_gbps: work.compulsory_bytes / median / 1e6,
        logical_gbps: work.logical_bytes / median / 1e6,
        gflops: work.flops / median / 1e6,
        floor_fraction: floor.map(|f| f / median),
    }
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
        };
        let ms = [3.0, 1.0, 2.0, 5.0, 4.0];
        let t = timing_stats(&ms, &work, None);
        assert_eq!((t.median_ms, t.samples), (3.0, 5));
        assert!(t.p10_ms <= t.median_ms && t.median_ms <= t.p90_ms);
        // 2 GB in 3 ms.
        assert!((t.compulsory_gbps - 2e9 / 3e-3 / 1e9).abs() < 1e-6);
        assert!((t.logical_gbps - 2.0 * t.compulsory_gbps).abs() < 1e-6);
        assert!(t.floor_fraction.is_none());
        let ceilings = Ceilings {
            hbm_bytes_per_s: 2e12, // floor: 1 ms for the compulsory bytes
            l2_bytes_per_s: 8e12,
            fp32_flops_per_s: 1e13,
        };
        let t = timing_stats(&ms, &work, Some(ceilings));
        assert!((t.floor_fraction.unwrap() - 1.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn the_speedup_is_the_median_ratio_inside_its_interval() {
        let ratios = vec![1.9, 2.0, 2.1, 2.0, 2.05, 1.95];
        let p = PairTimes {
            reference: vec![2.0; 6],
            candidate: vec![1.0; 6],
            ratios,
        };
        let s = p.speedup(1);
        assert_eq!(s.pairs, 6);
        assert!(s.ci_low <= s.median && s.median <= s.ci_high, "{s:?}");
        assert!((s.median - 2.0).abs() < 0.03);
    }
}
