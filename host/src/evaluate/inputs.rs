//! One problem's input sets on the device ([`DeviceSet`]): each set read from the run's input
//! cache, or else generated from its seeds (and cached), its oracle and work computed, its
//! inputs uploaded and fingerprinted (a tensor the sets share, such as the table, once for all:
//! [`SharedUploads`]), and its output buffers:
//! one set for the reference and one for the candidate ([`Side`]), so the reference's outputs
//! are never where a candidate writes, plus the initial values of in-out tensors, copied back
//! into the outputs before every run. An in-out tensor with a row-update oracle also gets the
//! fingerprint its other rows keep
//! ([`super::expected::ExpectedRows`]), so its checks copy back only the rows that change. Every
//! input and output buffer lies between guard regions ([`super::guard`]).
use super::cache::{CachedSet, InputCache, StoreQueue};
use super::config::SetPlan;
use super::expected::{expected_outputs, expected_rows, Expected, ExpectedRows};
use super::guard;
pub(super) use super::specs::{input_specs, output_specs};
use crate::backend::{Backend, BackendError, Buffer};
use crate::candidate::plan::Buffers;
use crate::runner::activity::{Phase, PhaseTimes};
use bench_problems::check::poison_pattern;
use bench_problems::spec::shape_of;
use bench_problems::{InputSet, Oracle, Preset, Problem, Role, Work};
use data_gen::DType;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Whose output buffers a run writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Side {
    Reference,
    Candidate,
}

/// What the outputs (other than in-out tensors) hold when a run starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum OutputFill {
    /// What the last run left (the reference's timed runs).
    Keep,
    /// The poison pattern of the dtype (checked runs: an element left unwritten is found).
    Poison,
    /// A finite canary drawn from the salt ([`canary_pattern`]): the candidate's timed runs, so
    /// that neither the last answer nor a recognisable pattern is there to be kept.
    Canary(u64),
}

/// A finite value of `dtype` far from any output a problem makes (about 2^121 for f32, bf16
/// and f64, between 2^14 and 2^15 for f16; any bytes for integers), its sign and low bits drawn
/// from `salt`, as a fill pattern: an element a timed run leaves unwritten holds it, and the
/// comparison with the reference's output fails on it. Not the poison, so a kernel that keeps
/// what it finds unless it is the poison keeps a wrong value. Its period is at most 4 bytes, so
/// the device fills with a 32-bit memset (an 8-byte period is built on the host and uploaded).
pub fn canary_pattern(dtype: DType, salt: u64) -> Vec<u8> {
    let r = data_gen::seed::derive(salt, 0xC0FFEE);
    let sign32 = (r as u32) & 0x8000_0000;
    let word = |w: u32| w.to_le_bytes().repeat(2);
    match dtype {
        // The same word in both halves: exponent 0x478 from the high word, so 2^121 too.
        DType::F64 => word(sign32 | 0x4780_0000 | (r as u32 >> 12 & 0xF_FFFF)),
        DType::F32 => (sign32 | 0x7C00_0000 | (r as u32 >> 9 & 0x7F_FFFF))
            .to_le_bytes()
            .to_vec(),
        DType::BF16 => (((sign32 | 0x7C00_0000) >> 16) as u16 | (r as u16 & 0x7F))
            .to_le_bytes()
            .to_vec(),
        DType::F16 => ((sign32 >> 16) as u16 | 0x7400 | (r as u16 & 0x3FF))
            .to_le_bytes()
            .to_vec(),
        DType::I64 => word((r >> 32) as u32),
        other => r.to_le_bytes()[..other.size_bytes().clamp(1, 4)].to_vec(),
    }
}

