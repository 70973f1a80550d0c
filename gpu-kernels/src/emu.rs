//! The CPU emulator: runs a kernel's Rust body with GPU launch semantics on the host.
//!
//! # Design
//! A launch runs on the OS thread that calls it. Each emulated GPU thread is a stackful
//! coroutine ([`corosensei`]) on a stack from a process-wide pool: stacks are mapped once and
//! reused by later blocks and launches. A scheduler resumes the threads from a ready queue, and
//! each runs until a *yield point*, where it hands the OS thread back:
//! - the block barrier ([`crate::dev::sync_threads`]), the warp barrier, and every warp
//!   exchange (shuffles, `match_any`, `ballot`): the thread arrives and is parked on the
//!   barrier, off the queue; the last arrival releases it, which puts every parked thread back
//!   on the queue in arrival order, and runs on. Threads that return early count as arrived.
//!   Shuffles and matches publish into a per-warp exchange area and pass one warp barrier; all
//!   lanes of a warp must take part (as with `__shfl_sync(0xffffffff, ..)`).
//! - [`crate::dev::spin_pause`] (each round of a spin-wait on another block): the thread goes to the back
//!   of the queue, so the block it waits for runs.
//!
//! Everything an emulated thread owns (its indices, its exchange count) is in its [`ThreadCtx`]
//! on its own stack; the one thread-local, `CURRENT`, points at the context of the coroutine
//! now running and is set by that coroutine whenever it starts or is resumed.
//!
//! With `resident` slots ([`launch_resident`]) the blocks of all slots share the queue, so they
//! interleave at every yield point and a decoupled look-back really waits on a running tile.
//! The order is deterministic: a block's threads start in index order and each runs to its
//! first barrier, so a missing barrier shows (a thread reads what a later thread has not yet
//! written: the poison) on every run, not by chance. Shared memory is poisoned (0xFF bytes, a
//! NaN for f32) at each block start, as real shared memory holds garbage, and each block has
//! its own `static_shared!` buffers.
//!
//! A panic in any thread (an assertion, a misaligned vector access) aborts the launch: the
//! other threads unwind at their next yield point and the launch returns
//! [`EmuError::KernelFault`] with the message. A deadlock is one too: threads left but none
//! ready (all parked on barriers that cannot release, e.g. some lanes at the block barrier and
//! the rest at a warp barrier), or only spin-waits for a long run with no thread reaching a
//! barrier or finishing (a wait on a block that is not resident). A kernel that spins without
//! [`crate::dev::spin_pause`] never yields and hangs, as on a GPU. There is no signal handling: a wild
//! access (the guard pages of the runner's buffers) still kills the process with SIGSEGV, and
//! the stacks have guard pages of their own.
//!
//! It is meant for correctness at small sizes, not speed: its timings are not GPU timings.
use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use std::cell::{Cell, RefCell, UnsafeCell};
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Mutex, MutexGuard};

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
/// the slots' threads interleave at every yield point (see the module doc), so it does. Kernels
/// that hand out work by an atomic tile counter cannot deadlock here (every tile a block waits
/// for belongs to a block already running); a kernel that waits in [`crate::dev::spin_pause`]
/// for a block not yet started is stopped with [`EmuError::KernelFault`] once only spinning
/// threads are left (it would hang on a GPU).
///
/// # Safety
/// As [`launch`]. A spin-wait that never calls [`crate::dev::spin_pause`] never hands the OS
/// thread back, so it hangs the launch (the runner's time limit ends such a worker).
pub unsafe fn launch_resident(
    config: &LaunchConfig,
    body: &(dyn Fn() + Sync),
    resident: usize,
) -> Result<(), EmuError> {
    validate(config)?;
    let threads = config.block.iter().product::<u32>();
    let blocks = config.grid.iter().map(|&g| g as u64).product::<u64>();
    let slots = (resident.max(1) as u64).min(blocks) as usize;
    let launch = Launch {
        config: *config,
        body,
        threads,
        blocks,
        slots: (0..slots)
            .map(|s| BlockState::new(*config, s as u64))
            .collect(),
        ready: RefCell::new(VecDeque::with_capacity(slots * threads as usize)),
        aborted: Cell::new(false),
        fault: RefCell::new(None),
        progress: Cell::new(0),
    };
    let mut stacks = take_stacks(slots * threads as usize);
    let saved = CURRENT.with(|c| c.get());
    schedule(&launch, &mut stacks);
    CURRENT.with(|c| c.set(saved));
    return_stacks(stacks);
    match launch.fault.into_inner() {
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

/// Why an emulated thread hands the OS thread back to the scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pause {
    /// Parked on a barrier; the barrier's release puts it back on the ready queue.
    Parked,
    /// A round of a spin-wait: back of the ready queue at once.
    Spin,
}

/// One emulated GPU thread.
type Thread = Coroutine<(), Pause, (), DefaultStack>;

/// Stack of each emulated thread (as the OS threads of the earlier emulator had). Only the
/// pages a kernel touches are backed; a guard page below it turns an overflow into a SIGSEGV.
const STACK_BYTES: usize = 512 * 1024;
/// Most stacks the pool keeps between launches.
const POOL_MAX: usize = 8192;
/// Spin-waits in a row with no thread reaching a barrier or finishing, after which a launch is
/// called deadlocked: at least this many, and this many per emulated thread of the launch.
const SPIN_LIMIT_MIN: u64 = 1 << 20;
const SPIN_LIMIT_PER_THREAD: u64 = 4096;

/// Stacks of finished launches, reused by the next ones (mapping a stack per thread per launch
/// is what made the old emulator spend most of its time in the kernel).
static STACK_POOL: Mutex<Vec<DefaultStack>> = Mutex::new(Vec::new());

#[cfg(test)]
thread_local! {
    /// Stacks mapped by launches on this OS thread (tests of the pool).
    static STACKS_MAPPED: Cell<usize> = const { Cell::new(0) };
}

fn take_stacks(n: usize) -> Vec<DefaultStack> {
    let mut pool = lock(&STACK_POOL);
    let keep = pool.len().saturating_sub(n);
    pool.split_off(keep)
}

fn new_stack() -> DefaultStack {
    #[cfg(test)]
    STACKS_MAPPED.with(|c| c.set(c.get() + 1));
    DefaultStack::new(STACK_BYTES).expect("map an emulated GPU thread's stack")
}

fn return_stacks(mut stacks: Vec<DefaultStack>) {
    let mut pool = lock(&STACK_POOL);
    stacks.truncate(POOL_MAX.saturating_sub(pool.len()));
    pool.append(&mut stacks);
}

/// Everything one launch shares between its threads and the scheduler. All of it is touched
/// from the launching OS thread only, hence plain cells.
struct Launch<'a> {
    config: LaunchConfig,
    body: &'a (dyn Fn() + Sync),
    threads: u32,
    blocks: u64,
    /// One per resident block.
    slots: Vec<BlockState>,
    /// Threads to resume, in order (ids: `slot * threads + linear`).
    ready: RefCell<VecDeque<usize>>,
    aborted: Cell<bool>,
    fault: RefCell<Option<String>>,
    /// Counts barrier arrivals, thread ends and block starts (what a spin-wait waits for).
    progress: Cell<u64>,
}

