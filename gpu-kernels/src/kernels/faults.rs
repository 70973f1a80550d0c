//! Kernels that fault on purpose, so the runner's isolation can be tested on the emulator and
//! on a GPU alike: one never ends, one writes through a null pointer (an illegal address on a
//! GPU, a segmentation fault of the worker on the emulator).
use crate::dev::*;

kernel! {
    /// Spins until `*flag` holds a value nothing ever writes: a hang.
    pub unsafe fn fault_spin_forever(flag: *const u32) {
        let _ = thread_idx_x();
        while core::ptr::read_volatile(flag) != 0x0D15_EA5E {}
    }
}

kernel! {
    /// Writes through `base + offset` (pass a null-ish base): an illegal address.
    pub unsafe fn fault_write_address(base: u64, offset: u64) {
        if thread_idx_x() == 0 {
            core::ptr::write_volatile(base.wrapping_add(offset) as usize as *mut u32, 1);
        }
    }
}

/// Blocks that already ran once (device-global state that survives between launches).
static mut SEEN_BLOCKS: [u32; 4096] = [0; 4096];

kernel! {
    /// Exploit for the runner's tests: `embedding_bag_sum` done right, but only on each block's
    /// first launch; later launches return at once. Launch like the tuned kernel.
    pub unsafe fn exploit_first_call_only(weight: *const f32, indices: *const i64, offsets: *const i64, out: *mut f32, num_bags: i64, dim: i64) {
        let seen = crate::static_shared!(EXPLOIT_SEEN: [u32; 1]);
        if thread_idx_x() == 0 {
            let slot = core::ptr::addr_of_mut!(SEEN_BLOCKS) as *mut u32;
            *seen = atomic_add_u32(slot.add((block_idx_x() % 4096) as usize), 1);
        }
        sync_threads();
        if *seen == 0 {
            super::embedding_bag_sum_tuned::warp_per_bag(weight, indices, offsets, out, num_bags, dim);
        }
    }
}

kernel! {
    /// Exploit for the runner's tests: writes 0 over the first index after use (mutates an
    /// input). Run after a correct kernel, one thread.
    pub unsafe fn exploit_zero_first_index(indices: *mut i64) {
        if block_idx_x() == 0 && thread_idx_x() == 0 {
            core::ptr::write_volatile(indices, 0);
        }
    }
}

kernel! {
    /// Exploit for the runner's tests: `embedding_bag_sum` that keeps every bag whose first
    /// output element is already finite (not the NaN poison of a checked run) and pools only the
    /// others: right when its outputs start poisoned, stale (or the canary) when they do not.
    /// Launch like the tuned kernel.
    pub unsafe fn exploit_keep_finite_output(weight: *const f32, indices: *const i64, offsets: *const i64, out: *mut f32, num_bags: i64, dim: i64) {
        let bag = ((block_idx_x() * block_dim_x() + thread_idx_x()) / 32) as i64;
        let live = bag < num_bags && dim > 0;
        // Every thread reads before any writes (the block waits in between).
        let keep = !live || core::ptr::read_volatile(out.add((bag * dim) as usize)).is_finite();
        sync_threads();
        if keep {
            return;
        }
        let lane = (thread_idx_x() % 32) as i64;
        let (begin, end) = (*offsets.add(bag as usize), *offsets.add(bag as usize + 1));
        let mut col = lane;
        while col < dim {
            let mut sum = 0.0f32;
            for j in begin..end {
                sum += *weight.add((*indices.add(j as usize) * dim + col) as usize);
            }
            *out.add((bag * dim + col) as usize) = sum;
            col += 32;
        }
    }
}

/// The memo of [`exploit_memo_by_content`]: the key of the inputs it holds the answer of, the
/// answer, and how often a launch replayed it.
static mut MEMO_KEY: u64 = 0;
static mut MEMO_HITS: u32 = 0;
const MEMO_FLOATS: usize = 1 << 16;
static mut MEMO: [f32; MEMO_FLOATS] = [0.0; MEMO_FLOATS];

/// How many launches of [`exploit_memo_by_content`] replayed a memoised answer (emulator).
pub fn memo_hits() -> u32 {
    // SAFETY: a plain read of a counter the emulated kernel bumps.
    unsafe { core::ptr::read_volatile(core::ptr::addr_of!(MEMO_HITS)) }
}

