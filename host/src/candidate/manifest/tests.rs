//! Tests of [`super`].
use super::*;

const GOOD: &str = r#"
problem = "embedding_bag_sum"
name = "t"
source = "kernel.cu"
[[scratch]]
name = "tmp"
bytes = 64
[[launch]]
kernel = "k"
grid = ["ceil_div(B * 32, 256)", 1, 1]
block = [256, 1, 1]
args = ["weight", "indices", "offsets", "out", "B", "D"]
"#;

fn error(text: &str) -> String {
    parse(Path::new("dir/candidate.toml"), text)
        .unwrap_err()
        .to_string()
}

#[test]
fn a_good_manifest_parses_and_short_arrays_are_padded() {
    let m = parse(Path::new("x"), GOOD).unwrap();
    assert_eq!(m.launches[0].block, [256.into(), 1.into(), 1.into()]);
    let m = parse(Path::new("x"), &GOOD.replace("[256, 1, 1]", "[256]")).unwrap();
    assert_eq!(m.launches[0].block, [256.into(), 1.into(), 1.into()]);
    assert_eq!(m.scratch[0].bytes, Dim::Number(64));
}

#[test]
fn four_values_in_a_grid_or_block_are_refused() {
    // Issue 13: the fourth value was silently dropped.
    let e = error(&GOOD.replace("[256, 1, 1]", "[256, 1, 1, 7]"));
    assert!(
        e.contains("dir/candidate.toml") && e.contains("launch[0].block") && e.contains("4 values"),
        "{e}"
    );
    let e = error(&GOOD.replace("\"ceil_div(B * 32, 256)\", 1, 1", ""));
    assert!(
        e.contains("launch[0].grid") && e.contains("0 values"),
        "{e}"
    );
    let e = error(&GOOD.replace("[256, 1, 1]", "[256, 1.5, 1]"));
    assert!(
        e.contains("launch[0].block[1]") && e.contains("float"),
        "{e}"
    );
}

#[test]
fn names_that_break_paths_or_tables_are_refused() {
    let cases = [
        (GOOD.replace("name = \"t\"", "name = \"\""), "`name`"),
        (GOOD.replace("name = \"t\"", "name = \"a/b\""), "`name`"),
        (GOOD.replace("name = \"t\"", "name = \"a|b\""), "`name`"),
        (GOOD.replace("name = \"t\"", "name = \"a\\nb\""), "`name`"),
        (GOOD.replace("name = \"t\"", "name = \"a\\\\b\""), "`name`"),
        (GOOD.replace("\"tmp\"", "\"t\\tmp\""), "scratch[0].name"),
        (GOOD.replace("\"tmp\"", "\" \""), "scratch[0].name"),
        (
            GOOD.replace("kernel = \"k\"", "kernel = \"k|x\""),
            "launch[0].kernel",
        ),
        (
            GOOD.replace("kernel = \"k\"", "kernel = \"\""),
            "launch[0].kernel",
        ),
    ];
    for (text, field) in cases {
        let e = error(&text);
        assert!(e.contains("dir/candidate.toml") && e.contains(field), "{e}");
    }
}

#[test]
fn expect_must_be_a_status() {
    // Issue 13: `expect = "banana"` was accepted.
    let e = error(&GOOD.replace("source", "expect = \"banana\"\nsource"));
    assert!(
        e.contains("field `expect`") && e.contains("banana") && e.contains("runtime_error"),
        "{e}"
    );
    for s in Status::ALL {
        let text = GOOD.replace("source", &format!("expect = \"{}\"\nsource", s.name()));
        assert_eq!(
            parse(Path::new("x"), &text).unwrap().expect.as_deref(),
            Some(s.name())
        );
    }
}

const TRITON: &str = r#"
problem = "fm_interaction"
name = "t"
source = "kernel.py"
[triton]
function = "fm"
num_warps = 4
num_stages = 3
[triton.signature]
x = "*fp32"
out = "*fp32"
B = "i32"
[triton.constexprs]
BLOCK = 32
[[launch]]
kernel = "fm"
grid = ["ceil_div(B, 32)"]
args = ["x", "out", "B"]
"#;

