//! A candidate module's writable globals: the `.global` variables its PTX or cubin defines,
//! found by name so that the CUDA backend can snapshot them when the module loads and put them
//! back after every execution ([`super::Backend::restore_module_globals`]). State a kernel keeps
//! in a `__device__` array (a launch counter, a memo of earlier answers) then never reaches a
//! later run. Module global memory past [`LIMIT_BYTES`] is refused: a plan that needs that much
//! device memory declares it as `[[scratch]]`, which is poisoned before every run.
//!
//! PTX is read at module scope only (outside every `{}` body and `()` parameter list, comments
//! and strings read as blanks, as PTX reads them; every declarator of a list); a definition without `.visible` is made visible before the driver loads
//! it ([`make_visible`]), so `cuModuleGetGlobal` finds a `static __device__` variable too. A
//! cubin's globals are the symbols of its `.nv.global*` sections.

/// Module global memory a candidate may define, in bytes (16 MiB).
pub(crate) const LIMIT_BYTES: usize = 16 << 20;

/// One module-scope `.global` directive of a PTX text: the names it defines, where it starts
/// (the byte offset of `.global`), and whether its linkage is already given (`.visible`,
/// `.weak`, `.common`).
#[derive(Clone, Debug, PartialEq, Eq)]
struct PtxGlobal {
    names: Vec<String>,
    at: usize,
    linkage_given: bool,
}

/// `ptx` with every comment and string replaced by spaces (byte for byte, so offsets stay), and
/// a mask of the bytes at module scope (outside every `{}` body and `()` list). PTX reads a
/// comment as whitespace, so `/**/.global` is a directive like ` .global`.
fn clean(ptx: &[u8]) -> (Vec<u8>, Vec<bool>) {
    let mut text = ptx.to_vec();
    let mut scope = vec![false; ptx.len()];
    let (mut depth, mut i) = (0usize, 0usize);
    let blank = |text: &mut Vec<u8>, from: usize, to: usize| {
        for b in &mut text[from..to.min(ptx.len())] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    };
    while i < ptx.len() {
        let end = match (ptx[i], ptx.get(i + 1)) {
            (b'/', Some(b'/')) => ptx[i..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(ptx.len(), |e| i + e),
            (b'/', Some(b'*')) => ptx[i + 2..]
                .windows(2)
                .position(|w| w == b"*/")
                .map_or(ptx.len(), |e| i + 2 + e + 2),
            (b'"', _) => ptx[i + 1..]
                .iter()
                .position(|&b| b == b'"')
                .map_or(ptx.len(), |e| i + 1 + e + 1),
            (b, _) => {
                match b {
                    b'{' | b'(' => depth += 1,
                    b'}' | b')' => depth = depth.saturating_sub(1),
                    _ => scope[i] = depth == 0,
                }
                i += 1;
                continue;
            }
        };
        blank(&mut text, i, end);
        scope[i..end.min(ptx.len())].fill(depth == 0);
        i = end;
    }
    (text, scope)
}

/// The names one `.global` directive's text defines (from `.global` to its `;`): each
/// comma-separated declarator outside an initializer's braces, its array suffix and initializer
/// dropped (`.global .u32 a, b[4] = {1, 2, 3, 4}, c;` defines a, b and c).
fn declared_names(directive: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let (mut depth, mut from) = (0usize, 0usize);
    for (k, c) in directive.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&directive[from..k]);
                from = k + 1;
            }
            _ => {}
        }
    }
    parts.push(&directive[from..]);
    parts
        .into_iter()
        .filter_map(|part| {
            let part = part.split('=').next().unwrap_or_default();
            let part = part.split('[').next().unwrap_or_default();
            part.split_whitespace()
                .rfind(|t| !t.starts_with('.') && !t.starts_with(|c: char| c.is_ascii_digit()))
                .map(str::to_string)
        })
        .collect()
}

/// The module-scope `.global` directives of `ptx` (declarations with `.extern` and texture,
/// sampler and surface references left out).
fn ptx_definitions(ptx: &str) -> Vec<PtxGlobal> {
    let (text, scope) = clean(ptx.as_bytes());
    let text = String::from_utf8_lossy(&text).into_owned();
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(k) = text[from..].find(".global") {
        let at = from + k;
        from = at + 7;
        let separated = |b: u8| b.is_ascii_whitespace() || matches!(b, b';' | b'}' | b')');
        let boundary_before = at == 0 || separated(bytes[at - 1]);
        let boundary_after = bytes
            .get(at + 7)
            .is_none_or(|&b| b.is_ascii_whitespace() || b == b'.');
        if !(scope[at] && boundary_before && boundary_after) {
            continue;
        }
        // The directive: from the end of the previous statement to the next `;`.
        let start = text[..at].rfind([';', '}']).map_or(0, |p| p + 1);
        let Some(end) = text[at..].find(';').map(|e| at + e) else {
            continue;
        };
        let before: Vec<&str> = text[start..at].split_whitespace().collect();
        let decl = &text[at + 7..end];
        if before.contains(&".extern")
            || [".texref", ".samplerref", ".surfref"]
                .iter()
                .any(|t| decl.contains(t))
        {
            continue;
        }
        let names = declared_names(decl);
        if !names.is_empty() {
            found.push(PtxGlobal {
                names,
                at,
                linkage_given: before
                    .iter()
                    .any(|t| matches!(*t, ".visible" | ".weak" | ".common")),
            });
        }
    }
    found
}

