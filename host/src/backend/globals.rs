//! A candidate module's writable globals: the `.global` variables its PTX or cubin defines,
//! found by name so that the CUDA backend can snapshot them when the module loads and put them
//! back after every execution ([`super::Backend::restore_module_globals`]). State a kernel keeps
//! in a `__device__` array (a launch counter, a memo of earlier answers) then never reaches a
//! later run. Module global memory past [`LIMIT_BYTES`] is refused: a plan that needs that much
//! device memory declares it as `[[scratch]]`, which is poisoned before every run.
//!
//! PTX is read at module scope only (outside every `{}` body and `()` parameter list, comments
//! and strings skipped); a definition without `.visible` is made visible before the driver loads
//! it ([`make_visible`]), so `cuModuleGetGlobal` finds a `static __device__` variable too. A
//! cubin's globals are the symbols of its `.nv.global*` sections.

/// Module global memory a candidate may define, in bytes (16 MiB).
pub const LIMIT_BYTES: usize = 16 << 20;

/// One module-scope `.global` definition of a PTX text: its name and where its directive
/// starts (the byte offset of `.global`), and whether it is already visible or weak.
#[derive(Clone, Debug, PartialEq, Eq)]
struct PtxGlobal {
    name: String,
    at: usize,
    linkage_given: bool,
}

