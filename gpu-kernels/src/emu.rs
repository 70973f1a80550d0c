//! The CPU emulator: runs a kernel's Rust body with GPU launch semantics on the host.
//!
//! A launch runs its blocks one after another. Each block gets one OS thread per GPU thread, so
//! the block barrier ([`crate::dev::sync_threads`]) really makes every thread wait, and shared
//! memory is one buffer all threads of the block see. Warp shuffles go through a per-warp
//! exchange area between two warp barriers, so all lanes of a warp must take part (as with
//! `__shfl_sync(0xffffffff, ..)`). Threads that return early count as arrived at later barriers.
//! Shared memory is poisoned (0xFF bytes, a NaN for f32) at each block start, as real shared
//! memory holds garbage. A panic in any thread (an assertion, a misaligned vector access) stops
//! the launch and is returned as an error instead of hanging the other threads.
//!
//! It is meant for correctness at small sizes, not speed: its timings are not GPU timings.
use std::cell::{Cell, UnsafeCell};
use std::collections::HashMap;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

/// Lanes in a warp.
pub const WARP: u32 = 32;
/// Most threads in one block, as on NVIDIA GPUs.
pub const MAX_BLOCK_THREADS: u32 = 1024;
/// Most dynamic shared memory the emulator gives one block (the H200's opt-in limit).
pub const MAX_SHARED_BYTES: usize = 227 * 1024;

/// A kernel the emulator can run: its PTX entry name, the byte size of each parameter, and a
/// function that unpacks 64-bit argument words and runs the body for the calling thread.
#[derive(Clone, Copy)]
pub struct EmuKernel {
    pub name: &'static str,
    pub param_sizes: &'static [usize],
    pub call: fn(&[u64]),
}

impl fmt::Debug for EmuKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmuKernel")
            .field("name", &self.name)
            .field("param_sizes", &self.param_sizes)
            .finish()
    }
}

/// Turns a 64-bit argument word into a kernel parameter (pointers are addresses, integers are
/// truncated to their width, f32 is its bit pattern in the low 32 bits).
pub trait FromArgWord {
    fn from_word(word: u64) -> Self;
}

impl<T> FromArgWord for *const T {
    fn from_word(word: u64) -> Self {
        word as usize as *const T
    }
}
impl<T> FromArgWord for *mut T {
    fn from_word(word: u64) -> Self {
        word as usize as *mut T
    }
}
macro_rules! int_arg {
    ($($t:ty),*) => {$(
        impl FromArgWord for $t {
            fn from_word(word: u64) -> Self {
                word as $t
            }
        }
    )*};
}
int_arg!(u32, i32, u64, i64, usize);
impl FromArgWord for f32 {
    fn from_word(word: u64) -> Self {
        f32::from_bits(word as u32)
    }
}

/// Grid and block shape of one launch, plus its dynamic shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_bytes: usize,
}

/// Why an emulated launch failed.
#[derive(Debug, Clone, PartialEq)]
pub enum EmuError {
    /// Grid or block empty or past the limits, or too much shared memory.
    BadConfig(String),
    /// The argument list does not match the kernel's parameters.
    WrongArguments {
        kernel: String,
        expected: usize,
        got: usize,
    },
    /// A thread of the kernel panicked (its message).
    KernelFault(String),
}

impl fmt::Display for EmuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EmuError::BadConfig(m) => write!(f, "bad launch configuration: {m}"),
            EmuError::WrongArguments {
                kernel,
                expected,
                got,
            } => {
                write!(f, "kernel {kernel} takes {expected} arguments, got {got}")
            }
            EmuError::KernelFault(m) => write!(f, "kernel fault: {m}"),
        }
    }
}

impl std::error::Error for EmuError {}

/// Runs `kernel` with argument words `args` (see [`FromArgWord`]).
///
/// # Safety
/// Pointer arguments must point to host memory large enough for what the kernel touches.
pub unsafe fn launch_kernel(
    kernel: &EmuKernel,
    config: &LaunchConfig,
    args: &[u64],
) -> Result<(), EmuError> {
    launch_kernel_resident(kernel, config, args, 1)
}

/// Runs `body` once per GPU thread of the launch, block by block.
///
/// # Safety
/// `body` is a kernel: whatever memory it touches must be valid for the whole launch.
pub unsafe fn launch(config: &LaunchConfig, body: &(dyn Fn() + Sync)) -> Result<(), EmuError> {
    launch_resident(config, body, 1)
}