/// One input set on the device.
pub(super) struct DeviceSet {
    /// `public-0`, `secret-1`, `edge-0`, ...
    pub label: String,
    pub input: InputSet,
    pub oracle: Arc<Oracle>,
    pub work: Work,
    pub inputs: Buffers,
    /// Fingerprints of the inputs and of the initial values of in-out tensors, as uploaded.
    pub fingerprints: BTreeMap<String, u64>,
    /// The bytes a correct kernel writes to each exact output and their fingerprint, so that
    /// its checks compare fingerprints on the device ([`super::expected::expected_outputs`]; set
    /// by [`DeviceSet::prepare_checks`]).
    pub expected: BTreeMap<String, Expected>,
    /// For each in-out output with a row-update oracle: its row ids on the device and the
    /// fingerprint of the rows that keep their initial value (set when the set is uploaded).
    pub expected_rows: BTreeMap<String, ExpectedRows>,
    ref_outputs: Buffers,
    cand_outputs: Buffers,
    /// Initial values of in-out tensors, copied into the outputs before every run.
    pub pristine: Buffers,
}

/// Device copies of the host tensors already uploaded for a problem's sets, with their
/// fingerprints: a tensor whose bytes another set shares (the table, an in-place update's
/// initial state) is uploaded and fingerprinted once.
#[derive(Default)]
pub(super) struct SharedUploads(Vec<(data_gen::Bytes, Buffer, u64)>);

impl SharedUploads {
    /// The device copy of `bytes` and its fingerprint, uploading them if none is there yet.
    fn upload(
        &mut self,
        backend: &mut dyn Backend,
        bytes: &data_gen::Bytes,
    ) -> Result<(Buffer, u64), BackendError> {
        if let Some((_, buf, fp)) = self.0.iter().find(|(b, _, _)| b.same_as(bytes)) {
            return Ok((*buf, *fp));
        }
        let buf = guard::alloc(backend, bytes.len())?;
        backend.upload(&buf, bytes)?;
        let fp = backend.fingerprint(&buf)?;
        self.0.push((bytes.clone(), buf, fp));
        Ok((buf, fp))
    }
}

/// A set on the host: inputs, oracle and work.
struct HostSet {
    input: InputSet,
    /// Shared with the cache's writer (gigabytes at `full`: never copied).
    oracle: Arc<Oracle>,
    work: Work,
}

/// Generates set `plan` (its work with it).
fn generate(
    problem: &dyn Problem,
    preset: Preset,
    plan: &SetPlan,
    phases: &mut PhaseTimes,
) -> anyhow::Result<CachedSet> {
    let input = phases.time(Phase::Generate, || match plan.special {
        Some(name) => problem.generate_special(name, preset, plan.seeds()),
        None => problem.generate(preset, &plan.sizes, plan.seeds()),
    })?;
    let work = problem.work(&input);
    Ok(CachedSet { input, work })
}

/// A set on the host: read from the cache, or generated (`generated`: to be cached), with
/// its oracle.
pub(super) struct HostSide {
    plan: SetPlan,
    set: HostSet,
    generated: bool,
    /// The oracle was computed here (not read from the cache): to be cached.
    computed_oracle: bool,
}

/// The sets `plans` names on the host, the first alone (it makes the shared tables), then the
/// rest in parallel over the sets (each set's generator and oracle may use more threads): from `cache` when it holds one, else generated, each with its
/// oracle. A cache that cannot be read is reported and bypassed, never fatal. `phases` gets the
/// wall time of the whole, shared among reading, generating and computing oracles in the
/// proportions of their summed thread times, so the phase table adds up to the wall clock.
pub(super) fn host_sides(
    problem: &dyn Problem,
    preset: Preset,
    plans: Vec<SetPlan>,
    cache: Option<&InputCache>,
    phases: &mut PhaseTimes,
) -> anyhow::Result<Vec<HostSide>> {
    use rayon::prelude::*;
    let started = std::time::Instant::now();
    let one = |plan| {
        let mut mine = PhaseTimes::default();
        let side = host_side(problem, preset, plan, cache, &mut mine);
        (side, mine)
    };
    // The first set alone: it makes the tables every set shares (`shared_table`), which the
    // others then find instead of each making its own copy at once.
    let mut plans = plans.into_iter();
    let mut done: Vec<(anyhow::Result<HostSide>, PhaseTimes)> =
        plans.next().map(one).into_iter().collect();
    done.par_extend(plans.collect::<Vec<_>>().into_par_iter().map(one));
    let mut summed = PhaseTimes::default();
    for (_, p) in &done {
        summed.add(p);
    }
    let wall = started.elapsed().as_secs_f64();
    let scale = match summed.total() {
        t if t > wall => wall / t,
        _ => 1.0,
    };
    for (phase, secs) in summed.0 {
        *phases.0.entry(phase).or_default() += secs * scale;
    }
    done.into_iter().map(|(side, _)| side).collect()
}

