//! Measures the device's ceilings once per run (docs/design.md §7): HBM bandwidth (a large
//! device-to-device copy), L2 bandwidth (one launch of `ceiling_l2_read_f32`, whose blocks
//! re-read an L2-resident buffer), the fp32 FMA rate (`ceiling_fma_f32`), and the rates of
//! the problems' access patterns at each row width of `GATHER_ROW_BYTES`: random row gathers
//! from a table past L2 and from one inside it (`ceiling_gather_rows`), scattered atomic adds
//! (`ceiling_scatter_add_rows`).
use crate::backend::{Backend, BackendResult, Launch, ModuleSource};
use crate::results::record::{Ceilings, GatherCeiling, GATHER_ROW_BYTES, GATHER_WIDTHS};

/// Best of a few repetitions of each probe.
pub(crate) fn measure(backend: &mut dyn Backend) -> BackendResult<Ceilings> {
    let info = backend.info().clone();
    let hbm = backend.copy_bandwidth(2 << 30)?;
    let module = backend.load_module(&ModuleSource::Builtin)?;
    let sms = info.multiprocessors.max(1);

    // L2: a 16 MiB buffer (well inside the 60 MB L2 even if halves are mirrored).
    let len: u32 = 4 << 20;
    let buf = backend.alloc(len as usize * 4)?;
    backend.fill(&buf, &1.0f32.to_le_bytes())?;
    let grid = sms * 2;
    let block = 512;
    let repeats = 8;
    let out = backend.alloc((grid * block) as usize * 4)?;
    let l2_launch = Launch {
        kernel: "ceiling_l2_read_f32".into(),
        grid: [grid, 1, 1],
        block: [block, 1, 1],
        shared_bytes: 0,
        args: vec![
            backend.address(&buf),
            len as u64,
            repeats,
            backend.address(&out),
        ],
    };
    let l2_bytes = grid as f64 * repeats as f64 * len as f64 * 4.0;
    let l2 = l2_bytes / (best_ms(backend, module, &l2_launch)? * 1e-3);
    backend.free(out);
    backend.free(buf);

    let grid = sms * 8;
    let block = 256;
    let iters = 1 << 14;
    let out = backend.alloc((grid * block) as usize * 4)?;
    let fma = Launch {
        kernel: "ceiling_fma_f32".into(),
        grid: [grid, 1, 1],
        block: [block, 1, 1],
        shared_bytes: 0,
        args: vec![iters, 1.0f32.to_bits() as u64, backend.address(&out)],
    };
    let flops = grid as f64 * block as f64 * iters as f64 * 8.0 * 2.0;
    let fp32 = flops / (best_ms(backend, module, &fma)? * 1e-3);
    backend.free(out);
    // A probe that fails (a 1 GiB table that does not fit) costs the gather floor, not the run.
    let gathers = measure_gathers(backend, module, &GatherProbe::device(sms))
        .map_err(|e| eprintln!("warning: gather ceilings not measured: {e}"))
        .ok();
    Ok(Ceilings {
        hbm_bytes_per_s: hbm,
        l2_bytes_per_s: l2,
        fp32_flops_per_s: fp32,
        gathers,
    })
}

/// The sizes of the gather probes.
pub(crate) struct GatherProbe {
    /// The table gathered from HBM (far past the 50–60 MB L2 of an H100/H200).
    pub hbm_table_bytes: usize,
    /// The table gathered from L2.
    pub l2_table_bytes: usize,
    /// Bytes each gather launch reads, and each atomic launch updates.
    pub gathered_bytes: usize,
    pub atomic_bytes: usize,
    pub grid: u32,
    pub block: u32,
}

impl GatherProbe {
    /// A GPU's: a 1 GiB and a 16 MiB table, 512 MiB gathered a launch, 64 MiB of atomic adds.
    fn device(sms: u32) -> Self {
        GatherProbe {
            hbm_table_bytes: 1 << 30,
            l2_table_bytes: 16 << 20,
            gathered_bytes: 512 << 20,
            atomic_bytes: 64 << 20,
            grid: sms * 16,
            block: 256,
        }
    }
}

