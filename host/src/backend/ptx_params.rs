//! Reads a kernel's parameter list (byte size of each parameter) from PTX text, so a launch's
//! argument list can be checked against it before anything runs.

/// Byte sizes of the parameters of `.entry kernel(...)`, or `None` if the PTX has no such entry.
/// The names of the `.entry` kernels of `ptx`, in order.
pub fn entry_names(ptx: &str) -> Vec<&str> {
    ptx.split(".entry")
        .skip(1)
        .filter_map(|rest| {
            let rest = rest.trim_start();
            let n = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
                .unwrap_or(rest.len());
            (n > 0).then(|| &rest[..n])
        })
        .collect()
}

/// Why `kernel` is not in a module whose kernels are `names`: the names it has, so a typo shows.
pub fn no_such_kernel(kernel: &str, names: &[&str]) -> String {
    if names.is_empty() {
        format!("no kernel `{kernel}` in the module (it has no kernel entry at all)")
    } else {
        format!(
            "no kernel `{kernel}` in the module; its kernels: {}",
            names
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

pub fn entry_params(ptx: &str, kernel: &str) -> Option<Vec<usize>> {
    let mut search = ptx;
    loop {
        let at = search.find(".entry")?;
        let rest = search[at + ".entry".len()..].trim_start();
        let name_len = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
            .unwrap_or(rest.len());
        let name = &rest[..name_len];
        let after_name = rest[name_len..].trim_start();
        if name == kernel {
            if !after_name.starts_with('(') {
                return Some(Vec::new());
            }
            let close = after_name.find(')')?;
            return Some(
                after_name[1..close]
                    .split(',')
                    .map(str::trim)
                    .filter(|p| !p.is_empty())
                    .map(param_size)
                    .collect(),
            );
        }
        search = rest;
    }
}

/// `.param .u64 .ptr .align 1 name` → 8; `.param .align 8 .b8 name[16]` → 16.
fn param_size(decl: &str) -> usize {
    if let (Some(open), Some(close)) = (decl.rfind('['), decl.rfind(']')) {
        if let Ok(n) = decl[open + 1..close].trim().parse::<usize>() {
            return n;
        }
    }
    for tok in decl.split_whitespace() {
        let t = tok.trim_start_matches('.');
        if let Some(bits) = t
            .strip_prefix(['u', 's', 'b', 'f'])
            .and_then(|b| b.parse::<usize>().ok())
        {
            return bits / 8;
        }
    }
    8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_kernel_is_told_with_the_module_s_kernels() {
        let ptx = ".visible .entry alpha(\n.param .u64 a\n)\n{}\n.entry beta_2()\n{}";
        assert_eq!(entry_names(ptx), ["alpha", "beta_2"]);
        assert_eq!(
            no_such_kernel("alpah", &entry_names(ptx)),
            "no kernel `alpah` in the module; its kernels: `alpha`, `beta_2`"
        );
        assert!(no_such_kernel("x", &[]).contains("no kernel entry at all"));
    }

    const PTX: &str = r#"
.visible .entry other(
	.param .u32 other_param_0
)
.visible .entry ebs(
	.param .u64 .ptr .align 1 ebs_param_0,
	.param .u32 ebs_param_1,
	.param .f32 ebs_param_2,
	.param .align 8 .b8 ebs_param_3[16],
	.param .s64 ebs_param_4
)
{
}
.visible .entry noargs()
{ }
"#;

    #[test]
    fn reads_parameter_sizes() {
        assert_eq!(entry_params(PTX, "ebs"), Some(vec![8, 4, 4, 16, 8]));
        assert_eq!(entry_params(PTX, "other"), Some(vec![4]));
        assert_eq!(entry_params(PTX, "noargs"), Some(vec![]));
        assert_eq!(entry_params(PTX, "missing"), None);
    }

    #[test]
    fn embedded_ptx_and_emulator_agree_on_every_signature() {
        let p = entry_params(
            crate::toolchain::ptx::GPU_KERNELS_PTX,
            "embedding_bag_sum_reference",
        )
        .unwrap();
        assert_eq!(p, vec![8; 11]);
        for k in gpu_kernels::emu_kernels() {
            let ptx = entry_params(crate::toolchain::ptx::GPU_KERNELS_PTX, k.name)
                .unwrap_or_else(|| panic!("{} is missing from the PTX", k.name));
            assert_eq!(k.param_sizes, &ptx[..], "{}", k.name);
        }
    }
}