impl Launch<'_> {
    /// Records the launch's first fault and makes every other thread unwind.
    fn fail(&self, msg: String) {
        self.fault.borrow_mut().get_or_insert(msg);
        self.aborted.set(true);
    }

    fn step(&self) {
        self.progress.set(self.progress.get() + 1);
    }

    fn barriers(&self) -> impl Iterator<Item = &GroupBarrier> {
        self.slots
            .iter()
            .flat_map(|b| std::iter::once(&b.barrier).chain(b.warps.iter().map(|w| &w.barrier)))
    }

    /// Every thread parked on a barrier back on the ready queue (after an abort, to unwind).
    fn wake_all_parked(&self) {
        let mut ready = self.ready.borrow_mut();
        for barrier in self.barriers() {
            ready.extend(barrier.parked.borrow_mut().drain(..));
        }
    }

    fn deadlock_message(&self) -> String {
        let blocks: Vec<String> = self
            .slots
            .iter()
            .filter(|b| b.live.get() > 0)
            .map(|b| {
                let mut waits = Vec::new();
                let n = b.barrier.parked.borrow().len();
                if n > 0 {
                    waits.push(format!("{n} at the block barrier"));
                }
                for (w, warp) in b.warps.iter().enumerate() {
                    let n = warp.barrier.parked.borrow().len();
                    if n > 0 {
                        waits.push(format!("{n} of {} lanes at warp {w}'s barrier", warp.lanes));
                    }
                }
                format!("block {}: {}", b.linear.get(), waits.join(", "))
            })
            .collect();
        format!(
            "deadlock: every live thread waits at a barrier that can never release ({}); \
             some threads reached a different barrier or skipped this one, which hangs a GPU too",
            blocks.join("; ")
        )
    }

    /// Starts the next block of `slot`, if any: resets its barriers, poisons its shared memory
    /// and queues its threads in order.
    fn start_block(
        &self,
        slot: usize,
        threads: &mut [Option<Thread>],
        stacks: &mut Vec<DefaultStack>,
    ) {
        let block = &self.slots[slot];
        let linear = block.next.get();
        if self.aborted.get() || linear >= self.blocks {
            return;
        }
        block.next.set(linear + self.slots.len() as u64);
        block.begin_block(linear);
        block.live.set(self.threads);
        self.step();
        // SAFETY (of the lifetime cast): `launch_resident` runs every thread to its end before
        // it returns, so no thread outlives the launch it points to.
        let launch = std::ptr::from_ref(self).cast::<Launch<'static>>();
        let mut ready = self.ready.borrow_mut();
        for linear in 0..self.threads {
            let id = slot * self.threads as usize + linear as usize;
            let stack = stacks.pop().unwrap_or_else(new_stack);
            threads[id] = Some(Coroutine::with_stack(stack, move |yielder, ()| {
                // SAFETY: see above.
                run_thread(unsafe { &*launch }, slot, linear, yielder)
            }));
            ready.push_back(id);
        }
    }
}