/// As [`launch_kernel`], with `resident` blocks running at once (see [`launch_resident`]).
///
/// # Safety
/// As [`launch_kernel`].
pub unsafe fn launch_kernel_resident(
    kernel: &EmuKernel,
    config: &LaunchConfig,
    args: &[u64],
    resident: usize,
) -> Result<(), EmuError> {
    if args.len() != kernel.param_sizes.len() {
        return Err(EmuError::WrongArguments {
            kernel: kernel.name.to_string(),
            expected: kernel.param_sizes.len(),
            got: args.len(),
        });
    }
    launch_resident(config, &|| (kernel.call)(args), resident)
}

/// Runs `body` with `resident` blocks in flight at once, as on a GPU: slot `s` runs blocks
/// `s, s + resident, …`, each slot with its own threads, barriers and shared memory. With one
/// slot (what [`launch`] does) every block sees all earlier blocks finished, so a decoupled
/// look-back never waits or meets a tile that has published only its aggregate; with several,
/// it does. Kernels that hand out work by an atomic tile counter cannot deadlock here (every
/// tile a block waits for belongs to a block already running); a kernel that waits for a block
/// not yet started would, as it can on a GPU.
///
/// # Safety
/// As [`launch`]. A fault in one block while another spins on it in plain memory reads hangs.
pub unsafe fn launch_resident(
    config: &LaunchConfig,
    body: &(dyn Fn() + Sync),
    resident: usize,
) -> Result<(), EmuError> {
    validate(config)?;
    let threads = config.block.iter().product::<u32>();
    let blocks = config.grid.iter().map(|&g| g as u64).product::<u64>();
    let slots = (resident.max(1) as u64).min(blocks) as usize;
    let states: Vec<BlockState> = (0..slots).map(|_| BlockState::new(*config)).collect();
    let fault: Mutex<Option<String>> = Mutex::new(None);

    std::thread::scope(|scope| {
        for (slot, block) in states.iter().enumerate() {
            for linear in 0..threads {
                let states = &states;
                let fault = &fault;
                let thread_idx = [
                    linear % config.block[0],
                    linear / config.block[0] % config.block[1],
                    linear / (config.block[0] * config.block[1]),
                ];
                std::thread::Builder::new()
                    .stack_size(512 * 1024)
                    .spawn_scoped(scope, move || {
                        let ctx = ThreadCtx {
                            thread_idx,
                            lane: linear % WARP,
                            warp: linear / WARP,
                            block,
                        };
                        CURRENT.with(|c| c.set(&ctx as *const ThreadCtx as *const ()));
                        let result = panic::catch_unwind(AssertUnwindSafe(|| {
                            for b in (slot as u64..blocks).step_by(slots) {
                                if linear == 0 {
                                    block.begin_block(b);
                                }
                                block.block_start.wait_or_unwind();
                                body();
                                block.barrier.exit();
                                block.warps[ctx.warp as usize].barrier.exit();
                                block.block_start.wait_or_unwind();
                            }
                        }));
                        CURRENT.with(|c| c.set(std::ptr::null()));
                        if let Err(payload) = result {
                            if payload.downcast_ref::<Aborted>().is_none() {
                                let msg = panic_message(&payload);
                                fault
                                    .lock()
                                    .unwrap_or_else(|e| e.into_inner())
                                    .get_or_insert(msg);
                                states.iter().for_each(BlockState::abort);
                            }
                        }
                    })
                    .expect("spawn an emulated GPU thread");
            }
        }
    });
    match fault.into_inner().unwrap_or_else(|e| e.into_inner()) {
        Some(msg) => Err(EmuError::KernelFault(msg)),
        None => Ok(()),
    }
}

fn validate(config: &LaunchConfig) -> Result<(), EmuError> {
    if config.grid.contains(&0) || config.block.contains(&0) {
        return Err(EmuError::BadConfig(format!(
            "grid {:?} / block {:?} has a zero dimension",
            config.grid, config.block
        )));
    }
    let threads = config.block.iter().map(|&b| b as u64).product::<u64>();
    if threads > MAX_BLOCK_THREADS as u64 {
        return Err(EmuError::BadConfig(format!(
            "{threads} threads per block, at most {MAX_BLOCK_THREADS}"
        )));
    }
    if config.shared_bytes > MAX_SHARED_BYTES {
        return Err(EmuError::BadConfig(format!(
            "{} bytes of shared memory, at most {MAX_SHARED_BYTES}",
            config.shared_bytes
        )));
    }
    Ok(())
}

