//! NVIDIA's PTX assembler without a GPU: where a `ptxas` is, and what `ptxas -v` says of each
//! kernel of a module (registers, stack frame, spills). `dlrm-bench check` prints it beside
//! each launch when a ptxas is found; `host/tests/ptxas_resources.rs` holds the tuned kernels
//! to no local memory.
//!
//! A ptxas is looked for at `DLRM_BENCH_PTXAS`, then beside each libnvrtc on
//! `LD_LIBRARY_PATH` (`lib/../bin/ptxas`: the layout of NVIDIA's cu13 wheels, where `.ci/run`
//! unpacks `nvidia-cuda-nvcc` next to `nvidia-cuda-nvrtc`), then in `$CUDA_HOME/bin`,
//! `/usr/local/cuda/bin` and on `PATH`; the first that runs is used.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What ptxas reports for one entry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    pub registers: u32,
    pub stack_bytes: u32,
    pub spill_stores: u32,
    pub spill_loads: u32,
}

/// Each entry's resources, by name.
pub(crate) type ModuleResources = BTreeMap<String, Resources>;

impl Resources {
    /// Spills, or a stack frame (an array indexed at run time): local memory, slow.
    pub fn uses_local_memory(&self) -> bool {
        self.stack_bytes > 0 || self.spill_stores > 0 || self.spill_loads > 0
    }
}

/// The places a ptxas is looked for, in order, `extra` first.
pub(crate) fn search_paths(extra: &[PathBuf]) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = extra.to_vec();
    if let Some(p) = std::env::var_os("DLRM_BENCH_PTXAS") {
        paths.push(PathBuf::from(p));
    }
    paths.extend(beside_nvrtc(std::env::var_os("LD_LIBRARY_PATH").as_deref()));
    if let Some(home) = std::env::var_os("CUDA_HOME") {
        paths.push(Path::new(&home).join("bin/ptxas"));
    }
    paths.push(PathBuf::from("/usr/local/cuda/bin/ptxas"));
    paths.push(PathBuf::from("ptxas"));
    paths
}

/// `DIR/../bin/ptxas` for each directory `DIR` of `ld_library_path` that holds a libnvrtc.
fn beside_nvrtc(ld_library_path: Option<&std::ffi::OsStr>) -> Vec<PathBuf> {
    let Some(dirs) = ld_library_path else {
        return Vec::new();
    };
    std::env::split_paths(dirs)
        .filter(|dir| {
            std::fs::read_dir(dir).is_ok_and(|entries| {
                entries
                    .flatten()
                    .any(|e| e.file_name().to_string_lossy().starts_with("libnvrtc.so"))
            })
        })
        .map(|dir| dir.join("../bin/ptxas"))
        .collect()
}

