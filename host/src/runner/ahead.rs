//! The next unit's input sets and oracles made ahead: while a unit is measured, a worker in
//! `prepare_only` mode ([`crate::runner::worker::WorkerSpec::prepare_only`]) makes the next
//! unit's sets into the input cache, on the host, at the lowest CPU priority (nice 19, so the
//! measuring worker's threads come first). One at a time, one unit ahead, into that unit's own
//! directory (a unit's removal never touches it); the unit's worker then reads every set and
//! oracle from the cache. Only on a GPU with one device, where the timing is the device's (on
//! the emulator the CPU is the timed machine); `DLRM_BENCH_PREPARE_AHEAD=1` or `=0` forces it
//! on or off.
use super::activity::{Phase, PhaseTimes};
use super::spawn::{spawn_worker, Worker};
use super::worker::{Event, WorkerSpec};
use std::path::Path;
use std::time::{Duration, Instant};

/// The environment variable that forces preparing ahead on (`1`) or off (`0`).
pub(crate) const PREPARE_AHEAD_ENV: &str = "DLRM_BENCH_PREPARE_AHEAD";

/// Whether a run prepares units ahead: `on_gpu` with one device, unless the environment says.
pub(crate) fn enabled(on_gpu: bool, devices: usize) -> bool {
    match std::env::var(PREPARE_AHEAD_ENV).as_deref() {
        Ok("1") => true,
        Ok("0") => false,
        _ => on_gpu && devices <= 1,
    }
}

/// A unit being prepared ahead.
pub(crate) struct Ahead {
    worker: Worker,
    started: Instant,
}

/// What preparing ahead did over a run: units, and the seconds their workers took (beside the
/// measurements, so not in the phase table; only a wait for one is).
#[derive(Default)]
pub(crate) struct AheadTotals {
    pub units: usize,
    pub seconds: f64,
}

impl Ahead {
    /// Starts preparing `spec`'s unit (made `prepare_only` here); `None` when no worker
    /// starts (the unit's own worker then prepares it, as without this).
    pub(crate) fn start(exe: &Path, mut spec: WorkerSpec) -> Option<Ahead> {
        spec.prepare_only = true;
        spec.candidates.clear();
        let worker = spawn_worker(exe, &spec).ok()?;
        // SAFETY: setpriority on the child's own pid, a plain syscall.
        unsafe {
            libc::setpriority(libc::PRIO_PROCESS, worker.child.id(), 19);
        }
        Some(Ahead {
            worker,
            started: Instant::now(),
        })
    }

    /// Waits (at most `limit_s`) for the preparation to end, killing it past that; adds its
    /// seconds to `totals` and returns the wait, counted as [`Phase::Store`] (waiting for the
    /// input cache). A failed preparation costs nothing more: the unit's worker makes what is
    /// missing.
    pub(crate) fn finish(mut self, limit_s: f64, totals: &mut AheadTotals) -> PhaseTimes {
        let waited = Instant::now();
        let deadline = waited + Duration::from_secs_f64(limit_s);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.worker.events.recv_timeout(left) {
                Ok(Some(Event::Prepared { .. })) | Ok(None) => break,
                Ok(Some(_)) => {}
                Err(_) => {
                    eprintln!(
                        "warning: a unit's inputs prepared ahead: stopped after {limit_s:.0} s"
                    );
                    break;
                }
            }
        }
        self.worker.kill();
        totals.units += 1;
        totals.seconds += self.started.elapsed().as_secs_f64();
        PhaseTimes([(Phase::Store, waited.elapsed().as_secs_f64())].into())
    }
}
