//! The next units' input sets and oracles made ahead: while a unit is measured, workers in
//! `prepare_only` mode ([`crate::runner::worker::WorkerSpec::prepare_only`]) make the next
//! units' sets into the input cache, on the host, at the lowest CPU priority on half the cores
//! each (so the measuring worker's threads come first). At most [`DEPTH`] at once, the next
//! units in order, each into its unit's own directory (a unit's removal never touches it), and
//! only for a unit with work left (not the done units of a resumed run) where memory and the
//! cache's file system have room; the unit's worker then reads every set and
//! oracle from the cache. A preparation that did not end with every set cached is removed
//! whole, so no worker starts from a half-made unit (it would hold its tables twice). Only on
//! a GPU with one device, where the timing is the device's (on the emulator the CPU is the
//! timed machine); `DLRM_BENCH_PREPARE_AHEAD=1` or `=0` forces it on or off (never with
//! several devices, whose caches are per device).
use super::activity::{Phase, PhaseTimes};
use super::spawn::{spawn_worker, Worker};
use super::worker::{Event, WorkerSpec};
use crate::evaluate::InputCache;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The pids of the workers preparing ahead: an interrupted run stops them before it removes
/// the input cache ([`stop_running`]).
static RUNNING: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// How many units may be prepared at once, ahead of the one measured. One was too few: a short
/// unit left the next one's preparation unfinished, and the run waited for it (46.9 s of a
/// 185 s default run on an H100, `results/20261205T174817Z-gpu-full-default-h100`); each
/// preparation takes half the cores, so two take them all, at the lowest priority.
pub(crate) const DEPTH: usize = 2;

