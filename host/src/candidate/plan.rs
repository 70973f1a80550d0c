//! Binds a launch plan to numbers: evaluates grid, block and shared-memory expressions over the
//! sizes, turns each argument into a device address or an integer of the parameter's width, and
//! refuses launches the device could not run — each error naming the plan's file and field.
//! [`resolve`] holds every rule; `run` reaches it through [`bind`] (its device's limits and
//! buffers) and `check` directly (default limits, placeholder addresses), so the two agree.
use crate::backend::{Backend, Buffer, Launch, ModuleId};
use crate::candidate::launch_limits::LaunchLimits;
use crate::candidate::Candidate;
use bench_problems::expr::Number;
use bench_problems::{Dim, Sizes};
use std::collections::BTreeMap;

/// Named device buffers a plan may take as arguments (tensors and scratch).
pub type Buffers = BTreeMap<String, Buffer>;

/// Resolves every launch of `cand` for `sizes` on the backend: its limits, its kernels'
/// parameter lists and its buffers' addresses.
pub fn bind(
    cand: &Candidate,
    sizes: &Sizes,
    scalars: &BTreeMap<String, f64>,
    buffers: &Buffers,
    backend: &mut dyn Backend,
    module: ModuleId,
) -> Result<Vec<Launch>, String> {
    let limits = LaunchLimits::of(backend.info());
    let addresses: BTreeMap<&str, u64> = buffers
        .iter()
        .map(|(name, b)| (name.as_str(), backend.address(b)))
        .collect();
    let mut params = |kernel: &str| {
        backend
            .kernel_params(module, kernel)
            .map_err(|e| e.to_string())
    };
    resolve(cand, sizes, scalars, &limits, &mut params, &|name| {
        addresses.get(name).copied()
    })
}

/// Every rule a launch plan must keep, applied for `sizes` and `limits`: grid and block axes
/// within the device's bounds, threads per block and dynamic shared memory within its limits,
/// the argument list matching the kernel's parameters (`params` gives their byte widths), each
/// argument a buffer (`address` gives its address) of a pointer parameter or a number that fits
/// its parameter. The launches resolved to numbers, or what is wrong, naming file and field.
pub(crate) fn resolve(
    cand: &Candidate,
    sizes: &Sizes,
    scalars: &BTreeMap<String, f64>,
    limits: &LaunchLimits,
    params: &mut dyn FnMut(&str) -> Result<Vec<usize>, String>,
    address: &dyn Fn(&str) -> Option<u64>,
) -> Result<Vec<Launch>, String> {
    let mut out = Vec::with_capacity(cand.launches.len());
    for (i, l) in cand.launches.iter().enumerate() {
        let field = |f: &str| format!("{}: launch[{i}].{f}", manifest_name(cand));
        let eval = |d: &Dim, f: &str| d.eval(sizes).map_err(|e| format!("{}: {e}", field(f)));
        let mut grid = [0u32; 3];
        let mut block = [0u32; 3];
        for axis in 0..3 {
            let limit = limits.max_grid[axis];
            let g = eval(&l.grid[axis], &format!("grid[{axis}]"))?;
            if g < 1 || g > limit {
                return Err(format!(
                    "{} = {g}: must be in 1..={limit}",
                    field(&format!("grid[{axis}]"))
                ));
            }
            grid[axis] = g as u32;
            let limit = limits.max_block[axis];
            let b = eval(&l.block[axis], &format!("block[{axis}]"))?;
            if b < 1 || b > limit {
                return Err(format!(
                    "{} = {b}: must be in 1..={limit}",
                    field(&format!("block[{axis}]"))
                ));
            }
            block[axis] = b as u32;
        }
        let threads: u64 = block.iter().map(|&b| b as u64).product();
        if threads > limits.max_threads_per_block as u64 {
            return Err(format!(
                "{}: {threads} threads per block, the device allows {}",
                field("block"),
                limits.max_threads_per_block
            ));
        }
        let shared = eval(&l.shared_bytes, "shared_bytes")?;
        if shared < 0 || shared as u64 > limits.max_shared_bytes_per_block as u64 {
            return Err(format!(
                "{} = {shared}: the device allows 0..={} bytes",
                field("shared_bytes"),
                limits.max_shared_bytes_per_block
            ));
        }
        let params = params(&l.kernel).map_err(|e| format!("{}: {e}", field("kernel")))?;
        if params.len() != l.args.len() {
            return Err(format!(
                "{}: kernel `{}` takes {} parameters, the plan passes {}",
                field("args"),
                l.kernel,
                params.len(),
                l.args.len()
            ));
        }
        let mut args = Vec::with_capacity(params.len());
        for (j, (arg, &width)) in l.args.iter().zip(&params).enumerate() {
            let f = field(&format!("args[{j}]"));
            if let Some(at) = address(arg) {
                if width != 8 {
                    return Err(format!(
                        "{f}: `{arg}` is a pointer but parameter {j} is {width} bytes"
                    ));
                }
                args.push(at);
                continue;
            }
            let value = bench_problems::expr::eval_number(arg, sizes, scalars)
                .map_err(|e| format!("{f}: {e}"))?;
            let word = match (value, width) {
                (Number::Int(v), 8) => v as u64,
                (Number::Int(v), 4) if (i32::MIN as i64..=u32::MAX as i64).contains(&v) => {
                    v as u32 as u64
                }
                (Number::Int(v), 4) => {
                    return Err(format!(
                        "{f}: `{arg}` = {v} does not fit the 4-byte parameter {j}"
                    ))
                }
                (Number::Float(v), 8) => v.to_bits(),
                (Number::Float(v), 4) => (v as f32).to_bits() as u64,
                (_, w) => {
                    return Err(format!(
                        "{f}: parameter {j} is {w} bytes; only 4- and 8-byte scalars are passed"
                    ))
                }
            };
            args.push(word);
        }
        out.push(Launch {
            kernel: l.kernel.clone(),
            grid,
            block,
            shared_bytes: shared as u32,
            args,
        });
    }
    Ok(out)
}

