//! Applies the `launch_bounds!` markers of gpu-kernels to its PTX: each marker comment
//! `// dlrm-bench launch_bounds NAME THREADS MIN_BLOCKS` becomes `.maxntid THREADS, 1, 1` and
//! `.minnctapersm MIN_BLOCKS` on the entry `NAME` (what CUDA C++'s `__launch_bounds__` emits).
//! Used by the build script (`#[path]`) and tested here.

/// The PTX with the directives inserted, or what is wrong with a marker.
pub(crate) fn apply_launch_bounds(ptx: &str) -> Result<String, String> {
    let mut out = ptx.to_string();
    for line in ptx.lines() {
        let Some(rest) = line.trim().strip_prefix("// dlrm-bench launch_bounds ") else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let [name, threads, blocks] = fields[..] else {
            return Err(format!("malformed launch_bounds marker `{}`", line.trim()));
        };
        let parse = |v: &str| {
            v.parse::<u32>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("launch_bounds of {name}: `{v}` is not a positive count"))
        };
        let (threads, blocks) = (parse(threads)?, parse(blocks)?);
        let entry = format!(".entry {name}(");
        let at = out
            .find(&entry)
            .ok_or_else(|| format!("launch_bounds names `{name}`, which has no PTX entry"))?;
        // The body starts at the first line that is just `{` after the parameter list.
        let body = out[at..]
            .find("\n{")
            .map(|i| at + i)
            .ok_or_else(|| format!("no body after the entry of {name}"))?;
        let directives = format!("\n.maxntid {threads}, 1, 1\n.minnctapersm {blocks}");
        if out[at..body].contains(".maxntid") {
            // Applied already (a PTX file this function wrote), but only with these values.
            if !out[at..body].ends_with(&directives) {
                return Err(format!("{name} has two different launch bounds"));
            }
            continue;
        }
        out.insert_str(body, &directives);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &str = "\
.visible .entry a_kernel(
\t.param .u64 a_kernel_param_0
)                                       // @a_kernel
{
\tret;
}
.visible .entry b_kernel(
\t.param .u64 b_kernel_param_0
)
{
\tret;
}
// dlrm-bench launch_bounds b_kernel 256 3
";

    #[test]
    fn directives_go_on_the_named_entry_only() {
        let out = apply_launch_bounds(PTX).unwrap();
        let b = out.find(".entry b_kernel(").unwrap();
        let body = b + out[b..].find("\n{").unwrap();
        assert_eq!(
            &out[b..body],
            ".entry b_kernel(\n\t.param .u64 b_kernel_param_0\n)\n.maxntid 256, 1, 1\n.minnctapersm 3"
        );
        assert_eq!(out.matches(".maxntid").count(), 1);
        assert!(
            out.starts_with(&PTX[..PTX.find("{").unwrap()]),
            "a_kernel untouched"
        );
        assert_eq!(apply_launch_bounds("no markers").unwrap(), "no markers");
        assert_eq!(apply_launch_bounds(&out).unwrap(), out, "idempotent");
    }

    #[test]
    fn bad_markers_are_named() {
        let missing = format!("{PTX}// dlrm-bench launch_bounds c_kernel 128 2\n");
        assert!(apply_launch_bounds(&missing)
            .unwrap_err()
            .contains("`c_kernel`, which has no PTX entry"));
        let zero = PTX.replace("256 3", "256 0");
        assert!(apply_launch_bounds(&zero).unwrap_err().contains("`0`"));
        let other = format!("{PTX}// dlrm-bench launch_bounds b_kernel 128 3\n");
        assert!(apply_launch_bounds(&other)
            .unwrap_err()
            .contains("b_kernel has two different launch bounds"));
        let short = PTX.replace("256 3", "256");
        assert!(apply_launch_bounds(&short)
            .unwrap_err()
            .contains("malformed"));
    }
}