/// One set on the host ([`host_sides`]).
fn host_side(
    problem: &dyn Problem,
    preset: Preset,
    plan: SetPlan,
    cache: Option<&InputCache>,
    phases: &mut PhaseTimes,
) -> anyhow::Result<HostSide> {
    let cached = cache.and_then(|c| {
        phases
            .time(Phase::Read, || c.load(problem, preset, &plan))
            .unwrap_or_else(|e| {
                eprintln!(
                    "warning: input cache: {e:#}; generating {} again",
                    plan.label
                );
                None
            })
    });
    let generated = cached.is_none();
    let CachedSet { input, work } = match cached {
        Some(set) => set,
        None => generate(problem, preset, &plan, phases)?,
    };
    // A cached set's oracle may be cached too (a restarted worker, a resumed run).
    let stored = match (cache, generated) {
        (Some(c), false) => phases
            .time(Phase::Read, || c.load_oracle(problem, preset, &plan))
            .unwrap_or_else(|e| {
                eprintln!(
                    "warning: input cache: {e:#}; computing the oracle of {} again",
                    plan.label
                );
                None
            }),
        _ => None,
    };
    let computed_oracle = stored.is_none();
    let oracle = match stored {
        Some(oracle) => Arc::new(oracle),
        None => Arc::new(phases.time(Phase::Oracle, || problem.oracle(&input))?),
    };
    Ok(HostSide {
        plan,
        set: HostSet {
            input,
            oracle,
            work,
        },
        generated,
        computed_oracle,
    })
}

impl HostSide {
    /// Queues what this side made (the set, its oracle) for the cache; nothing when it was
    /// read from there.
    pub(super) fn store(&self, store: &StoreQueue) {
        if self.generated {
            store.submit(&self.plan, &self.set.input, &self.set.work);
        }
        if self.computed_oracle {
            store.submit_oracle(&self.plan, &self.set.oracle);
        }
    }
}

impl DeviceSet {
    /// Puts a set prepared on the host ([`host_sides`]) on the device, queueing it on `store`
    /// for the cache first when it was generated; the seconds of the upload are added to
    /// `phases`.
    pub fn prepare(
        backend: &mut dyn Backend,
        problem: &dyn Problem,
        side: HostSide,
        store: Option<&StoreQueue>,
        uploads: &mut SharedUploads,
        phases: &mut PhaseTimes,
    ) -> anyhow::Result<Self> {
        if let Some(store) = store {
            side.store(store);
        }
        let HostSide { plan, set, .. } = side;
        phases.time(Phase::Upload, || {
            Self::upload(backend, problem, plan.label, set, uploads)
        })
    }