/// Runs the launch to its end: resumes ready threads in queue order until none is left.
fn schedule(launch: &Launch<'_>, stacks: &mut Vec<DefaultStack>) {
    let per_block = launch.threads as usize;
    let mut threads: Vec<Option<Thread>> =
        (0..launch.slots.len() * per_block).map(|_| None).collect();
    for slot in 0..launch.slots.len() {
        launch.start_block(slot, &mut threads, stacks);
    }
    let spin_limit = SPIN_LIMIT_MIN.max(SPIN_LIMIT_PER_THREAD * threads.len() as u64);
    let (mut spins, mut seen) = (0u64, launch.progress.get());
    loop {
        let next = launch.ready.borrow_mut().pop_front();
        let Some(id) = next else {
            if launch.slots.iter().all(|b| b.live.get() == 0) {
                break;
            }
            // Threads are left, all parked on barriers nothing can release any more.
            if !launch.aborted.get() {
                launch.fail(launch.deadlock_message());
            }
            launch.wake_all_parked();
            continue;
        };
        let thread = threads[id].as_mut().expect("a queued thread has not ended");
        match thread.resume(()) {
            CoroutineResult::Yield(Pause::Parked) => {}
            CoroutineResult::Yield(Pause::Spin) => {
                launch.ready.borrow_mut().push_back(id);
                if launch.progress.get() != seen {
                    (spins, seen) = (0, launch.progress.get());
                }
                spins += 1;
                if spins == spin_limit && !launch.aborted.get() {
                    launch.fail(format!(
                        "deadlock: {spins} rounds of spin-waits in a row while no thread reached \
                         a barrier or finished (a spin-wait on a block that is not resident, or \
                         on a value nothing writes)"
                    ));
                }
            }
            CoroutineResult::Return(()) => {
                let ended = threads[id].take().expect("the thread just ran");
                stacks.push(ended.into_stack());
                let slot = id / per_block;
                let block = &launch.slots[slot];
                block.live.set(block.live.get() - 1);
                if block.live.get() == 0 {
                    launch.start_block(slot, &mut threads, stacks);
                }
            }
        }
    }
}

/// The body of one emulated thread's coroutine.
fn run_thread(launch: &Launch<'_>, slot: usize, linear: u32, yielder: &Yielder<(), Pause>) {
    if launch.aborted.get() {
        return;
    }
    let [bx, by, _] = launch.config.block;
    let ctx = ThreadCtx {
        thread_idx: [linear % bx, linear / bx % by, linear / (bx * by)],
        id: slot * launch.threads as usize + linear as usize,
        lane: linear % WARP,
        warp: linear / WARP,
        block: &launch.slots[slot],
        launch,
        yielder,
        exchanges: Cell::new(0),
    };
    ctx.make_current();
    let result = panic::catch_unwind(AssertUnwindSafe(|| (launch.body)()));
    CURRENT.with(|c| c.set(std::ptr::null()));
    ctx.block.barrier.exit(launch);
    ctx.block.warps[ctx.warp as usize].barrier.exit(launch);
    launch.step();
    if let Err(payload) = result {
        if payload.downcast_ref::<Aborted>().is_none() {
            launch.fail(panic_message(&payload));
        }
    }
}

