//! Loading a plan for evaluation: its module loaded or compiled (a failure is the plan's status:
//! `skipped`, `compile_error` or `runtime_error`), its scratch buffers allocated for every input
//! set (between guard regions), and its launches bound to each set's buffers on one side.
use super::guard;
use super::inputs::{DeviceSet, OutputFill, Side};
use crate::backend::{Backend, BackendError, Buffer, Launch, ModuleId};
use crate::candidate::plan;
use crate::candidate::Candidate;
use crate::results::record::Status;
use bench_problems::Problem;

/// A loaded plan: its module, the launches bound for every input set, and its scratch.
pub(super) struct Loaded {
    pub module: ModuleId,
    /// One bound plan per input set, in the order of the sets.
    pub plans: Vec<Vec<Launch>>,
    pub scratch: Vec<Scratch>,
}

/// One scratch buffer of a loaded plan (between guard regions, [`super::guard`]).
pub(super) struct Scratch {
    /// The input set whose bound plan uses it.
    pub set: usize,
    /// Its name in the manifest.
    pub name: String,
    pub buffer: Buffer,
}

/// Loads `cand`'s module and binds its plan on every set, writing `side`'s outputs (scratch
/// allocated per set).
pub(super) fn load(
    backend: &mut dyn Backend,
    sets: &[DeviceSet],
    cand: &Candidate,
    side: Side,
) -> Result<Loaded, (Status, String)> {
    let module = backend.load_module(&cand.source).map_err(|e| match e {
        BackendError::Unsupported(m) => (Status::Skipped, m),
        BackendError::Compile(m) => (Status::CompileError, m),
        BackendError::Refused(m) => (Status::InvalidManifest, m),
        other => (Status::RuntimeError, other.to_string()),
    })?;
    let mut plans = Vec::new();
    let mut scratch = Vec::new();
    match bind_all(backend, sets, cand, side, module, &mut plans, &mut scratch) {
        Ok(()) => Ok(Loaded {
            module,
            plans,
            scratch,
        }),
        Err(e) => {
            // Nothing a refused plan allocated stays behind for the next candidate.
            for s in scratch {
                backend.free(s.buffer);
            }
            Err(e)
        }
    }
}

/// Allocates the scratch of `cand` and binds its plan for every set, pushing both as it goes
/// (so the caller can free what was allocated when a later set fails).
fn bind_all(
    backend: &mut dyn Backend,
    sets: &[DeviceSet],
    cand: &Candidate,
    side: Side,
    module: ModuleId,
    plans: &mut Vec<Vec<Launch>>,
    scratch: &mut Vec<Scratch>,
) -> Result<(), (Status, String)> {
    for (set_index, set) in sets.iter().enumerate() {
        let mut buffers = set.inputs.clone();
        buffers.extend(set.outputs(side).clone());
        let sizes = &set.input.sizes;
        for (k, s) in cand.scratch.iter().enumerate() {
            let bytes = plan::scratch_bytes(cand, k, sizes, backend.free_memory())
                .map_err(|e| (Status::RuntimeError, e))?;
            let buf = guard::alloc(backend, bytes)
                .map_err(|e| (Status::RuntimeError, format!("scratch `{}`: {e}", s.name)))?;
            scratch.push(Scratch {
                set: set_index,
                name: s.name.clone(),
                buffer: buf,
            });
            buffers.insert(s.name.clone(), buf);
        }
        let scalars = &set.input.scalars;
        let mut bound = plan::bind(cand, sizes, scalars, &buffers, backend, module)
            .map_err(|e| (Status::RuntimeError, e))?;
        for (i, launch) in bound.iter_mut().enumerate() {
            compiled_extras(backend, module, cand, set_index, i, launch, scratch)?;
        }
        plans.push(bound);
    }
    Ok(())
}