    /// Puts a generated set on the device: its inputs (fingerprinted), output buffers for both
    /// sides, and the initial values of in-out tensors (with the [`ExpectedRows`] of those with
    /// a row-update oracle, from the fingerprint of their upload).
    fn upload(
        backend: &mut dyn Backend,
        problem: &dyn Problem,
        label: String,
        set: HostSet,
        uploads: &mut SharedUploads,
    ) -> anyhow::Result<Self> {
        let HostSet {
            input,
            oracle,
            work,
        } = set;
        let mut inputs = Buffers::new();
        let mut fingerprints = BTreeMap::new();
        for spec in input_specs(problem) {
            let t = input.tensors.get(spec.name)?;
            let (buf, fp) = uploads.upload(backend, &t.bytes)?;
            fingerprints.insert(spec.name.to_string(), fp);
            inputs.insert(spec.name.to_string(), buf);
        }
        let mut ref_outputs = Buffers::new();
        let mut cand_outputs = Buffers::new();
        let mut pristine = Buffers::new();
        let mut rows_checks = BTreeMap::new();
        for spec in output_specs(problem) {
            let numel: usize = shape_of(&spec, &input.sizes)?.iter().product();
            let bytes = numel * spec.dtype.size_bytes();
            ref_outputs.insert(spec.name.to_string(), guard::alloc(backend, bytes)?);
            cand_outputs.insert(spec.name.to_string(), guard::alloc(backend, bytes)?);
            if spec.role == Role::InOut {
                let initial = input.tensors.get(spec.name)?;
                anyhow::ensure!(
                    initial.bytes.len() == bytes,
                    "in-out tensor `{}`: initial value has the wrong size",
                    spec.name
                );
                let (buf, fp) = uploads.upload(backend, &initial.bytes)?;
                pristine.insert(spec.name.to_string(), buf);
                fingerprints.insert(spec.name.to_string(), fp);
                let oracle = oracle.get(spec.name);
                if let Some(exp) = expected_rows(problem, &spec, oracle, initial, fp) {
                    rows_checks.insert(spec.name.to_string(), exp);
                }
            }
        }
        Ok(DeviceSet {
            label,
            input,
            oracle,
            work,
            inputs,
            fingerprints,
            expected: BTreeMap::new(),
            expected_rows: rows_checks,
            ref_outputs,
            cand_outputs,
            pristine,
        })
    }

    /// Computes once what the checks of exact outputs compare fingerprints with (see
    /// [`Expected`]).
    pub(crate) fn prepare_checks(&mut self, problem: &dyn Problem) -> anyhow::Result<()> {
        self.expected = expected_outputs(problem, &self.oracle, &self.input.sizes)?;
        Ok(())
    }

    /// The output buffers `side` writes.
    pub fn outputs(&self, side: Side) -> &Buffers {
        match side {
            Side::Reference => &self.ref_outputs,
            Side::Candidate => &self.cand_outputs,
        }
    }

    /// Whether the problem has in-out tensors (restored before every run, timed ones too).
    pub(crate) fn has_in_out(&self) -> bool {
        !self.pristine.is_empty()
    }

    /// Before a run: in-out tensors of `side` get their initial value back; its other outputs
    /// get what `fill` says.
    pub(crate) fn reset_outputs(
        &self,
        backend: &mut dyn Backend,
        problem: &dyn Problem,
        side: Side,
        fill: OutputFill,
    ) -> Result<(), BackendError> {
        let outputs = self.outputs(side);
        for spec in output_specs(problem) {
            if let Some(initial) = self.pristine.get(spec.name) {
                backend.copy(&outputs[spec.name], initial)?;
                continue;
            }
            let pattern = match fill {
                OutputFill::Keep => continue,
                OutputFill::Poison => poison_pattern(spec.dtype),
                OutputFill::Canary(salt) => canary_pattern(spec.dtype, salt),
            };
            backend.fill(&outputs[spec.name], &pattern)?;
        }
        Ok(())
    }

    /// Zeroes the few bytes after each input and each of `side`'s outputs that round them up
    /// to 16 ([`guard::slack`]): before every execution of a candidate, so nothing it left
    /// there reaches its next.
    pub(crate) fn clear_slack(
        &self,
        backend: &mut dyn Backend,
        side: Side,
    ) -> Result<(), BackendError> {
        guard::clear_slack(
            backend,
            self.inputs.values().chain(self.outputs(side).values()),
        )
    }

