//! The device limits a launch plan is held to. `run` takes them from its device; `check`, which
//! needs no GPU, takes them from the GPU when there is one and otherwise uses
//! [`LaunchLimits::H100_CLASS`], the limits every H100 and H200 shares (and the CPU emulator's).
use crate::backend::DeviceInfo;

/// What a launch may ask of the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LaunchLimits {
    /// Blocks per grid axis (x, y, z).
    pub max_grid: [i64; 3],
    /// Threads per block axis (x, y, z).
    pub max_block: [i64; 3],
    /// Threads per block in all.
    pub max_threads_per_block: u32,
    /// Dynamic shared memory per block, in bytes.
    pub max_shared_bytes_per_block: usize,
    /// Device memory a plan's scratch may take, in bytes (`run` holds scratch to the memory
    /// free at the time; `check` to this).
    pub memory_bytes: usize,
}

/// Grid limits of every GPU of compute capability 3.0 and later.
const MAX_GRID: [i64; 3] = [(1 << 31) - 1, 65535, 65535];

impl LaunchLimits {
    /// An H100/H200-class device: 1024 threads per block (z at most 64), 227 KiB of dynamic
    /// shared memory per block, grid x < 2^31 and y, z ≤ 65535, and 80 GiB of memory (an H100's;
    /// an H200 has more, so a plan within this fits both).
    pub(crate) const H100_CLASS: LaunchLimits = LaunchLimits {
        max_grid: MAX_GRID,
        max_block: [1024, 1024, 64],
        max_threads_per_block: 1024,
        max_shared_bytes_per_block: 227 * 1024,
        memory_bytes: 80 << 30,
    };

    /// The limits of `info`'s device (block z at most 64 and the grid limits are the same on
    /// every GPU; the emulator keeps to them too).
    pub fn of(info: &DeviceInfo) -> Self {
        let t = info.max_threads_per_block as i64;
        LaunchLimits {
            max_grid: MAX_GRID,
            max_block: [t, t, t.min(64)],
            max_threads_per_block: info.max_threads_per_block,
            max_shared_bytes_per_block: info.max_shared_bytes_per_block,
            memory_bytes: info.memory_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_emulator_keeps_to_the_h100_class_limits() {
        let emu = crate::backend::emu::EmuBackend::new();
        let of = LaunchLimits::of(crate::backend::Backend::info(&emu));
        let h = LaunchLimits::H100_CLASS;
        assert_eq!(
            (of.max_grid, of.max_block, of.max_threads_per_block),
            (h.max_grid, h.max_block, h.max_threads_per_block)
        );
        assert_eq!(of.max_shared_bytes_per_block, h.max_shared_bytes_per_block);
    }
}