/// What a compiled module (Triton's) fixes for launch `i` beyond its plan: the block must be
/// its `num_warps` × 32 threads, the dynamic shared memory is its metadata's, and its trailing
/// scratch pointers are appended — null for a size of 0, else a guarded scratch buffer of
/// size × programs bytes for this set (as Triton's launcher allocates), poisoned and checked
/// like the plan's own scratch.
fn compiled_extras(
    backend: &mut dyn Backend,
    module: ModuleId,
    cand: &Candidate,
    set_index: usize,
    i: usize,
    launch: &mut Launch,
    scratch: &mut Vec<Scratch>,
) -> Result<(), (Status, String)> {
    let Some(c) = backend.compiled_launch(module, &launch.kernel) else {
        return Ok(());
    };
    let fail = |m: String| {
        (
            Status::RuntimeError,
            format!("{}: launch[{i}]: {m}", cand.origin),
        )
    };
    let threads: u32 = launch.block.iter().product();
    if threads != c.block_threads {
        return Err(fail(format!(
            "block of {threads} threads, the compiled kernel needs {} (num_warps × 32)",
            c.block_threads
        )));
    }
    let most = backend.info().max_shared_bytes_per_block;
    if c.shared_bytes as usize > most {
        return Err(fail(format!(
            "the compiled kernel needs {} bytes of shared memory, the device allows {most}",
            c.shared_bytes
        )));
    }
    launch.shared_bytes = c.shared_bytes;
    let available = backend.free_memory();
    let mut alloc = |bytes: usize, t: &crate::backend::triton::TrailingScratch| {
        if bytes > available {
            return Err(format!(
                "{}: {bytes} bytes, more than the {available} bytes free",
                t.name
            ));
        }
        let buf = guard::alloc(backend, bytes).map_err(|e| format!("{}: {e}", t.name))?;
        scratch.push(Scratch {
            set: set_index,
            name: format!("{} of launch[{i}]", t.name),
            buffer: buf,
        });
        // Guarded buffers start 64 KiB into a 256-byte-aligned allocation.
        let at = backend.address(&buf);
        if t.align > 0 && at % t.align != 0 {
            return Err(format!("{}: alignment {} is not met", t.name, t.align));
        }
        Ok(at)
    };
    let words =
        crate::backend::triton::trailing_args(&c.scratch, launch.grid, &mut alloc).map_err(fail)?;
    launch.args.extend(words);
    Ok(())
}

impl Loaded {
    /// Runs the plan bound for set `set` (queued on the stream; no synchronisation).
    pub fn run(&self, backend: &mut dyn Backend, set: usize) -> Result<(), BackendError> {
        plan::run(backend, self.module, &self.plans[set])
    }

    /// The scratch buffers the plan bound for set `set` uses, by name.
    pub(crate) fn scratch_of(&self, set: usize) -> impl Iterator<Item = (&str, &Buffer)> {
        self.scratch
            .iter()
            .filter(move |s| s.set == set)
            .map(|s| (s.name.as_str(), &s.buffer))
    }

    /// Zeroes the scratch the plan bound for set `set` uses (the reference's holds what it
    /// computed on the way, which no candidate may find).
    pub(crate) fn clear_scratch(
        &self,
        backend: &mut dyn Backend,
        set: usize,
    ) -> Result<(), BackendError> {
        for (_, buf) in self.scratch_of(set) {
            backend.fill(buf, &[0])?;
        }
        Ok(())
    }

    /// Fills every scratch buffer of the plan (all sets') with `byte`: before each timed run of
    /// a candidate, so that nothing it left in scratch survives to the next.
    pub(crate) fn fill_scratch(
        &self,
        backend: &mut dyn Backend,
        byte: u8,
    ) -> Result<(), BackendError> {
        for s in &self.scratch {
            backend.fill(&s.buffer, &[byte])?;
        }
        guard::clear_slack(backend, self.scratch.iter().map(|s| &s.buffer))
    }

    /// What every execution of the plan on `set` starts from: the outputs as `fill` says, all
    /// scratch filled with `scratch_byte`, the bytes rounding each buffer up cleared, and for a
    /// candidate the local and shared memory earlier launches left overwritten.
    pub(crate) fn prepare_run(
        &self,
        backend: &mut dyn Backend,
        set: &DeviceSet,
        problem: &dyn Problem,
        side: Side,
        fill: OutputFill,
        scratch_byte: u8,
    ) -> Result<(), BackendError> {
        set.reset_outputs(backend, problem, side, fill)?;
        self.fill_scratch(backend, scratch_byte)?;
        set.clear_slack(backend, side)?;
        if side == Side::Candidate {
            backend.clear_thread_state()?;
        }
        Ok(())
    }