    /// Zeroes `side`'s outputs: the reference's are cleared after each of its runs, so that no
    /// candidate finds the answer for the same inputs anywhere in device memory.
    pub(crate) fn clear_outputs(
        &self,
        backend: &mut dyn Backend,
        side: Side,
    ) -> Result<(), BackendError> {
        for buf in self.outputs(side).values() {
            backend.fill(buf, &[0])?;
        }
        Ok(())
    }

    /// Frees every device buffer of the set not in `freed` (buffers the sets share are freed
    /// once), adding them to it.
    pub fn release(self, backend: &mut dyn Backend, freed: &mut BTreeSet<usize>) {
        let all = self
            .inputs
            .into_values()
            .chain(self.ref_outputs.into_values())
            .chain(self.cand_outputs.into_values())
            .chain(self.pristine.into_values());
        for b in all {
            if freed.insert(b.id) {
                backend.free(b);
            }
        }
    }
}

/// The first `n` public `ci` input sets of `problem` on `backend`, for the tests of `evaluate`.
#[cfg(test)]
pub(super) fn ci_sets(
    backend: &mut dyn Backend,
    problem: &dyn Problem,
    n: usize,
) -> Vec<DeviceSet> {
    let mut plans = super::config::ci_config(n, 0).input_sets(problem);
    plans.truncate(n);
    let mut phases = PhaseTimes::default();
    let mut uploads = SharedUploads::default();
    let sides = host_sides(problem, Preset::Ci, plans, None, &mut phases).unwrap();
    let mut prepare = |side| {
        let mut set = DeviceSet::prepare(
            &mut *backend,
            problem,
            side,
            None,
            &mut uploads,
            &mut phases,
        )
        .unwrap();
        set.prepare_checks(problem).unwrap();
        set
    };
    sides.into_iter().map(&mut prepare).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::emu::EmuBackend;
    use bench_problems::OracleOutput;

    #[test]
    fn a_second_preparation_from_the_cache_reads_the_oracles_instead_of_computing_them() {
        let problem = bench_problems::find_problem("kjt_permute").unwrap();
        let root = data_gen::tensor::scratch_path("oracle-cache");
        let cache = InputCache::new(&root, problem);
        let plans = super::super::config::ci_config(2, 1).input_sets(problem);
        let prepare = |phases: &mut PhaseTimes| {
            let mut backend = EmuBackend::new();
            let mut uploads = SharedUploads::default();
            std::thread::scope(|scope| {
                let store = StoreQueue::start(scope, &cache, problem, Preset::Ci);
                let sides = host_sides(problem, Preset::Ci, plans.clone(), Some(&cache), phases);
                let sets: Vec<DeviceSet> = sides
                    .unwrap()
                    .into_iter()
                    .map(|side| {
                        DeviceSet::prepare(
                            &mut backend,
                            problem,
                            side,
                            Some(&store),
                            &mut uploads,
                            phases,
                        )
                        .unwrap()
                    })
                    .collect();
                store.finish().unwrap();
                sets.into_iter().map(|s| s.oracle).collect::<Vec<_>>()
            })
        };
        let (mut first, mut second) = (PhaseTimes::default(), PhaseTimes::default());
        let computed = prepare(&mut first);
        let read = prepare(&mut second);
        assert!(first.0.contains_key(&Phase::Oracle));
        assert!(!second.0.contains_key(&Phase::Oracle), "{second:?}");
        assert_eq!(format!("{read:?}"), format!("{computed:?}"));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn host_sides_keep_the_plans_order_and_their_phases_add_up_to_the_wall_clock() {
        let problem = bench_problems::find_problem("unique_indices").unwrap();
        let plans = super::super::config::ci_config(3, 3).input_sets(problem);
        let labels: Vec<String> = plans.iter().map(|p| p.label.clone()).collect();
        let mut phases = PhaseTimes::default();
        let started = std::time::Instant::now();
        let sides = host_sides(problem, Preset::Ci, plans, None, &mut phases).unwrap();
        let wall = started.elapsed().as_secs_f64();
        let got: Vec<String> = sides.iter().map(|s| s.plan.label.clone()).collect();
        assert_eq!(got, labels);
        assert!(sides.iter().all(|s| s.generated));
        assert!(
            phases.total() <= wall + 1e-9,
            "{} s of phases in {wall} s",
            phases.total()
        );
        assert!(phases.0.contains_key(&Phase::Generate) && phases.0.contains_key(&Phase::Oracle));
        // A table is made once and shared by every set of its size, however many threads.
        let bags = bench_problems::find_problem("embedding_bag_sum").unwrap();
        let plans = super::super::config::ci_config(3, 3).input_sets(bags);
        let sides = host_sides(bags, Preset::Ci, plans, None, &mut phases).unwrap();
        let table = |s: &HostSide| s.set.input.tensors.get("weight").unwrap().bytes.clone();
        let first = table(&sides[0]);
        let same = sides.iter().filter(|s| table(s).same_as(&first)).count();
        assert_eq!(same, 7, "public, secret and edge sets share the table");
    }

    #[test]
    fn each_side_has_its_own_outputs_and_in_out_tensors_start_from_their_initial_value() {
        let problem = bench_problems::find_problem("embedding_backward_rowwise_adagrad").unwrap();
        let mut backend = EmuBackend::new();
        let set = ci_sets(&mut backend, problem, 1).remove(0);
        assert_eq!(set.label, "public-0");
        for spec in input_specs(problem) {
            let uploaded = backend.download(&set.inputs[spec.name]).unwrap();
            assert_eq!(uploaded, set.input.tensors.get(spec.name).unwrap().bytes);
            let fp = backend.fingerprint(&set.inputs[spec.name]).unwrap();
            assert_eq!(fp, set.fingerprints[spec.name]);
        }
        assert!(set.has_in_out());
        let (reference, candidate) = (set.outputs(Side::Reference), set.outputs(Side::Candidate));
        for spec in output_specs(problem) {
            assert_ne!(reference[spec.name], candidate[spec.name], "{}", spec.name);
        }
        set.reset_outputs(&mut backend, problem, Side::Candidate, OutputFill::Poison)
            .unwrap();
        for spec in output_specs(problem) {
            let got = backend.download(&candidate[spec.name]).unwrap();
            if spec.role == Role::InOut {
                assert_eq!(got, set.input.tensors.get(spec.name).unwrap().bytes);
            } else {
                let poison = poison_pattern(spec.dtype);
                assert!(
                    got.chunks(poison.len()).all(|c| c == poison),
                    "{}",
                    spec.name
                );
            }
        }
        // Row-update outputs: the fingerprint of the other rows' initial words (summed here word by word, at their place in the table).
        for spec in output_specs(problem) {
            let OracleOutput::Rows(rows) = &set.oracle[spec.name] else {
                panic!("{}: a row-update oracle", spec.name)
            };
            let exp = &set.expected_rows[spec.name];
            assert_eq!(exp.width_words, rows.width);
            let initial = set.input.f32s(spec.name).unwrap();
            let touched = rows.touched();
            let mut unchanged = 0u64;
            for (i, &x) in initial.iter().enumerate() {
                if !touched[i / rows.width] {
                    let key = crate::backend::fingerprint_key();
                    let hash =
                        gpu_kernels::kernels::fingerprint::word_hash(key, i as u64, x.to_bits());
                    unchanged = unchanged.wrapping_add(hash);
                }
            }
            assert_eq!(exp.unchanged_fingerprint, unchanged, "{}", spec.name);
        }
        set.release(&mut backend, &mut BTreeSet::new());
        assert_eq!(backend.live_buffers(), 0);
    }
}