/// The first ptxas of [`search_paths`] that runs (`ptxas --version`).
pub fn find(extra: &[PathBuf]) -> Option<PathBuf> {
    search_paths(extra).into_iter().find(|p| {
        Command::new(p)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// The architecture to assemble `ptx` for: `sm_90a` when the module targets it (its
/// Hopper-only instructions need it), else `sm_90`, the H100/H200 the suite runs on.
pub(crate) fn arch_for(ptx: &str) -> &'static str {
    let target = ptx
        .lines()
        .find_map(|l| l.trim().strip_prefix(".target "))
        .unwrap_or_default();
    if target.split(',').any(|t| t.trim() == "sm_90a") {
        "sm_90a"
    } else {
        "sm_90"
    }
}

/// Assembles `ptx` with `ptxas -v` for [`arch_for`]: each entry's resources, or ptxas's log
/// when it rejects the module.
pub fn assemble(ptxas: &Path, ptx: &str) -> Result<ModuleResources, String> {
    let dir = std::env::temp_dir().join(format!(
        "dlrm-bench-ptxas-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let input = dir.join("module.ptx");
    let result = std::fs::write(&input, ptx)
        .map_err(|e| format!("{}: {e}", input.display()))
        .and_then(|()| {
            Command::new(ptxas)
                .arg(format!("-arch={}", arch_for(ptx)))
                .args(["-v", "-o"])
                .arg(dir.join("module.cubin"))
                .arg(&input)
                .output()
                .map_err(|e| format!("{}: {e}", ptxas.display()))
        });
    let _ = std::fs::remove_dir_all(&dir);
    let output = result?;
    let log = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        return Err(format!("{} rejected the module:\n{log}", ptxas.display()));
    }
    Ok(parse_log(&log))
}

/// The number just before `unit` in `line` (`"24 bytes spill stores"` → 24 for
/// `"bytes spill stores"`).
fn count_before(line: &str, unit: &str) -> Option<u32> {
    let head = &line[..line.find(unit)?];
    head.split_whitespace().last()?.parse().ok()
}

/// Per entry, from `ptxas -v`'s log: "Compiling entry function 'NAME'" opens an entry; its
/// "N bytes stack frame, N bytes spill stores, N bytes spill loads" and "Used N registers"
/// lines follow.
pub(crate) fn parse_log(log: &str) -> ModuleResources {
    let mut out = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in log.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let name = rest.split('\'').next().unwrap_or_default().to_string();
            out.insert(name.clone(), Resources::default());
            current = Some(name);
            continue;
        }
        let Some(r) = current.as_ref().and_then(|n| out.get_mut(n)) else {
            continue;
        };
        if let Some(n) = count_before(line, "bytes stack frame") {
            r.stack_bytes = n;
            r.spill_stores = count_before(line, "bytes spill stores").unwrap_or(0);
            r.spill_loads = count_before(line, "bytes spill loads").unwrap_or(0);
        }
        if let Some(n) = count_before(line, "registers") {
            r.registers = n;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_parser_reads_ptxas_lines() {
        let log = "\
ptxas info    : Compiling entry function 'a_kernel' for 'sm_90'
ptxas info    : Function properties for a_kernel
    24 bytes stack frame, 16 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 80 registers, used 1 barriers, 4096 bytes smem
ptxas info    : Compiling entry function 'b_kernel' for 'sm_90'
ptxas info    : Function properties for b_kernel
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 17 registers, used 0 barriers
";
        let parsed = parse_log(log);
        assert_eq!(
            parsed["a_kernel"],
            Resources {
                registers: 80,
                stack_bytes: 24,
                spill_stores: 16,
                spill_loads: 8
            }
        );
        assert!(parsed["a_kernel"].uses_local_memory());
        assert_eq!(parsed["b_kernel"].registers, 17);
        assert!(!parsed["b_kernel"].uses_local_memory());
        assert_eq!(parsed.len(), 2);
    }

    #[test]
    fn sm_90a_modules_assemble_for_sm_90a_and_the_rest_for_sm_90() {
        assert_eq!(arch_for(".version 8.0\n.target sm_90a\n"), "sm_90a");
        assert_eq!(arch_for(".version 8.0\n.target sm_80\n"), "sm_90");
        assert_eq!(arch_for(".version 8.0\n.target sm_90, debug\n"), "sm_90");
        assert_eq!(arch_for("no target line"), "sm_90");
    }

    #[test]
    fn a_libnvrtc_directory_points_at_the_ptxas_beside_it() {
        let dir =
            std::env::temp_dir().join(format!("dlrm-bench-ptxas-paths-{}", std::process::id()));
        let (lib, other) = (dir.join("nvidia/cu13/lib"), dir.join("other"));
        std::fs::create_dir_all(&lib).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(lib.join("libnvrtc.so.13"), b"").unwrap();
        let joined = std::env::join_paths([&other, &lib]).unwrap();
        let paths = beside_nvrtc(Some(&joined));
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(paths, vec![lib.join("../bin/ptxas")]);
        assert!(beside_nvrtc(None).is_empty());
    }
}