thread_local! {
    /// The context of the emulated thread running on this OS thread: set by that thread when it
    /// starts and each time it is resumed, so it always names the coroutine that runs.
    static CURRENT: Cell<*const ()> = const { Cell::new(std::ptr::null()) };
}

/// Calls `f` with the emulated thread's context. Panics when called outside an emulated launch
/// (a device function used from plain host code).
pub(crate) fn current<R>(f: impl FnOnce(&ThreadCtx<'_>) -> R) -> R {
    try_current(|c| f(c.expect("a device function was called outside an emulated kernel launch")))
}

/// As [`current`], with `None` outside an emulated launch.
pub(crate) fn try_current<R>(f: impl FnOnce(Option<&ThreadCtx<'_>>) -> R) -> R {
    let p = CURRENT.with(|c| c.get()) as *const ThreadCtx<'_>;
    // SAFETY: set by the running emulated thread to its ThreadCtx, which lives on its stack
    // until it ends (when it is cleared again).
    f(unsafe { p.as_ref() })
}

/// Shared memory declared with `static_shared!`: one buffer per symbol per block.
pub fn block_static_shared(key: usize, bytes: usize) -> *mut u8 {
    current(|c| c.block().static_shared_ptr(key, bytes))
}

/// One round of a spin-wait ([`crate::dev::spin_pause`]): the other threads run before this one
/// goes on. Outside a launch, yields the OS thread.
pub fn spin_yield() {
    try_current(|c| match c {
        Some(c) => c.switch(Pause::Spin),
        None => std::thread::yield_now(),
    })
}

/// What one emulated GPU thread knows about itself: all its per-thread state.
pub(crate) struct ThreadCtx<'a> {
    pub thread_idx: [u32; 3],
    id: usize,
    lane: u32,
    warp: u32,
    block: &'a BlockState,
    launch: &'a Launch<'a>,
    yielder: &'a Yielder<(), Pause>,
    /// Warp exchanges (shuffles, matches) so far: picks the half of the exchange area.
    exchanges: Cell<usize>,
}

impl ThreadCtx<'_> {
    pub(crate) fn block(&self) -> &BlockState {
        self.block
    }

    fn make_current(&self) {
        CURRENT.with(|c| c.set(self as *const Self as *const ()));
    }

    /// Hands the OS thread to the scheduler until this thread is resumed; unwinds if the launch
    /// was aborted meanwhile.
    fn switch(&self, why: Pause) {
        self.yielder.suspend(why);
        self.make_current();
        self.unwind_if_aborted();
    }

    fn unwind_if_aborted(&self) {
        if self.launch.aborted.get() {
            panic::resume_unwind(Box::new(Aborted));
        }
    }

    pub(crate) fn sync_threads(&self) {
        self.block.barrier.wait(self);
    }

    pub(crate) fn sync_warp(&self) {
        self.warp_state().barrier.wait(self);
    }

    fn warp_state(&self) -> &WarpState {
        &self.block.warps[self.warp as usize]
    }

    /// Publishes `v` for the warp and waits for every lane to publish; returns the half of the
    /// exchange area this exchange used. Consecutive exchanges alternate halves, so a lane that
    /// runs ahead into the next one cannot overwrite a value another lane is still reading (it
    /// cannot run two ahead: the next exchange's barrier holds it).
    fn exchange(&self, v: u32) -> &[Cell<u32>] {
        let n = self.exchanges.get();
        self.exchanges.set(n + 1);
        let warp = self.warp_state();
        let half = &warp.slots[(n % 2) * WARP as usize..][..WARP as usize];
        half[self.lane as usize].set(v);
        warp.barrier.wait(self);
        half
    }

    /// Every lane publishes `v`, then reads the lane `source(lane)` names (its own value when
    /// `None` or when that lane does not exist).
    pub(crate) fn shuffle(&self, v: u32, source: impl Fn(u32) -> Option<u32>) -> u32 {
        let lanes = self.warp_state().lanes;
        let seen = self.exchange(v);
        match source(self.lane) {
            Some(src) if src < lanes => seen[src as usize].get(),
            _ => v,
        }
    }

    /// `__match_any_sync(0xffffffff, v)`: the lanes of this warp whose `v` equals this lane's.
    pub(crate) fn match_any(&self, v: u32) -> u32 {
        let lanes = self.warp_state().lanes as usize;
        let seen = self.exchange(v);
        (0..lanes)
            .filter(|&l| seen[l].get() == v)
            .fold(0, |mask, l| mask | 1 << l)
    }
}

