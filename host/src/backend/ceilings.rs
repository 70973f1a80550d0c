//! Measures the device's ceilings once per run (docs/design.md §7): HBM bandwidth (a large
//! device-to-device copy), L2 bandwidth (one launch of `ceiling_l2_read_f32`, whose blocks
//! re-read an L2-resident buffer), and the fp32 FMA rate (`ceiling_fma_f32`).
use crate::backend::{Backend, BackendResult, Launch, ModuleSource};
use crate::results::record::Ceilings;

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
    Ok(Ceilings {
        hbm_bytes_per_s: hbm,
        l2_bytes_per_s: l2,
        fp32_flops_per_s: fp32,
    })
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