/// The byte size of scratch buffer `k` of `cand` for `sizes`: not negative and at most
/// `available` (the device memory free in `run`, the limits' memory in `check`).
pub(crate) fn scratch_bytes(
    cand: &Candidate,
    k: usize,
    sizes: &Sizes,
    available: usize,
) -> Result<usize, String> {
    let s = &cand.scratch[k];
    let field = format!("{}: scratch[{k}].bytes (`{}`)", manifest_name(cand), s.name);
    let bytes = s.bytes.eval(sizes).map_err(|e| format!("{field}: {e}"))?;
    if bytes < 0 {
        return Err(format!("{field} = {bytes}: negative"));
    }
    if bytes as u64 > available as u64 {
        return Err(format!(
            "{field} = {bytes}: more than the {available} bytes of device memory free"
        ));
    }
    Ok(bytes as usize)
}

fn manifest_name(cand: &Candidate) -> String {
    if cand.origin == "reference" {
        format!("reference plan of {}", cand.problem)
    } else {
        format!("{}/candidate.toml", cand.origin)
    }
}

/// Runs a bound plan on the backend's stream (no synchronisation).
pub fn run(
    backend: &mut dyn Backend,
    module: ModuleId,
    plan: &[Launch],
) -> crate::backend::BackendResult<()> {
    for l in plan {
        backend.launch(module, l)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::emu::EmuBackend;
    use crate::candidate::reference_candidate;
    use bench_problems::{find_problem, Preset};

    #[test]
    fn plan_constants_match_the_kernels() {
        // bench-problems writes launch plans without depending on gpu-kernels; the tile sizes
        // it assumes must be the kernels' own.
        use bench_problems::problems::sparse;
        use gpu_kernels::kernels::{radix_sort, scan};
        assert_eq!(sparse::SORT_TILE as usize, radix_sort::SORT_TILE);
        assert_eq!(
            sparse::HIST_MAX_BLOCKS as usize,
            radix_sort::HIST_MAX_BLOCKS
        );
        assert_eq!(sparse::SCAN_TILE as usize, scan::SCAN_TILE);
    }

    fn setup() -> (EmuBackend, Candidate, Sizes, Buffers) {
        let mut be = EmuBackend::new();
        let p = find_problem("embedding_bag_sum").unwrap();
        let mut sizes = p.sizes(Preset::Ci);
        sizes.insert("N".into(), 10);
        let mut bufs = Buffers::new();
        for t in p.tensors() {
            bufs.insert(t.name.into(), be.alloc(64).unwrap());
        }
        for s in p.reference_scratch() {
            bufs.insert(s.name, be.alloc(64).unwrap());
        }
        (be, reference_candidate(p), sizes, bufs)
    }

    #[test]
    fn binds_the_reference_plan() {
        let (mut be, cand, sizes, bufs) = setup();
        let m = be.load_module(&cand.source).unwrap();
        let plan = bind(&cand, &sizes, &BTreeMap::new(), &bufs, &mut be, m).unwrap();
        assert_eq!(plan[0].grid, [16, 1, 1]); // B = 64 bags × 2 column chunks (D = 40) / 8
        assert_eq!(plan[0].block, [32, 8, 1]);
        assert_eq!(plan[0].args[6], 64, "B");
        assert_eq!(plan[0].args[2], be.address(&bufs["weight"]));
        assert_eq!(
            plan[0].args[9],
            u64::MAX,
            "padding_idx = -1 as an 8-byte parameter"
        );
    }

    #[test]
    fn refuses_bad_launches_naming_the_field() {
        let (mut be, cand, sizes, bufs) = setup();
        let m = be.load_module(&cand.source).unwrap();
        let mut bad = cand.clone();
        bad.launches[0].grid[0] = Dim::Expr("B - B".into());
        assert!(bind(&bad, &sizes, &BTreeMap::new(), &bufs, &mut be, m)
            .unwrap_err()
            .contains("launch[0].grid[0] = 0"));
        let mut bad = cand.clone();
        bad.launches[0].block = [Dim::Number(64), Dim::Number(32), Dim::Number(1)];
        assert!(bind(&bad, &sizes, &BTreeMap::new(), &bufs, &mut be, m)
            .unwrap_err()
            .contains("threads per block"));
        let mut bad = cand.clone();
        bad.launches[0].shared_bytes = Dim::Number(1 << 30);
        assert!(bind(&bad, &sizes, &BTreeMap::new(), &bufs, &mut be, m)
            .unwrap_err()
            .contains("shared_bytes"));
        let mut bad = cand.clone();
        bad.launches[0].args.pop();
        assert!(bind(&bad, &sizes, &BTreeMap::new(), &bufs, &mut be, m)
            .unwrap_err()
            .contains("takes 11 parameters"));
        let mut bad = cand.clone();
        bad.launches[0].kernel = "nope".into();
        assert!(bind(&bad, &sizes, &BTreeMap::new(), &bufs, &mut be, m)
            .unwrap_err()
            .contains("launch[0].kernel"));
    }
}