/// State of the block a slot is running, shared by all its threads.
pub(crate) struct BlockState {
    pub config: LaunchConfig,
    block_idx: Cell<[u32; 3]>,
    /// Linear index of the block being run, and of the slot's next one.
    linear: Cell<u64>,
    next: Cell<u64>,
    /// Threads of the block that have not ended.
    live: Cell<u32>,
    barrier: GroupBarrier,
    warps: Vec<WarpState>,
    dynamic: UnsafeCell<Vec<u128>>,
    statics: RefCell<HashMap<usize, Box<[u128]>>>,
}

struct WarpState {
    lanes: u32,
    barrier: GroupBarrier,
    /// Exchange area of shuffles and matches: two halves of one slot per lane.
    slots: Vec<Cell<u32>>,
}

const POISON_WORD: u128 = u128::MAX;

impl BlockState {
    fn new(config: LaunchConfig, first: u64) -> Self {
        let threads = config.block.iter().product::<u32>();
        let warps = threads.div_ceil(WARP);
        BlockState {
            config,
            block_idx: Cell::new([0; 3]),
            linear: Cell::new(first),
            next: Cell::new(first),
            live: Cell::new(0),
            barrier: GroupBarrier::new(threads),
            warps: (0..warps)
                .map(|w| {
                    let lanes = (threads - w * WARP).min(WARP);
                    WarpState {
                        lanes,
                        barrier: GroupBarrier::new(lanes),
                        slots: (0..2 * WARP).map(|_| Cell::new(0)).collect(),
                    }
                })
                .collect(),
            dynamic: UnsafeCell::new(vec![POISON_WORD; config.shared_bytes.div_ceil(16)]),
            statics: RefCell::new(HashMap::new()),
        }
    }

    pub(crate) fn block_idx(&self, axis: usize) -> u32 {
        self.block_idx.get()[axis]
    }

    /// Called by the scheduler once the slot's previous block has ended (no thread of it is left).
    fn begin_block(&self, linear: u64) {
        let [gx, gy, _] = self.config.grid.map(|g| g as u64);
        self.block_idx.set([
            (linear % gx) as u32,
            (linear / gx % gy) as u32,
            (linear / (gx * gy)) as u32,
        ]);
        self.linear.set(linear);
        self.barrier.reset();
        for w in &self.warps {
            w.barrier.reset();
        }
        // SAFETY: no thread of the slot is running, so no pointer into shared memory is in use.
        unsafe { (*self.dynamic.get()).fill(POISON_WORD) };
        for buf in self.statics.borrow_mut().values_mut() {
            buf.fill(POISON_WORD);
        }
    }

    pub(crate) fn dynamic_shared_ptr(&self) -> *mut u8 {
        // SAFETY: the buffer is only handed out as a raw pointer (the kernel orders its own
        // accesses with barriers) and rewritten only between blocks.
        unsafe { (*self.dynamic.get()).as_mut_ptr() as *mut u8 }
    }