/// The module-scope text of `ptx` as (byte offset, byte) pairs' mask: `true` where a byte is
/// at module scope (not in a comment, a string, a `{}` body or a `()` list).
fn module_scope(ptx: &[u8]) -> Vec<bool> {
    let mut scope = vec![false; ptx.len()];
    let (mut depth, mut i) = (0usize, 0usize);
    while i < ptx.len() {
        match (ptx[i], ptx.get(i + 1)) {
            (b'/', Some(b'/')) => {
                while i < ptx.len() && ptx[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            (b'/', Some(b'*')) => {
                i += 2;
                while i + 1 < ptx.len() && !(ptx[i] == b'*' && ptx[i + 1] == b'/') {
                    i += 1;
                }
                i += 2;
                continue;
            }
            (b'"', _) => {
                i += 1;
                while i < ptx.len() && ptx[i] != b'"' {
                    i += 1;
                }
            }
            (b'{' | b'(', _) => depth += 1,
            (b'}' | b')', _) => depth = depth.saturating_sub(1),
            _ => scope[i] = depth == 0,
        }
        i += 1;
    }
    scope
}

/// The module-scope `.global` definitions of `ptx` (declarations with `.extern` and texture,
/// sampler and surface references left out).
fn ptx_definitions(ptx: &str) -> Vec<PtxGlobal> {
    let bytes = ptx.as_bytes();
    let scope = module_scope(bytes);
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(k) = ptx[from..].find(".global") {
        let at = from + k;
        from = at + 7;
        let boundary_before = at == 0 || bytes[at - 1].is_ascii_whitespace();
        let boundary_after = bytes.get(at + 7).is_none_or(|b| b.is_ascii_whitespace());
        if !(scope[at] && boundary_before && boundary_after) {
            continue;
        }
        // The directive: from the end of the previous statement to the next `;`.
        let start = ptx[..at]
            .rfind([';', '}'])
            .map_or(0, |p| p + 1)
            .max(ptx[..at].rfind('\n').map_or(0, |p| p + 1));
        let Some(end) = ptx[at..].find(';').map(|e| at + e) else {
            continue;
        };
        let before: Vec<&str> = ptx[start..at].split_whitespace().collect();
        let decl = ptx[at..end].split('=').next().unwrap_or_default();
        if before.contains(&".extern")
            || [".texref", ".samplerref", ".surfref"]
                .iter()
                .any(|t| decl.contains(t))
        {
            continue;
        }
        let decl = decl.split('[').next().unwrap_or_default();
        let name = decl
            .split_whitespace()
            .rfind(|t| !t.starts_with('.') && !t.starts_with(|c: char| c.is_ascii_digit()));
        if let Some(name) = name {
            found.push(PtxGlobal {
                name: name.to_string(),
                at,
                linkage_given: before.iter().any(|t| matches!(*t, ".visible" | ".weak")),
            });
        }
    }
    found
}

/// The names of the module-scope `.global` variables `ptx` defines, in order.
pub fn ptx_globals(ptx: &str) -> Vec<String> {
    ptx_definitions(ptx).into_iter().map(|g| g.name).collect()
}

/// `ptx` with `.visible` put before every module-scope `.global` definition that has neither
/// `.visible` nor `.weak`, so the driver can find each by name.
pub fn make_visible(ptx: &str) -> String {
    let mut out = String::with_capacity(ptx.len() + 64);
    let mut copied = 0;
    for g in ptx_definitions(ptx)
        .into_iter()
        .filter(|g| !g.linkage_given)
    {
        out.push_str(&ptx[copied..g.at]);
        out.push_str(".visible ");
        copied = g.at;
    }
    out.push_str(&ptx[copied..]);
    out
}

/// The names of the objects a cubin (an ELF image) defines in its `.nv.global` sections
/// (`.nv.global` for zero-initialised variables, `.nv.global.init` for the others).
pub fn elf_globals(image: &[u8]) -> Result<Vec<String>, String> {
    use object::{Object, ObjectSection, ObjectSymbol, SymbolSection};
    let file = object::File::parse(image).map_err(|e| format!("not a readable ELF image: {e}"))?;
    let mut names = Vec::new();
    for sym in file.symbols() {
        let SymbolSection::Section(index) = sym.section() else {
            continue;
        };
        let Ok(section) = file.section_by_index(index) else {
            continue;
        };
        let in_global = section
            .name()
            .is_ok_and(|n| n == ".nv.global" || n.starts_with(".nv.global."));
        if in_global && sym.kind() == object::SymbolKind::Data {
            if let Ok(name) = sym.name() {
                names.push(name.to_string());
            }
        }
    }
    Ok(names)
}

/// The cubins embedded in a fatbin: every offset where an ELF header starts that parses.
pub fn embedded_elfs(image: &[u8]) -> Vec<&[u8]> {
    let magic = b"\x7fELF";
    (0..image.len().saturating_sub(magic.len()))
        .filter(|&i| &image[i..i + 4] == magic)
        .map(|i| &image[i..])
        .filter(|elf| object::File::parse(*elf).is_ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &str = r#"
//
// Generated by NVIDIA NVVM Compiler
.version 8.5
.target sm_90
.address_size 64

	// .globl	k
.global .align 4 .u32 counter;
.global .align 4 .b8 memo[4194304];
.visible .global .align 8 .u64 seen = 5;
.weak .global .align 1 .b8 w[2];
.extern .global .align 4 .b8 elsewhere[];
.global .align 1 .b8 $str[6] = {104, 101, 108, 108, 111, 0};
.global .texref tex;
/* .global .u32 in_a_comment; */
// .global .u32 in_a_line_comment;

.visible .entry k(
	.param .u64 .ptr .global .align 4 k_param_0
)
{
	.reg .b32 	%r<3>;
	ld.global.u32 	%r1, [counter];
	st.global.u32 	[counter], %r1;
	ret;
}
"#;

    #[test]
    fn module_scope_global_definitions_are_found_and_nothing_else() {
        assert_eq!(
            ptx_globals(PTX),
            vec!["counter", "memo", "seen", "w", "$str"],
            "no extern, texref, comment, parameter or instruction"
        );
        assert!(
            ptx_globals(".version 8.0\n.target sm_80\n.visible .entry k() { ret; }").is_empty()
        );
    }

    #[test]
    fn definitions_without_linkage_are_made_visible_and_nothing_else_changes() {
        let out = make_visible(PTX);
        assert!(out.contains(".visible .global .align 4 .u32 counter;"));
        assert!(out.contains(".visible .global .align 4 .b8 memo[4194304];"));
        assert!(
            out.contains("\n.visible .global .align 8 .u64 seen = 5;"),
            "not twice"
        );
        assert!(out.contains("\n.weak .global .align 1 .b8 w[2];"));
        assert!(out.contains("\n.extern .global .align 4 .b8 elsewhere[];"));
        assert!(out.contains(".visible .global .align 1 .b8 $str[6]"));
        assert!(out.contains("ld.global.u32"));
        assert_eq!(
            out.matches(".visible").count(),
            PTX.matches(".visible").count() + 3
        );
        assert_eq!(ptx_globals(&out), ptx_globals(PTX), "idempotent names");
        assert_eq!(make_visible(&out), out, "idempotent");
    }

    #[test]
    fn a_non_elf_image_is_an_error_and_no_elf_is_found_in_noise() {
        assert!(elf_globals(b"not an elf").is_err());
        assert!(embedded_elfs(b"\x7fELF but not a header").is_empty());
    }
}