#[test]
fn a_triton_table_parses_with_its_block_from_num_warps() {
    let m = parse(Path::new("x"), TRITON).unwrap();
    let t = m.triton.unwrap();
    assert_eq!(t.function, "fm");
    assert_eq!(t.num_warps, 4);
    assert_eq!(t.constexprs, vec![("BLOCK".to_string(), 32)]);
    assert_eq!(t.signature.len(), 3);
    assert_eq!(m.launches[0].block, [128.into(), 1.into(), 1.into()]);
    // Given equal to num_warps × 32 is fine too; Triton's defaults fill what is left out.
    let given = TRITON.replace("args =", "block = [128, 1, 1]\nargs =");
    assert!(parse(Path::new("x"), &given).is_ok());
    let defaults = TRITON.replace("num_warps = 4\nnum_stages = 3\n", "");
    let t = parse(Path::new("x"), &defaults).unwrap().triton.unwrap();
    assert_eq!((t.num_warps, t.num_stages), (4, 3));
}

#[test]
fn triton_errors_name_the_file_and_the_field() {
    let cases = [
        // The function's name missing, or not a Python name.
        (
            TRITON.replace("function = \"fm\"\n", ""),
            "triton.function",
            "missing",
        ),
        (
            TRITON.replace("function = \"fm\"", "function = \"f m\""),
            "triton.function",
            "identifier",
        ),
        // A type string Triton's launcher does not take.
        (
            TRITON.replace("x = \"*fp32\"", "x = \"*float\""),
            "triton.signature.x",
            "*float",
        ),
        (
            TRITON.replace("B = \"i32\"", "B = \"int\""),
            "triton.signature.B",
            "`int`",
        ),
        (
            TRITON.replace("B = \"i32\"", "B = 32"),
            "triton.signature.B",
            "type string",
        ),
        // The block must be num_warps × 32.
        (
            TRITON.replace("args =", "block = [256, 1, 1]\nargs ="),
            "launch[0].block",
            "num_warps × 32 = 128",
        ),
        (
            TRITON.replace("args =", "block = [64, 2]\nargs ="),
            "launch[0].block",
            "128 threads",
        ),
        (
            TRITON.replace("num_warps = 4", "num_warps = 3"),
            "triton.num_warps",
            "power of two",
        ),
        (
            TRITON.replace("num_warps = 4", "num_warps = 64"),
            "triton.num_warps",
            "power of two",
        ),
        (
            TRITON.replace("num_stages = 3", "num_stages = 0"),
            "triton.num_stages",
            "1 to 16",
        ),
        // A constexpr is an integer.
        (
            TRITON.replace("BLOCK = 32", "BLOCK = 32.5"),
            "triton.constexprs.BLOCK",
            "integer",
        ),
        (
            TRITON.replace("BLOCK = 32", "BLOCK = \"32\""),
            "triton.constexprs.BLOCK",
            "integer",
        ),
        (
            TRITON.replace("BLOCK = 32", "BLOCK = 32\nB = 4"),
            "triton.constexprs.B",
            "signature too",
        ),
        // Launches: the function, one argument per signature entry, no shared_bytes.
        (
            TRITON.replace("kernel = \"fm\"", "kernel = \"other\""),
            "launch[0].kernel",
            "function `fm`",
        ),
        (
            TRITON.replace("[\"x\", \"out\", \"B\"]", "[\"x\", \"out\"]"),
            "launch[0].args",
            "constexprs are compiled in",
        ),
        (
            TRITON.replace("args =", "shared_bytes = 0\nargs ="),
            "launch[0].shared_bytes",
            "metadata",
        ),
        // The table goes with a .py source, and a .py source needs it.
        (TRITON.replace("kernel.py", "kernel.cu"), "triton", ".py"),
        (
            TRITON.split("[triton]").next().unwrap().to_string()
                + "[[launch]]\nkernel = \"fm\"\ngrid = [1]\nargs = []\n",
            "triton",
            "needs a [triton] table",
        ),
        (
            TRITON.replace("num_stages = 3", "num_stages = 3\nnum_ctas = 2"),
            "triton.num_ctas",
            "unknown field",
        ),
    ];
    for (i, (text, field, want)) in cases.iter().enumerate() {
        let e = error(text);
        assert!(
            e.contains("dir/candidate.toml")
                && e.contains(&format!("field `{field}`"))
                && e.contains(want),
            "case {i}: want field {field} and {want:?} in: {e}"
        );
    }
    // Without [triton] a launch must still give its block.
    let e = error(&GOOD.replace("block = [256, 1, 1]\n", ""));
    assert!(
        e.contains("field `launch[0].block`") && e.contains("missing"),
        "{e}"
    );
}