/// The names of `.global` variables `ptx` declares inside a function body (outside every `()`
/// list there). ptxas takes them, but gives each a local name (`$__name__N`) the driver cannot
/// look up, so they could not be reset between runs: the CUDA backend refuses them.
pub fn body_globals(ptx: &str) -> Vec<String> {
    let (text, _) = clean(ptx.as_bytes());
    let text = String::from_utf8_lossy(&text).into_owned();
    let bytes = text.as_bytes();
    let (mut braces, mut parens) = (0usize, 0usize);
    let mut found = Vec::new();
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'{' => braces += 1,
            b'}' => braces = braces.saturating_sub(1),
            b'(' => parens += 1,
            b')' => parens = parens.saturating_sub(1),
            b'.' if braces > 0 && parens == 0 && bytes[i..].starts_with(b".global") => {
                let before = i == 0
                    || bytes[i - 1].is_ascii_whitespace()
                    || matches!(bytes[i - 1], b';' | b'{' | b'}' | b':');
                let after = bytes
                    .get(i + 7)
                    .is_none_or(|&c| c.is_ascii_whitespace() || c == b'.');
                if before && after {
                    let end = text[i..].find(';').map_or(text.len(), |e| i + e);
                    found.extend(declared_names(&text[i + 7..end]));
                }
            }
            _ => {}
        }
    }
    found
}