fn running() -> std::sync::MutexGuard<'static, Vec<u32>> {
    RUNNING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Kills the workers preparing ahead, if any, and waits for their end (an interrupted run,
/// before it removes the input cache the workers write into).
pub(crate) fn stop_running() {
    let pids = std::mem::take(&mut *running());
    for pid in pids {
        // SAFETY: kill and waitpid on our own child's pid.
        unsafe {
            libc::kill(pid as i32, libc::SIGKILL);
            libc::waitpid(pid as i32, std::ptr::null_mut(), 0);
        }
    }
}

/// The environment variable that forces preparing ahead on (`1`) or off (`0`).
pub(crate) const PREPARE_AHEAD_ENV: &str = "DLRM_BENCH_PREPARE_AHEAD";

/// Whether a run prepares units ahead: `on_gpu` with one device, unless the environment says.
pub(crate) fn enabled(on_gpu: bool, devices: usize) -> bool {
    devices <= 1
        && match std::env::var(PREPARE_AHEAD_ENV).as_deref() {
            Ok("1") => true,
            Ok("0") => false,
            _ => on_gpu,
        }
}

/// Whether the machine has room for another unit's sets beside those of the unit being
/// measured (`current_bytes` in the cache): the cache's file system and the memory (the
/// preparing worker holds a unit's sets while it writes them) each with twice that free, and
/// a margin. A unit of another shape may be larger: twice is the guess; without room the
/// next unit's worker makes its own sets, as without this.
pub(crate) fn room_for_another(cache_root: &Path, current_bytes: u64) -> bool {
    let need = 2 * current_bytes;
    let disk = crate::evaluate::free_bytes(cache_root).is_none_or(|free| free > need + (1 << 30));
    let memory = mem_available().is_none_or(|free| free > need + (4 << 30));
    disk && memory
}

/// `MemAvailable` of /proc/meminfo, in bytes.
fn mem_available() -> Option<u64> {
    parse_mem_available(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

fn parse_mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// A unit being prepared ahead.
pub(crate) struct Ahead {
    worker: Worker,
    started: Instant,
    /// The unit's cache, removed when the preparation does not end well (or never ends).
    cache: InputCache,
    /// Whether [`Self::finish`] saw it whole.
    prepared: bool,
}

/// What preparing ahead did over a run: units, and the seconds their workers took (beside the
/// measurements, so not in the phase table; only a wait for one is).
#[derive(Default)]
pub(crate) struct AheadTotals {
    pub units: usize,
    pub seconds: f64,
    /// The most preparations under way at once (at most [`DEPTH`]).
    pub most_at_once: usize,
}

impl Drop for Ahead {
    /// A preparation never finished (a run that ended early): its worker goes with it, and its
    /// sets with them.
    fn drop(&mut self) {
        let pid = self.worker.child.id();
        running().retain(|&p| p != pid);
        self.worker.kill();
        if !self.prepared {
            self.cache.remove();
        }
    }
}

impl Ahead {
    /// Starts preparing `spec`'s unit (made `prepare_only` here); `None` when no worker
    /// starts (the unit's own worker then prepares it, as without this).
    pub(crate) fn start(exe: &Path, mut spec: WorkerSpec, cache: InputCache) -> Option<Ahead> {
        spec.prepare_only = true;
        spec.candidates.clear();
        match spawn_worker(exe, &spec) {
            Ok(worker) => {
                running().push(worker.child.id());
                Some(Ahead {
                    worker,
                    started: Instant::now(),
                    cache,
                    prepared: false,
                })
            }
            Err(e) => {
                eprintln!("warning: {}: inputs not made ahead: {e:#}", spec.problem);
                None
            }
        }
    }

    /// The bytes of the unit's sets made so far.
    pub(crate) fn cache_bytes(&self) -> u64 {
        self.cache.bytes()
    }

    /// Makes `spec`'s unit's sets now, at full speed (nothing measured meanwhile), waiting at
    /// most `limit_s`: the wait, as [`Self::finish`] counts it. Where no worker starts, the
    /// unit's answers find their sets missing and say so.
    pub(crate) fn prepare_now(
        exe: &Path,
        mut spec: WorkerSpec,
        cache: InputCache,
        limit_s: f64,
    ) -> PhaseTimes {
        spec.prepare_in_foreground = true;
        match Ahead::start(exe, spec, cache) {
            Some(now) => now.finish(limit_s, &mut AheadTotals::default()),
            None => PhaseTimes::default(),
        }
    }

    /// Waits (at most `limit_s`) for the preparation to end, killing it past that; adds a
    /// completed one's seconds to `totals` and returns the wait, counted as [`Phase::Store`]
    /// (waiting for the input cache). An incomplete one is removed: the unit's worker makes its
    /// sets itself.
    pub(crate) fn finish(mut self, limit_s: f64, totals: &mut AheadTotals) -> PhaseTimes {
        let waited = Instant::now();
        let deadline = waited + Duration::from_secs_f64(limit_s);
        let prepared = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.worker.events.recv_timeout(left) {
                Ok(Some(Event::Prepared { .. })) => break true,
                Ok(Some(_)) => {}
                Ok(None) => break false,
                Err(_) => {
                    eprintln!("warning: inputs made ahead: stopped after {limit_s:.0} s");
                    break false;
                }
            }
        };
        let pid = self.worker.child.id();
        running().retain(|&p| p != pid);
        self.worker.kill();
        self.prepared = prepared;
        if prepared {
            totals.units += 1;
            totals.seconds += self.started.elapsed().as_secs_f64();
        } else {
            // The unit's worker makes its sets itself, from an empty directory.
            eprintln!(
                "warning: inputs made ahead did not complete ({}); the unit makes its own",
                self.worker
                    .stderr_tail()
                    .lines()
                    .last()
                    .unwrap_or("no message")
            );
            self.cache.remove();
        }
        PhaseTimes([(Phase::Store, waited.elapsed().as_secs_f64())].into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn available_memory_is_read_from_meminfo() {
        let text = "MemTotal:       131072000 kB\nMemFree:  1000 kB\nMemAvailable:   65536000 kB\n";
        assert_eq!(parse_mem_available(text), Some(65_536_000 * 1024));
        assert_eq!(parse_mem_available("MemTotal: 5 kB\n"), None);
    }

    #[test]
    fn no_room_when_the_unit_would_not_fit_twice() {
        let here = std::env::temp_dir();
        assert!(room_for_another(&here, 0) || mem_available().is_some_and(|m| m < (4 << 30)));
        assert!(!room_for_another(&here, u64::MAX / 4));
    }
}