    /// Frees the scratch buffers (the module stays loaded).
    pub(crate) fn free_scratch(self, backend: &mut dyn Backend) {
        for s in self.scratch {
            backend.free(s.buffer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::inputs::ci_sets;
    use super::*;
    use crate::backend::emu::EmuBackend;
    use crate::candidate::{reference_candidate, ModuleSource};
    use bench_problems::{Dim, ScratchSpec};

    #[test]
    fn a_plan_is_bound_once_per_set_to_the_sides_outputs() {
        let problem = bench_problems::find_problem("embedding_bag_sum").unwrap();
        let mut backend = EmuBackend::new();
        let sets = ci_sets(&mut backend, problem, 2);
        let cand = reference_candidate(problem);
        let loaded = load(&mut backend, &sets, &cand, Side::Candidate).unwrap();
        assert_eq!(loaded.plans.len(), 2);
        let out = backend.address(&sets[1].outputs(Side::Candidate)["out"]);
        let not = backend.address(&sets[1].outputs(Side::Reference)["out"]);
        assert!(loaded.plans[1][0].args.contains(&out));
        assert!(!loaded.plans[1][0].args.contains(&not));
    }

    #[test]
    fn load_failures_become_statuses_naming_the_field() {
        let problem = bench_problems::find_problem("embedding_bag_sum").unwrap();
        let mut backend = EmuBackend::new();
        let sets = ci_sets(&mut backend, problem, 2);
        let mut cuda = reference_candidate(problem);
        cuda.source = ModuleSource::cuda("k.cu", "");
        let (status, _) = load(&mut backend, &sets, &cuda, Side::Candidate)
            .err()
            .unwrap();
        assert_eq!(status, Status::Skipped);
        // Cubins, fatbins, Triton functions and binaries not built yet: skipped, saying why.
        let spec = crate::backend::triton::TritonSpec {
            function: "k".into(),
            signature: vec![],
            constexprs: vec![],
            num_warps: 4,
            num_stages: 3,
        };
        let sources = [
            (
                ModuleSource::Binary {
                    file: "k.cubin".into(),
                    image: vec![0x7f, b'E', b'L', b'F'],
                },
                "cubin or fatbin",
            ),
            (
                ModuleSource::Triton {
                    file: "k.py".into(),
                    spec,
                },
                "Triton",
            ),
            (
                ModuleSource::Unavailable {
                    file: "k.cubin".into(),
                    reason: "k.cubin is not built: run tools/build_cubin.sh".into(),
                },
                "tools/build_cubin.sh",
            ),
        ];
        for (source, why) in sources {
            let mut cand = reference_candidate(problem);
            cand.source = source;
            let (status, msg) = load(&mut backend, &sets, &cand, Side::Candidate)
                .err()
                .unwrap();
            assert_eq!(status, Status::Skipped, "{msg}");
            assert!(msg.contains(why), "{msg}");
        }
        let mut huge = reference_candidate(problem);
        huge.origin = "somewhere/huge".into();
        huge.scratch = vec![ScratchSpec {
            name: "tmp".into(),
            bytes: Dim::Expr("B - B - 8".into()),
        }];
        let (status, msg) = load(&mut backend, &sets, &huge, Side::Candidate)
            .err()
            .unwrap();
        assert_eq!(status, Status::RuntimeError);
        assert!(
            msg.contains("somewhere/huge/candidate.toml: scratch[0].bytes (`tmp`)")
                && msg.contains("negative"),
            "{msg}"
        );
    }

    #[test]
    fn a_plan_refused_on_a_later_set_leaves_no_scratch_behind() {
        let problem = bench_problems::find_problem("embedding_bag_sum").unwrap();
        let mut backend = EmuBackend::new();
        let sets = ci_sets(&mut backend, problem, 2);
        let before = backend.live_buffers();
        // Scratch is allocated for set 0, then the launch is refused (one argument short).
        let mut short = reference_candidate(problem);
        short.launches[0].args.pop();
        let (status, msg) = load(&mut backend, &sets, &short, Side::Candidate)
            .err()
            .unwrap();
        assert_eq!(status, Status::RuntimeError);
        assert!(msg.contains("parameters"), "{msg}");
        assert_eq!(backend.live_buffers(), before, "scratch freed");
        let loaded = load(
            &mut backend,
            &sets,
            &reference_candidate(problem),
            Side::Candidate,
        )
        .unwrap();
        assert_eq!(
            backend.live_buffers(),
            before + 2 * 2,
            "two scratch buffers per set"
        );
        loaded.free_scratch(&mut backend);
        assert_eq!(backend.live_buffers(), before);
    }
}
