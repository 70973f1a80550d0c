//! Binds a launch plan to numbers: evaluates grid, block and shared-memory expressions over the
//! sizes, turns each argument into a device address or an integer of the parameter's width, and
//! refuses launches the device could not run — each error naming the plan's file and field.
use crate::backend::{Backend, Buffer, Launch, ModuleId};
use crate::candidate::Candidate;
use bench_problems::expr::Number;
use bench_problems::{Dim, Sizes};
use std::collections::BTreeMap;

/// Named device buffers a plan may take as arguments (tensors and scratch).
pub type Buffers = BTreeMap<String, Buffer>;

/// Resolves every launch of `cand` for `sizes`.
pub fn bind(
    cand: &Candidate,
    sizes: &Sizes,
    scalars: &BTreeMap<String, f64>,
    buffers: &Buffers,
    backend: &mut dyn Backend,
    module: ModuleId,
) -> Result<Vec<Launch>, String> {
    let info = backend.info().clone();
    let mut out = Vec::with_capacity(cand.launches.len());
    for (i, l) in cand.launches.iter().enumerate() {
        let field = |f: &str| format!("{}: launch[{i}].{f}", manifest_name(cand));
        let eval = |d: &Dim, f: &str| d.eval(sizes).map_err(|e| format!("{}: {e}", field(f)));
        let mut grid = [0u32; 3];
        let mut block = [0u32; 3];
        for axis in 0..3 {
            let limit = if axis == 0 { (1i64 << 31) - 1 } else { 65535 };
            let g = eval(&l.grid[axis], &format!("grid[{axis}]"))?;
            if g < 1 || g > limit {
                return Err(format!(
                    "{} = {g}: must be in 1..={limit}",
                    field(&format!("grid[{axis}]"))
                ));
            }
            grid[axis] = g as u32;
            let b = eval(&l.block[axis], &format!("block[{axis}]"))?;
            if b < 1 || b > info.max_threads_per_block as i64 {
                return Err(format!(
                    "{} = {b}: must be in 1..={}",
                    field(&format!("block[{axis}]")),
                    info.max_threads_per_block
                ));
            }
            block[axis] = b as u32;
        }
        let threads: u64 = block.iter().map(|&b| b as u64).product();
        if threads > info.max_threads_per_block as u64 {
            return Err(format!(
                "{}: {threads} threads per block, the device allows {}",
                field("block"),
                info.max_threads_per_block
            ));
        }
        let shared = eval(&l.shared_bytes, "shared_bytes")?;
        if shared < 0 || shared as usize > info.max_shared_bytes_per_block {
            return Err(format!(
                "{} = {shared}: the device allows 0..={} bytes",
                field("shared_bytes"),
                info.max_shared_bytes_per_block
            ));
        }
        let params = backend
            .kernel_params(module, &l.kernel)
            .map_err(|e| format!("{}: {e}", field("kernel")))?;
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
            if let Some(buf) = buffers.get(arg) {
                if width != 8 {
                    return Err(format!(
                        "{f}: `{arg}` is a pointer but parameter {j} is {width} bytes"
                    ));
                }
                args.push(backend.address(buf));
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
            .contains("takes 10 parameters"));
        let mut bad = cand.clone();
        bad.launches[0].kernel = "nope".into();
        assert!(bind(&bad, &sizes, &BTreeMap::new(), &bufs, &mut be, m)
            .unwrap_err()
            .contains("launch[0].kernel"));
    }
}