    fn static_shared_ptr(&self, key: usize, bytes: usize) -> *mut u8 {
        let mut statics = self.statics.borrow_mut();
        let buf = statics
            .entry(key)
            .or_insert_with(|| vec![POISON_WORD; bytes.div_ceil(16)].into_boxed_slice());
        buf.as_mut_ptr() as *mut u8
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A reusable barrier for a fixed group of threads, in which threads that have finished the
/// kernel count as arrived. Waiters are parked off the ready queue until the last arrival.
struct GroupBarrier {
    size: u32,
    waiting: Cell<u32>,
    exited: Cell<u32>,
    /// Ids of the threads parked here, in arrival order.
    parked: RefCell<Vec<usize>>,
}

impl GroupBarrier {
    fn new(size: u32) -> Self {
        GroupBarrier {
            size,
            waiting: Cell::new(0),
            exited: Cell::new(0),
            parked: RefCell::new(Vec::new()),
        }
    }

    /// Waits for the group; unwinds with [`Aborted`] if the launch was aborted.
    fn wait(&self, ctx: &ThreadCtx<'_>) {
        ctx.unwind_if_aborted();
        ctx.launch.step();
        self.waiting.set(self.waiting.get() + 1);
        if self.waiting.get() + self.exited.get() >= self.size {
            self.release(ctx.launch);
        } else {
            self.parked.borrow_mut().push(ctx.id);
            ctx.switch(Pause::Parked);
        }
    }

    /// Every parked thread to the back of the ready queue, in arrival order.
    fn release(&self, launch: &Launch<'_>) {
        self.waiting.set(0);
        launch
            .ready
            .borrow_mut()
            .extend(self.parked.borrow_mut().drain(..));
    }

    /// The calling thread has finished the kernel: it no longer holds the others up.
    fn exit(&self, launch: &Launch<'_>) {
        self.exited.set(self.exited.get() + 1);
        if self.waiting.get() > 0 && self.waiting.get() + self.exited.get() >= self.size {
            self.release(launch);
        }
    }

    fn reset(&self) {
        self.exited.set(0);
        self.waiting.set(0);
        self.parked.borrow_mut().clear();
    }
}

/// Tests' one way to launch a kernel on the emulator: the grid and block, then the arguments
/// in the kernel's order, then [`EmuLaunch::run`]:
/// `EmuLaunch::new(grid, 256).ptr(&x).ptr_mut(&mut out).arg(n).run(&my_kernel::EMU)`. A shape
/// is `x` or `[x, y, z]` ([`Dims`]); pointers are taken from slices ([`EmuLaunch::ptr`],
/// [`EmuLaunch::ptr_mut`]) or given raw ([`EmuLaunch::raw`]), scalars by [`ArgWord`].
#[cfg(test)]
#[derive(Clone, Debug)]
pub(crate) struct EmuLaunch {
    config: LaunchConfig,
    resident: usize,
    args: Vec<u64>,
}

/// A grid or block shape for [`EmuLaunch::new`]: `x` (as `[x, 1, 1]`) or `[x, y, z]`.
#[cfg(test)]
pub(crate) trait Dims {
    /// The shape as `[x, y, z]`.
    fn dims(self) -> [u32; 3];
}

#[cfg(test)]
impl Dims for u32 {
    fn dims(self) -> [u32; 3] {
        [self, 1, 1]
    }
}

#[cfg(test)]
impl Dims for [u32; 3] {
    fn dims(self) -> [u32; 3] {
        self
    }
}

/// A scalar kernel argument as its 64-bit argument word (the inverse of [`FromArgWord`]):
/// integers widened (signed ones sign-extended), f32 as its bit pattern.
#[cfg(test)]
pub(crate) trait ArgWord {
    /// The argument word.
    fn word(self) -> u64;
}

#[cfg(test)]
macro_rules! int_word {
    ($($t:ty),*) => {$(
        impl ArgWord for $t {
            fn word(self) -> u64 {
                self as u64
            }
        }
    )*};
}
#[cfg(test)]
int_word!(u8, u16, u32, i32, u64, i64, usize);

#[cfg(test)]
impl ArgWord for f32 {
    fn word(self) -> u64 {
        self.to_bits() as u64
    }
}

#[cfg(test)]
impl EmuLaunch {
    /// A launch of `grid` blocks of `block` threads, no dynamic shared memory, one resident
    /// block, no arguments yet.
    pub(crate) fn new(grid: impl Dims, block: impl Dims) -> Self {
        EmuLaunch {
            config: LaunchConfig {
                grid: grid.dims(),
                block: block.dims(),
                shared_bytes: 0,
            },
            resident: 1,
            args: Vec::new(),
        }
    }

    /// `bytes` of dynamic shared memory per block.
    pub(crate) fn shared(mut self, bytes: usize) -> Self {
        self.config.shared_bytes = bytes;
        self
    }

    /// `slots` blocks running at once ([`launch_kernel_resident`]).
    pub(crate) fn resident(mut self, slots: usize) -> Self {
        self.resident = slots;
        self
    }

    /// The next argument: a pointer to `data`'s first element, for the kernel to read.
    pub(crate) fn ptr<T>(self, data: &[T]) -> Self {
        self.raw(data.as_ptr())
    }

    /// The next argument: a pointer to `data`'s first element, for the kernel to write.
    pub(crate) fn ptr_mut<T>(self, data: &mut [T]) -> Self {
        self.raw(data.as_mut_ptr())
    }

    /// The next argument: a raw pointer (a view into a buffer, an offset or unaligned one).
    pub(crate) fn raw<T>(mut self, p: *const T) -> Self {
        self.args.push(p as u64);
        self
    }

    /// The next argument: a scalar.
    pub(crate) fn arg(mut self, v: impl ArgWord) -> Self {
        self.args.push(v.word());
        self
    }

    /// Runs `kernel` with these arguments and panics with the emulator's error if it fails.
    ///
    /// # Safety
    /// As [`launch_kernel`]: every pointer argument must cover what the kernel touches, and
    /// the memory must still be alive.
    pub(crate) unsafe fn run(&self, kernel: &EmuKernel) {
        if let Err(e) = self.try_run(kernel) {
            panic!("{}: {e}", kernel.name);
        }
    }

    /// Runs `kernel` with these arguments: `Ok` or the emulator's error.
    ///
    /// # Safety
    /// As [`EmuLaunch::run`].
    pub(crate) unsafe fn try_run(&self, kernel: &EmuKernel) -> Result<(), EmuError> {
        launch_kernel_resident(kernel, &self.config, &self.args, self.resident)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dev::*;
    use std::sync::atomic::{AtomicU32, Ordering};

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

    #[test]
    fn a_missing_barrier_reads_poison_on_every_run() {
        // The barrier test above without its barrier: threads run in order to their first yield
        // point, so thread t reads slot t + 1 before thread t + 1 has written it.
        let poisoned = AtomicU32::new(0);
        unsafe {
            launch(&cfg(1, 64, 64 * 4), &|| {
                let s = dynamic_shared::<u32>();
                let t = thread_idx_x();
                *s.add(t as usize) = t * 10;
                let seen = *s.add(((t + 1) % 64) as usize);
                poisoned.fetch_add((seen == u32::MAX) as u32, Ordering::Relaxed);
            })
            .unwrap();
        }
        assert_eq!(poisoned.load(Ordering::Relaxed), 63);
    }

    #[test]
    fn a_barrier_releases_only_when_every_thread_has_arrived() {
        // Each thread counts its arrival, then checks after the barrier that all had arrived.
        let arrived = AtomicU32::new(0);
        let early = AtomicU32::new(0);
        unsafe {
            launch(&cfg(2, 96, 0), &|| {
                for round in 1..=3u32 {
                    arrived.fetch_add(1, Ordering::Relaxed);
                    sync_threads();
                    let want = 96 * round + 96 * 3 * block_idx_x();
                    early.fetch_add(
                        (arrived.load(Ordering::Relaxed) < want) as u32,
                        Ordering::Relaxed,
                    );
                    sync_threads();
                }
            })
            .unwrap();
        }
        assert_eq!(early.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn early_exits_count_at_warp_barriers_and_later_blocks_start_fresh() {
        // Lanes ≥ 8 of each warp leave; the rest still pass warp barriers and block barriers,
        // in every block (a block's exits must not leak into the next block of the slot).
        let passed = AtomicU32::new(0);
        unsafe {
            launch_resident(
                &cfg(5, 64, 0),
                &|| {
                    if lane_id() >= 8 {
                        return;
                    }
                    sync_warp();
                    sync_threads();
                    passed.fetch_add(1, Ordering::Relaxed);
                },
                2,
            )
            .unwrap();
        }
        assert_eq!(passed.load(Ordering::Relaxed), 5 * 2 * 8);
    }

    #[test]
    fn a_panic_aborts_the_launch_even_while_another_block_spins_on_it() {
        // Block 1 spin-waits for a flag block 0 would set after its barrier; block 0 faults.
        let flag = AtomicU32::new(0);
        let r = unsafe {
            launch_resident(
                &cfg(2, 32, 0),
                &|| {
                    if block_idx_x() == 0 {
                        sync_threads();
                        assert!(thread_idx_x() != 3, "thread 3 of block 0 faulted");
                        flag.store(1, Ordering::Relaxed);
                    } else {
                        while flag.load(Ordering::Relaxed) == 0 {
                            spin_pause();
                        }
                    }
                },
                2,
            )
        };
        assert!(matches!(r, Err(EmuError::KernelFault(m)) if m.contains("thread 3 of block 0")));
    }

    #[test]
    fn resident_slots_interleave_so_a_wait_on_another_block_really_waits() {
        // Block 1 waits for a flag that block 0 sets only after three barriers: with two slots
        // block 1 must spin while block 0 runs; with one slot block 0 has ended first.
        let spins = |resident| {
            let (flag, spins) = (AtomicU32::new(0), AtomicU32::new(0));
            unsafe {
                launch_resident(
                    &cfg(2, 64, 0),
                    &|| {
                        if block_idx_x() == 0 {
                            sync_threads();
                            sync_threads();
                            sync_threads();
                            if thread_idx_x() == 63 {
                                flag.store(1, Ordering::Release);
                            }
                        } else if thread_idx_x() == 0 {
                            while flag.load(Ordering::Acquire) == 0 {
                                spins.fetch_add(1, Ordering::Relaxed);
                                spin_pause();
                            }
                        }
                    },
                    resident,
                )
                .unwrap();
            }
            spins.load(Ordering::Relaxed)
        };
        assert!(spins(2) > 0, "block 1 never waited for the running block 0");
        assert_eq!(spins(1), 0);
    }

    #[test]
    fn threads_at_different_barriers_are_a_deadlock_not_a_hang() {
        let r = unsafe {
            launch(&cfg(1, 64, 0), &|| {
                if lane_id() < 16 {
                    sync_threads();
                } else {
                    sync_warp();
                }
            })
        };
        match r {
            Err(EmuError::KernelFault(m)) => {
                assert!(m.contains("deadlock"), "{m}");
                assert!(m.contains("32 at the block barrier"), "{m}");
                assert!(m.contains("16 of 32 lanes at warp 0's barrier"), "{m}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_spin_wait_on_a_block_that_never_starts_is_a_deadlock() {
        // One slot: block 0 waits for block 1, which can only start after block 0 ends.
        let flag = AtomicU32::new(0);
        let r = unsafe {
            launch(&cfg(2, 32, 0), &|| {
                if block_idx_x() == 1 {
                    flag.store(1, Ordering::Relaxed);
                }
                while flag.load(Ordering::Relaxed) == 0 {
                    spin_pause();
                }
            })
        };
        assert!(matches!(r, Err(EmuError::KernelFault(m)) if m.contains("deadlock")));
    }

    #[test]
    fn match_any_and_ballot_see_every_lane_of_a_partial_warp() {
        // 48 threads: warp 1 has 16 lanes. Two calls in a row use both exchange halves.
        let out: Vec<AtomicU32> = (0..3 * 48).map(|_| AtomicU32::new(0)).collect();
        unsafe {
            launch(&cfg(1, 48, 0), &|| {
                let t = thread_idx_x() as usize;
                out[t].store(match_any_u32(lane_id() % 3), Ordering::Relaxed);
                out[48 + t].store(ballot(lane_id() % 2 == 1), Ordering::Relaxed);
                out[96 + t].store(match_any_u32(lane_id() / 4), Ordering::Relaxed);
            })
            .unwrap();
        }
        for t in 0..48u32 {
            let (lane, lanes) = (t % 32, if t < 32 { 32 } else { 16 });
            let mask = |f: &dyn Fn(u32) -> bool| {
                (0..lanes).filter(|&l| f(l)).fold(0u32, |m, l| m | 1 << l)
            };
            let got = |k: u32| out[(48 * k + t) as usize].load(Ordering::Relaxed);
            assert_eq!(got(0), mask(&|l| l % 3 == lane % 3), "thread {t}");
            assert_eq!(got(1), mask(&|l| l % 2 == 1), "thread {t}");
            assert_eq!(got(2), mask(&|l| l / 4 == lane / 4), "thread {t}");
        }
    }

    #[test]
    fn static_shared_memory_is_per_block_and_poisoned_at_each_start() {
        // Two slots, six blocks: each block sees its own poisoned buffer and fills it.
        let bad = AtomicU32::new(0);
        unsafe {
            launch_resident(
                &cfg(6, 32, 0),
                &|| {
                    let s = crate::static_shared!(EMU_TEST_STATIC: [u32; 32]);
                    let t = thread_idx_x() as usize;
                    bad.fetch_add((*s.add(t) != u32::MAX) as u32, Ordering::Relaxed);
                    sync_threads();
                    *s.add(t) = block_idx_x();
                    sync_threads();
                    let other = *s.add((t + 1) % 32);
                    bad.fetch_add((other != block_idx_x()) as u32, Ordering::Relaxed);
                },
                2,
            )
            .unwrap();
        }
        assert_eq!(bad.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn stacks_are_reused_across_blocks_and_launches() {
        let run = || unsafe { launch(&cfg(4, 64, 0), &|| sync_threads()).unwrap() };
        let before = STACKS_MAPPED.with(|c| c.get());
        run();
        run();
        let mapped = STACKS_MAPPED.with(|c| c.get()) - before;
        // At most one block's worth per launch (other tests may hold pooled stacks meanwhile),
        // never one per thread per block.
        assert!(
            mapped <= 2 * 64,
            "{mapped} stacks mapped for two launches of 4 × 64 threads"
        );
    }

    #[test]
    fn device_state_does_not_leak_out_of_a_launch() {
        unsafe { launch(&cfg(1, 32, 0), &|| sync_warp()).unwrap() };
        assert!(try_current(|c| c.is_none()));
    }
}