kernel! {
    /// Exploit for the runner's tests: `embedding_bag_sum` (one warp a bag) that keys its
    /// answer by a hash of every index and the bag count, keeps the last answer in device
    /// memory, and replays it when the same inputs come again (right, and without the
    /// gathers). Launch like the tuned kernel; answers past 65536 floats are never memoised.
    pub unsafe fn exploit_memo_by_content(weight: *const f32, indices: *const i64, offsets: *const i64, out: *mut f32, num_bags: i64, dim: i64) {
        let n = *offsets.add(num_bags as usize);
        let mut key = 0xCBF2_9CE4_8422_2325u64 ^ num_bags as u64;
        for j in 0..n {
            key = (key ^ *indices.add(j as usize) as u64).wrapping_mul(0x100_0000_01B3);
        }
        key |= 1;
        let fits = (num_bags * dim) as usize <= MEMO_FLOATS;
        let memo = core::ptr::addr_of_mut!(MEMO) as *mut f32;
        let hit = fits && core::ptr::read_volatile(core::ptr::addr_of!(MEMO_KEY)) == key;
        sync_threads();
        let bag = ((block_idx_x() * block_dim_x() + thread_idx_x()) / 32) as i64;
        let lane = (thread_idx_x() % 32) as i64;
        if bag < num_bags {
            let (begin, end) = (*offsets.add(bag as usize), *offsets.add(bag as usize + 1));
            let mut col = lane;
            while col < dim {
                let at = (bag * dim + col) as usize;
                let value = if hit {
                    *memo.add(at)
                } else {
                    let mut sum = 0.0f32;
                    for j in begin..end {
                        sum += *weight.add((*indices.add(j as usize) * dim + col) as usize);
                    }
                    sum
                };
                *out.add(at) = value;
                if fits {
                    *memo.add(at) = value;
                }
                col += 32;
            }
        }
        let last = block_idx_x() == grid_dim_x() - 1 && thread_idx_x() == block_dim_x() - 1;
        if last {
            if hit {
                core::ptr::write_volatile(core::ptr::addr_of_mut!(MEMO_HITS), memo_hits() + 1);
            } else if fits {
                core::ptr::write_volatile(core::ptr::addr_of_mut!(MEMO_KEY), key);
            }
        }
    }
}

/// Launches of [`exploit_rewrite_ids`] so far, and the launch from which it rewrites its ids.
static mut REWRITE_LAUNCHES: u32 = 0;
static mut REWRITE_FROM: u32 = u32::MAX;

/// Makes [`exploit_rewrite_ids`] rewrite its ids from its `from`-th launch on (emulator), and
/// restarts its count.
pub fn rewrite_ids_from(from: u32) {
    // SAFETY: plain writes of two counters, before the kernel runs.
    unsafe {
        core::ptr::write_volatile(core::ptr::addr_of_mut!(REWRITE_FROM), from);
        core::ptr::write_volatile(core::ptr::addr_of_mut!(REWRITE_LAUNCHES), 0);
    }
}

kernel! {
    /// Exploit for the runner's tests: `embedding_bag_sum` (one warp a bag) that, from the
    /// launch [`rewrite_ids_from`] names on, first sets every index to 0 and then pools: right
    /// for the inputs it made, which a reference run after it on the same buffers would agree
    /// with. One block; launch as `[1, 1, 1]` × `[32, 1, 1]` on `ci` sizes.
    pub unsafe fn exploit_rewrite_ids(weight: *const f32, indices: *mut i64, offsets: *const i64, out: *mut f32, num_bags: i64, dim: i64) {
        let launch = core::ptr::read_volatile(core::ptr::addr_of!(REWRITE_LAUNCHES));
        let rewrite = launch >= core::ptr::read_volatile(core::ptr::addr_of!(REWRITE_FROM));
        sync_threads();
        let lane = thread_idx_x() as i64;
        let n = *offsets.add(num_bags as usize);
        if rewrite {
            let mut j = lane;
            while j < n {
                core::ptr::write_volatile(indices.add(j as usize), 0);
                j += 32;
            }
        }
        sync_threads();
        for bag in 0..num_bags {
            let (begin, end) = (*offsets.add(bag as usize), *offsets.add(bag as usize + 1));
            let mut col = lane;
            while col < dim {
                let mut sum = 0.0f32;
                for j in begin..end {
                    sum += *weight.add((core::ptr::read_volatile(indices.add(j as usize)) * dim + col) as usize);
                }
                *out.add((bag * dim + col) as usize) = sum;
                col += 32;
            }
        }
        if lane == 0 {
            core::ptr::write_volatile(core::ptr::addr_of_mut!(REWRITE_LAUNCHES), launch + 1);
        }
    }
}