/// The names of the module-scope `.global` variables `ptx` defines, in order.
pub fn ptx_globals(ptx: &str) -> Vec<String> {
    ptx_definitions(ptx)
        .into_iter()
        .flat_map(|g| g.names)
        .collect()
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
/// (`.nv.global` for zero-initialised variables, `.nv.global.init` for the others). An error
/// when the image is no ELF, or when those sections hold bytes no named object covers (a
/// stripped or untyped symbol's memory could not be found by name, so not reset).
pub fn elf_globals(image: &[u8]) -> Result<Vec<String>, String> {
    use object::{Object, ObjectSection, ObjectSymbol, SymbolSection};
    let file = object::File::parse(image).map_err(|e| format!("not a readable ELF image: {e}"))?;
    let is_global = |n: &str| n == ".nv.global" || n.starts_with(".nv.global.");
    let mut names: Vec<String> = Vec::new();
    // Per section: the (start, end) of every named object in it.
    let mut spans = std::collections::BTreeMap::<usize, Vec<(u64, u64, String)>>::new();
    for sym in file.symbols() {
        let SymbolSection::Section(index) = sym.section() else {
            continue;
        };
        let Ok(section) = file.section_by_index(index) else {
            continue;
        };
        if !section.name().is_ok_and(is_global) {
            continue;
        }
        match (sym.kind(), sym.name()) {
            (object::SymbolKind::Data, Ok(name)) if name.starts_with("$__") => {
                return Err(format!(
                    "its global `{name}` was declared inside a function body, where the driver cannot find it by name to reset it between runs: declare it at module scope (or use [[scratch]])"
                ));
            }
            (object::SymbolKind::Data, Ok(name)) if !name.is_empty() => {
                if names.iter().any(|n| n == name) {
                    return Err(format!("its global `{name}` is named twice"));
                }
                names.push(name.to_string());
                let Some(start) = sym.address().checked_sub(section.address()) else {
                    return Err(format!("its global `{name}` lies before its section"));
                };
                spans.entry(index.0).or_default().push((
                    start,
                    start.saturating_add(sym.size()),
                    name.to_string(),
                ));
            }
            _ => {}
        }
    }
    for section in file.sections() {
        let Ok(name) = section.name() else { continue };
        if is_global(name) {
            let objects = spans.remove(&section.index().0).unwrap_or_default();
            exactly_covered(name, section.size(), objects)?;
        }
    }
    Ok(names)
}

/// Refuses a global section unless its named objects lie side by side, each byte of it in
/// exactly one: bytes no name covers could not be reset, and objects that overlap would let
/// their sizes count twice.
fn exactly_covered(
    section: &str,
    size: u64,
    mut objects: Vec<(u64, u64, String)>,
) -> Result<(), String> {
    objects.sort();
    let mut at = 0u64;
    for (start, end, name) in &objects {
        if *start < at {
            return Err(format!(
                "in its section {section}, `{name}` overlaps the global before it: module global memory must be named once to be reset between runs"
            ));
        }
        if *start > at {
            break;
        }
        at = *end;
    }
    if at != size || objects.last().is_some_and(|(_, end, _)| *end > size) {
        let named: u64 = objects.iter().map(|(s, e, _)| e - s).sum();
        return Err(format!(
            "its section {section} holds {size} bytes, of which named variables cover {named} side by side from its start: module global memory without a name cannot be reset between runs"
        ));
    }
    Ok(())
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
    fn globals_declared_in_function_bodies_are_found_and_nothing_else() {
        assert!(
            body_globals(PTX).is_empty(),
            "module scope, parameters, ld.global"
        );
        let body = r#"
.visible .entry k(.param .u64 .ptr .global .align 4 p)
{
	.reg .b64 %rd<3>;
	{
	.global .align 8 .u64 g_hidden;
	atom.global.add.u64 %rd1, [g_hidden], 1;
	}
	cvta.to.global.u64 %rd2, %rd1;
	L1: .global .u32 after_label, second;
	// .global .u32 in_a_comment;
	{.global/**/.b8 memo[64];}
	call.uni (retval0), f, (param0);
	ret;
}
"#;
        assert_eq!(
            body_globals(body),
            vec!["g_hidden", "after_label", "second", "memo"]
        );
        assert!(ptx_globals(body).is_empty(), "none of them at module scope");
    }

    #[test]
    fn a_section_must_be_covered_once_by_its_names() {
        let o = |s: u64, e: u64, n: &str| (s, e, n.to_string());
        assert!(exactly_covered(".nv.global", 16, vec![o(8, 16, "b"), o(0, 8, "a")]).is_ok());
        assert!(exactly_covered(".nv.global", 0, vec![]).is_ok());
        // Two names over the lower half: their sizes add up to the section, but half is unnamed.
        let alias = exactly_covered(".nv.global", 16, vec![o(0, 8, "a"), o(0, 8, "b")]);
        assert!(alias.unwrap_err().contains("overlaps"));
        let gap = exactly_covered(".nv.global", 16, vec![o(0, 4, "a"), o(8, 16, "b")]);
        assert!(gap.unwrap_err().contains("cover"));
        let short = exactly_covered(".nv.global", 16, vec![o(0, 8, "a")]);
        assert!(short.unwrap_err().contains("cover"));
        let past = exactly_covered(".nv.global", 8, vec![o(0, 16, "a")]);
        assert!(past.is_err());
    }

    #[test]
    fn a_non_elf_image_is_an_error() {
        assert!(elf_globals(b"not an elf").is_err());
    }

    #[test]
    fn comments_lists_and_neighbours_do_not_hide_a_global() {
        let cases = [
            ("/**/.global .u32 memo[8];", vec!["memo"]),
            (
                "a: .visible .global .u32 x;.global .u32 after_semicolon;",
                vec!["x", "after_semicolon"],
            ),
            (
                ".entry k() { ret; }.global .u32 after_brace;",
                vec!["after_brace"],
            ),
            (".global/**/.u32 comment_inside;", vec!["comment_inside"]),
            ("/* .extern */ .global .u32 not_extern;", vec!["not_extern"]),
            (".global .u32 m1, m2;", vec!["m1", "m2"]),
            (".global .u32 i1 = 1, i2;", vec!["i1", "i2"]),
            (".global .u32 arr[2] = {1, 2}, s2;", vec!["arr", "s2"]),
            (".common .global .u32 shared_name;", vec!["shared_name"]),
            ("// .global .u32 only_a_comment;\n", vec![]),
            (".extern .global .u32 elsewhere;", vec![]),
        ];
        for (ptx, want) in cases {
            let want: Vec<String> = want.into_iter().map(String::from).collect();
            assert_eq!(ptx_globals(ptx), want, "{ptx}");
        }
        // No doubled or misplaced linkage.
        assert_eq!(
            make_visible(".visible\n.global .u32 x;"),
            ".visible\n.global .u32 x;"
        );
        assert_eq!(
            make_visible(".common .global .u32 x;"),
            ".common .global .u32 x;"
        );
        assert_eq!(
            make_visible("/**/.global .u32 x;"),
            "/**/.visible .global .u32 x;"
        );
    }
}