/// The rates of random row gathers (from a table past L2 and from one inside it) and of
/// scattered atomic adds, at each width of [`GATHER_ROW_BYTES`] (best of a few launches).
pub(crate) fn measure_gathers(
    backend: &mut dyn Backend,
    module: crate::backend::ModuleId,
    probe: &GatherProbe,
) -> BackendResult<[GatherCeiling; GATHER_WIDTHS]> {
    let big = backend.alloc(probe.hbm_table_bytes)?;
    let small = backend.alloc(probe.l2_table_bytes)?;
    for t in [&big, &small] {
        backend.fill(t, &0.5f32.to_le_bytes())?;
    }
    let out = backend.alloc((probe.grid * probe.block) as usize * 4)?;
    let mut rates = [GatherCeiling::default(); GATHER_WIDTHS];
    for (rate, row_bytes) in rates.iter_mut().zip(GATHER_ROW_BYTES) {
        let row_floats = (row_bytes / 4) as u64;
        let rows = |table: usize| (table / row_bytes as usize) as u64;
        let lookups = (probe.gathered_bytes / row_bytes as usize) as u64;
        let atomics = (probe.atomic_bytes / row_bytes as usize) as u64;
        let launch = |kernel: &str, table, rows, lookups, extra: Vec<u64>| Launch {
            kernel: kernel.into(),
            grid: [probe.grid, 1, 1],
            block: [probe.block, 1, 1],
            shared_bytes: 0,
            args: [vec![table, rows, row_floats, lookups, 0x5EED], extra].concat(),
        };
        let per_s = |bytes: u64, ms: f64| bytes as f64 / (ms * 1e-3);
        let (big_at, small_at, out_at) = (
            backend.address(&big),
            backend.address(&small),
            backend.address(&out),
        );
        let hbm = launch(
            "ceiling_gather_rows",
            big_at,
            rows(probe.hbm_table_bytes),
            lookups,
            vec![out_at],
        );
        let l2 = launch(
            "ceiling_gather_rows",
            small_at,
            rows(probe.l2_table_bytes),
            lookups,
            vec![out_at],
        );
        let atomic = launch(
            "ceiling_scatter_add_rows",
            big_at,
            rows(probe.hbm_table_bytes),
            atomics,
            vec![],
        );
        let gathered = lookups * row_bytes as u64;
        *rate = GatherCeiling {
            row_bytes,
            hbm_bytes_per_s: per_s(gathered, best_ms(backend, module, &hbm)?),
            l2_bytes_per_s: per_s(gathered, best_ms(backend, module, &l2)?),
            atomic_bytes_per_s: per_s(
                atomics * row_bytes as u64,
                best_ms(backend, module, &atomic)?,
            ),
        };
    }
    for b in [out, small, big] {
        backend.free(b);
    }
    Ok(rates)
}

fn best_ms(
    backend: &mut dyn Backend,
    module: crate::backend::ModuleId,
    launch: &Launch,
) -> BackendResult<f64> {
    backend.launch(module, launch)?; // warm-up (module JIT, clocks)
    backend.synchronize()?;
    let mut best = f64::MAX;
    for _ in 0..5 {
        backend.timer_start()?;
        backend.launch(module, launch)?;
        best = best.min(backend.timer_stop()?);
    }
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::emu::EmuBackend;

    #[test]
    fn the_gather_probes_run_at_every_width_and_give_rates() {
        let mut backend = EmuBackend::new();
        let module = backend.load_module(&ModuleSource::Builtin).unwrap();
        let probe = GatherProbe {
            hbm_table_bytes: 64 << 10,
            l2_table_bytes: 16 << 10,
            gathered_bytes: 8 << 10,
            atomic_bytes: 4 << 10,
            grid: 2,
            block: 64,
        };
        let rates = measure_gathers(&mut backend, module, &probe).unwrap();
        let widths: Vec<u32> = rates.iter().map(|r| r.row_bytes).collect();
        assert_eq!(widths, GATHER_ROW_BYTES);
        for r in rates {
            for v in [r.hbm_bytes_per_s, r.l2_bytes_per_s, r.atomic_bytes_per_s] {
                assert!(v.is_finite() && v > 0.0, "{r:?}");
            }
        }
    }
}