fn panic_message(payload: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_string()
    }
}

/// Panic payload used to unwind threads once another thread of the launch has faulted.
struct Aborted;

thread_local! {
    static CURRENT: Cell<*const ()> = const { Cell::new(std::ptr::null()) };
}

/// Calls `f` with the emulated thread's context. Panics when called outside an emulated launch
/// (a device function used from plain host code).
pub(crate) fn current<R>(f: impl FnOnce(&ThreadCtx<'_>) -> R) -> R {
    CURRENT.with(|c| {
        let p = c.get() as *const ThreadCtx<'_>;
        assert!(
            !p.is_null(),
            "a device function was called outside an emulated kernel launch"
        );
        // SAFETY: set by `launch` to a ThreadCtx that outlives the kernel body on this thread.
        f(unsafe { &*p })
    })
}

/// Shared memory declared with `static_shared!`: one buffer per symbol per block.
pub fn block_static_shared(key: usize, bytes: usize) -> *mut u8 {
    current(|c| c.block().static_shared_ptr(key, bytes))
}

/// What one emulated GPU thread knows about itself.
pub(crate) struct ThreadCtx<'a> {
    pub thread_idx: [u32; 3],
    lane: u32,
    warp: u32,
    block: &'a BlockState,
}

impl ThreadCtx<'_> {
    pub(crate) fn block(&self) -> &BlockState {
        self.block
    }

    pub(crate) fn sync_warp(&self) {
        self.block.warps[self.warp as usize]
            .barrier
            .wait_or_unwind();
    }

    /// Every lane publishes `v`, then reads the lane `source(lane)` names (its own value when
    /// `None` or when that lane does not exist).
    pub(crate) fn shuffle(&self, v: u32, source: impl Fn(u32) -> Option<u32>) -> u32 {
        let warp = &self.block.warps[self.warp as usize];
        warp.slots[self.lane as usize].store(v as u64, Ordering::Relaxed);
        warp.barrier.wait_or_unwind();
        let got = match source(self.lane) {
            Some(src) if src < warp.lanes => {
                warp.slots[src as usize].load(Ordering::Relaxed) as u32
            }
            _ => v,
        };
        warp.barrier.wait_or_unwind();
        got
    }
}

/// State of the block being run, shared by all its threads.
pub(crate) struct BlockState {
    pub config: LaunchConfig,
    block_idx: [AtomicU32; 3],
    barrier: GroupBarrier,
    block_start: GroupBarrier,
    warps: Vec<WarpState>,
    dynamic: UnsafeCell<Vec<u128>>,
    statics: Mutex<HashMap<usize, Box<[u128]>>>,
}

// SAFETY: `dynamic` is only handed out as a raw pointer (shared memory: the kernel synchronises
// its own accesses with barriers) and is rewritten only by thread 0 between blocks, while every
// other thread waits at `block_start`.
unsafe impl Sync for BlockState {}

struct WarpState {
    lanes: u32,
    barrier: GroupBarrier,
    slots: Vec<AtomicU64>,
}

const POISON_WORD: u128 = u128::MAX;