#[test]
fn toml_errors_are_located_at_their_field() {
    let e = error(&GOOD.replace("kernel = \"k\"", "kernel = 3"));
    assert!(e.contains("field `launch[0].kernel`"), "{e}");
    let e = error(&GOOD.replace("args = [", "argz = 1\nargs = ["));
    assert!(e.contains("field `launch[0].argz`"), "{e}");
    let e = error(&GOOD.replace("kernel = \"k\"\n", ""));
    assert!(e.contains("launch[0].kernel"), "{e}");
    let e = error(&GOOD.replace("name = \"t\"", "name = [\"t\"]"));
    assert!(e.contains("field `name`"), "{e}");
    let e = error(&GOOD.replace("bytes = 64", "bytes = true"));
    assert!(e.contains("field `scratch[0].bytes`"), "{e}");
}

#[test]
fn arch_options_and_include_parse_when_allowed() {
    let text = GOOD.replace(
            "source = \"kernel.cu\"",
            "source = \"kernel.cu\"\narch = \"sm_90a\"\noptions = [\"-DTILE=4\", \"--use_fast_math\", \"-std=c++20\"]\ninclude = [\"inc\", \"./third_party/x/../y\"]",
        );
    let m = parse(Path::new("x"), &text).unwrap();
    assert_eq!(m.arch.as_deref(), Some("sm_90a"));
    assert_eq!(m.options, ["-DTILE=4", "--use_fast_math", "-std=c++20"]);
    assert_eq!(m.include, ["inc", "./third_party/x/../y"]);
    let m = parse(Path::new("x"), GOOD).unwrap();
    assert!(m.arch.is_none() && m.options.is_empty() && m.include.is_empty());
}

#[test]
fn bad_arch_options_and_include_name_the_file_and_field() {
    let with = |line: &str| {
        GOOD.replace(
            "source = \"kernel.cu\"",
            &format!("source = \"kernel.cu\"\n{line}"),
        )
    };
    let cases = [
        ("arch = \"sm_91\"", "field `arch`", "sm_90a"),
        ("arch = \"hopper\"", "field `arch`", "not an arch"),
        ("arch = 90", "field `arch`", "malformed"),
        (
            "options = [\"-DOK\", \"-G\"]",
            "field `options[1]`",
            "not allowed",
        ),
        (
            "options = [\"-I/usr/include\"]",
            "field `options[0]`",
            "`include`",
        ),
        (
            "options = [\"-arch=sm_80\"]",
            "field `options[0]`",
            "`arch`",
        ),
        (
            "options = [\"-maxrregcount=1000\"]",
            "field `options[0]`",
            "allow-list",
        ),
        (
            "options = [\"-DA -DB\"]",
            "field `options[0]`",
            "C identifier",
        ),
        ("options = \"-DA\"", "field `options`", "malformed"),
        (
            "include = [\"/usr/include\"]",
            "field `include[0]`",
            "absolute",
        ),
        (
            "include = [\"ok\", \"../other\"]",
            "field `include[1]`",
            "leads out",
        ),
        (
            "include = [\"a/../../b\"]",
            "field `include[0]`",
            "leads out",
        ),
        ("include = [\"\"]", "field `include[0]`", "empty"),
    ];
    for (line, field, why) in cases {
        let e = error(&with(line));
        assert!(
            e.contains("dir/candidate.toml") && e.contains(field) && e.contains(why),
            "{line}: {e}"
        );
    }
}