impl BlockState {
    fn new(config: LaunchConfig) -> Self {
        let threads = config.block.iter().product::<u32>();
        let warps = threads.div_ceil(WARP);
        BlockState {
            config,
            block_idx: Default::default(),
            barrier: GroupBarrier::new(threads),
            block_start: GroupBarrier::new(threads),
            warps: (0..warps)
                .map(|w| {
                    let lanes = (threads - w * WARP).min(WARP);
                    WarpState {
                        lanes,
                        barrier: GroupBarrier::new(lanes),
                        slots: (0..WARP).map(|_| AtomicU64::new(0)).collect(),
                    }
                })
                .collect(),
            dynamic: UnsafeCell::new(vec![POISON_WORD; config.shared_bytes.div_ceil(16)]),
            statics: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn block_idx(&self, axis: usize) -> u32 {
        self.block_idx[axis].load(Ordering::Relaxed)
    }

    /// Called by thread 0 while all other threads wait at `block_start`.
    fn begin_block(&self, linear: u64) {
        let [gx, gy, _] = self.config.grid.map(|g| g as u64);
        self.block_idx[0].store((linear % gx) as u32, Ordering::Relaxed);
        self.block_idx[1].store((linear / gx % gy) as u32, Ordering::Relaxed);
        self.block_idx[2].store((linear / (gx * gy)) as u32, Ordering::Relaxed);
        self.barrier.reset();
        for w in &self.warps {
            w.barrier.reset();
        }
        // SAFETY: no other thread touches shared memory between blocks (see `unsafe impl Sync`).
        unsafe { (*self.dynamic.get()).fill(POISON_WORD) };
        for buf in lock(&self.statics).values_mut() {
            buf.fill(POISON_WORD);
        }
    }

    pub(crate) fn sync_threads(&self) {
        self.barrier.wait_or_unwind();
    }

    pub(crate) fn dynamic_shared_ptr(&self) -> *mut u8 {
        // SAFETY: see `unsafe impl Sync`.
        unsafe { (*self.dynamic.get()).as_mut_ptr() as *mut u8 }
    }

    fn static_shared_ptr(&self, key: usize, bytes: usize) -> *mut u8 {
        let mut statics = lock(&self.statics);
        let buf = statics
            .entry(key)
            .or_insert_with(|| vec![POISON_WORD; bytes.div_ceil(16)].into_boxed_slice());
        buf.as_mut_ptr() as *mut u8
    }

    fn abort(&self) {
        self.barrier.abort();
        self.block_start.abort();
        for w in &self.warps {
            w.barrier.abort();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A reusable barrier for a fixed group of threads, in which threads that have finished the
/// kernel count as arrived, and which can be aborted when another thread faults.
struct GroupBarrier {
    size: u32,
    state: Mutex<BarrierState>,
    released: Condvar,
}

#[derive(Default)]
struct BarrierState {
    waiting: u32,
    exited: u32,
    generation: u64,
    aborted: bool,
}

impl GroupBarrier {
    fn new(size: u32) -> Self {
        GroupBarrier {
            size,
            state: Mutex::new(BarrierState::default()),
            released: Condvar::new(),
        }
    }

    /// Waits for the group; unwinds with [`Aborted`] if the launch was aborted.
    fn wait_or_unwind(&self) {
        let mut s = lock(&self.state);
        if s.aborted {
            drop(s);
            panic::resume_unwind(Box::new(Aborted));
        }
        let generation = s.generation;
        s.waiting += 1;
        if s.waiting + s.exited >= self.size {
            self.release(&mut s);
            return;
        }
        while s.generation == generation && !s.aborted {
            s = self.released.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        if s.aborted {
            drop(s);
            panic::resume_unwind(Box::new(Aborted));
        }
    }

    fn release(&self, s: &mut BarrierState) {
        s.waiting = 0;
        s.generation += 1;
        self.released.notify_all();
    }

    /// The calling thread has finished the kernel: it no longer holds the others up.
    fn exit(&self) {
        let mut s = lock(&self.state);
        s.exited += 1;
        if s.waiting > 0 && s.waiting + s.exited >= self.size {
            self.release(&mut s);
        }
    }

    fn reset(&self) {
        let mut s = lock(&self.state);
        s.exited = 0;
        s.waiting = 0;
    }

    fn abort(&self) {
        lock(&self.state).aborted = true;
        self.released.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dev::*;

    fn cfg(grid: u32, block: u32, shared_bytes: usize) -> LaunchConfig {
        LaunchConfig {
            grid: [grid, 1, 1],
            block: [block, 1, 1],
            shared_bytes,
        }
    }

    #[test]
    fn every_thread_of_every_block_runs_once() {
        let hits: Vec<AtomicU32> = (0..3 * 70).map(|_| AtomicU32::new(0)).collect();
        unsafe {
            launch(&cfg(3, 70, 0), &|| {
                let i = block_idx_x() * block_dim_x() + thread_idx_x();
                hits[i as usize].fetch_add(1, Ordering::Relaxed);
            })
            .unwrap();
        }
        assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
    }

    #[test]
    fn barrier_orders_shared_memory_writes_before_reads() {
        // Each thread writes its slot, then (after the barrier) reads its neighbour's. Without a
        // real barrier some reads would see the poison.
        let out: Vec<AtomicU32> = (0..64).map(|_| AtomicU32::new(0)).collect();
        unsafe {
            launch(&cfg(1, 64, 64 * 4), &|| {
                let s = dynamic_shared::<u32>();
                let t = thread_idx_x();
                std::thread::yield_now();
                *s.add(t as usize) = t * 10;
                sync_threads();
                out[t as usize].store(*s.add(((t + 1) % 64) as usize), Ordering::Relaxed);
            })
            .unwrap();
        }
        for t in 0..64u32 {
            assert_eq!(out[t as usize].load(Ordering::Relaxed), (t + 1) % 64 * 10);
        }
    }

    #[test]
    fn shared_memory_is_poisoned_at_block_start() {
        let seen = AtomicU32::new(0);
        unsafe {
            launch(&cfg(2, 32, 16), &|| {
                if thread_idx_x() == 0 {
                    let s = dynamic_shared::<u32>();
                    seen.fetch_add((*s == u32::MAX) as u32, Ordering::Relaxed);
                    *s = 7;
                }
            })
            .unwrap();
        }
        assert_eq!(
            seen.load(Ordering::Relaxed),
            2,
            "each block starts from poison, not the last block's data"
        );
    }

    #[test]
    fn shuffles_match_their_definitions() {
        let out: Vec<AtomicU32> = (0..3 * 32).map(|_| AtomicU32::new(0)).collect();
        unsafe {
            launch(&cfg(1, 32, 0), &|| {
                let l = lane_id();
                out[l as usize].store(shfl_xor_u32(l, 5), Ordering::Relaxed);
                out[32 + l as usize].store(shfl_down_u32(l * 2, 3), Ordering::Relaxed);
                out[64 + l as usize].store(shfl_idx_u32(l + 100, 7), Ordering::Relaxed);
            })
            .unwrap();
        }
        for l in 0..32u32 {
            assert_eq!(out[l as usize].load(Ordering::Relaxed), l ^ 5);
            let down = if l + 3 < 32 { (l + 3) * 2 } else { l * 2 };
            assert_eq!(out[32 + l as usize].load(Ordering::Relaxed), down);
            assert_eq!(out[64 + l as usize].load(Ordering::Relaxed), 107);
        }
    }

    #[test]
    fn early_return_does_not_deadlock_a_barrier() {
        let after = AtomicU32::new(0);
        unsafe {
            launch(&cfg(1, 40, 0), &|| {
                if thread_idx_x() >= 20 {
                    return;
                }
                sync_threads();
                after.fetch_add(1, Ordering::Relaxed);
            })
            .unwrap();
        }
        assert_eq!(after.load(Ordering::Relaxed), 20);
    }

    #[test]
    fn a_faulting_thread_fails_the_launch_without_hanging_the_rest() {
        let r = unsafe {
            launch(&cfg(2, 64, 0), &|| {
                if thread_idx_x() == 13 {
                    panic!("thread 13 faulted");
                }
                sync_threads();
            })
        };
        assert!(matches!(r, Err(EmuError::KernelFault(m)) if m.contains("thread 13")));
    }

    #[test]
    fn bad_configurations_are_refused() {
        assert!(matches!(
            unsafe { launch(&cfg(0, 32, 0), &|| {}) },
            Err(EmuError::BadConfig(_))
        ));
        assert!(matches!(
            unsafe { launch(&cfg(1, 2048, 0), &|| {}) },
            Err(EmuError::BadConfig(_))
        ));
        assert!(matches!(
            unsafe { launch(&cfg(1, 32, 1 << 20), &|| {}) },
            Err(EmuError::BadConfig(_))
        ));
    }

    #[test]
    fn atomics_from_many_threads_add_up() {
        let mut total = [0.0f32, 0.0];
        let counter = AtomicU32::new(0);
        let p = total.as_mut_ptr() as usize;
        unsafe {
            launch(&cfg(4, 64, 0), &|| {
                atomic_add_f32(p as *mut f32, 0.5);
                atomic_add_u32(counter.as_ptr(), 1);
            })
            .unwrap();
        }
        assert_eq!(total[0], 128.0);
        assert_eq!(counter.load(Ordering::Relaxed), 256);
    }
}
