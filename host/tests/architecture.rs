//! The host crate's module graph has no loops: a module that uses another (`crate::a::b`,
//! `super::x`, in `use` or inline) never is used back by it, directly or through others. A
//! module may use its ancestors and descendants (a folder's `mod.rs` and its files are one
//! unit); tests (`#[cfg(test)] mod tests`) and comments are left out. Read from the sources, so a new loop
//! fails here with the modules that form it.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every module of the crate (`a::b`) with its file's text, tests cut off.
fn modules() -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![src()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let name = module_name(&path);
                if name == "main" || name.is_empty() {
                    continue; // the binary and lib.rs use everything
                }
                let text = std::fs::read_to_string(&path).unwrap();
                let code = match text.find("#[cfg(test)]\nmod tests") {
                    Some(at) => &text[..at],
                    None => &text,
                };
                // Comments (doc links among them) are not dependencies.
                let code: String = code
                    .lines()
                    .filter(|l| !l.trim_start().starts_with("//"))
                    .collect::<Vec<_>>()
                    .join("\n");
                out.insert(name, code);
            }
        }
    }
    out
}

fn module_name(path: &Path) -> String {
    let rel = path.strip_prefix(src()).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts.join("::")
}

/// The modules `code` (of module `name`) refers to, resolved to the longest known prefix.
fn references(name: &str, code: &str, known: &BTreeSet<String>) -> BTreeSet<String> {
    let parent = |n: &str| {
        n.rsplit_once("::")
            .map_or(String::new(), |(p, _)| p.to_string())
    };
    let mut found = BTreeSet::new();
    let bytes = code.as_bytes();
    for (prefix, base) in [("crate::", String::new()), ("super::", parent(name))] {
        let mut from = 0;
        while let Some(k) = code[from..].find(prefix) {
            let at = from + k;
            from = at + prefix.len();
            if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
                continue;
            }
            let rest: String = code[from..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let mut path: Vec<&str> = rest.split("::").filter(|s| !s.is_empty()).collect();
            if !base.is_empty() {
                path.insert(0, &base);
            }
            let full = path.join("::");
            let mut parts: Vec<&str> = full.split("::").collect();
            while !parts.is_empty() {
                let candidate = parts.join("::");
                if known.contains(&candidate) {
                    found.insert(candidate);
                    break;
                }
                parts.pop();
            }
        }
    }
    found
}

fn related(a: &str, b: &str) -> bool {
    let under = |x: &str, y: &str| x == y || x.starts_with(&format!("{y}::"));
    under(a, b) || under(b, a)
}

/// The strongly connected components of more than one module (Tarjan's algorithm).
fn loops(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.edges.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let modules = modules();
    let known: BTreeSet<String> = modules.keys().cloned().collect();
    modules
        .iter()
        .map(|(name, code)| {
            let to = references(name, code, &known)
                .into_iter()
                .filter(|t| !related(name, t))
                .collect();
            (name.clone(), to)
        })
        .collect()
}

#[test]
fn the_loop_finder_finds_a_loop_and_only_loops() {
    let edges: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec!["a"]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(loops(&edges), vec![vec!["a", "b", "c"]]);
    let known: BTreeSet<String> = ["evaluate", "evaluate::verify", "results::record"]
        .into_iter()
        .map(String::from)
        .collect();
    let code = "use crate::results::record::Record;\nuse super::verify::Verifier;\nfoo::crate::x;";
    let found = references("evaluate::timing", code, &known);
    assert_eq!(
        found,
        ["evaluate::verify", "results::record"]
            .into_iter()
            .map(String::from)
            .collect()
    );
}

#[test]
fn the_host_crate_has_no_import_loops() {
    let graph = graph();
    assert!(graph.len() > 40, "only {} modules found", graph.len());
    let found = loops(&graph);
    let described: Vec<String> = found
        .iter()
        .map(|c| {
            let inner: Vec<String> = c
                .iter()
                .flat_map(|a| {
                    graph[a]
                        .iter()
                        .filter(|b| c.contains(b))
                        .map(move |b| format!("{a} → {b}"))
                })
                .collect();
            format!("{{{}}}: {}", c.join(", "), inner.join("; "))
        })
        .collect();
    assert!(found.is_empty(), "import loops:\n{}", described.join("\n"));
}

/// The brace depth at the start of each line of Rust `code`, strings, chars and comments
/// skipped (raw strings and nested block comments included).
fn depths(code: &str) -> Vec<i32> {
    let b = code.as_bytes();
    let (mut i, mut depth, mut out) = (0, 0i32, vec![0]);
    while i < b.len() {
        match b[i] {
            b'\n' => out.push(depth),
            b'{' => depth += 1,
            b'}' => depth -= 1,
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i + 1 < b.len() && b[i + 1] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let mut nest = 0;
                while i < b.len() {
                    if b[i..].starts_with(b"/*") {
                        nest += 1;
                        i += 1;
                    } else if b[i..].starts_with(b"*/") {
                        nest -= 1;
                        i += 1;
                        if nest == 0 {
                            break;
                        }
                    } else if b[i] == b'\n' {
                        out.push(depth);
                    }
                    i += 1;
                }
            }
            b'r' if matches!(b.get(i + 1), Some(b'#' | b'"'))
                && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) =>
            {
                let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
                if b.get(i + 1 + hashes) == Some(&b'"') {
                    let end: Vec<u8> = std::iter::once(b'"')
                        .chain(std::iter::repeat_n(b'#', hashes))
                        .collect();
                    i += 2 + hashes;
                    while i < b.len() && !b[i..].starts_with(&end) {
                        if b[i] == b'\n' {
                            out.push(depth);
                        }
                        i += 1;
                    }
                    i += end.len() - 1;
                }
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    if b[i] == b'\n' {
                        out.push(depth);
                    }
                    i += 1;
                }
            }
            b'\'' if b.get(i + 1) == Some(&b'\\') => {
                i += 2;
                while i < b.len() && b[i] != b'\'' {
                    i += 1;
                }
            }
            b'\'' if b.get(i + 2) == Some(&b'\'') => i += 2,
            _ => {}
        }
        i += 1;
    }
    out
}

/// The functions of `code` longer than `max` lines: (first line, length, name).
fn long_functions(code: &str, max: usize) -> Vec<(usize, usize, String)> {
    let lines: Vec<&str> = code.lines().collect();
    let depth = depths(code);
    let mut found = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(at) = words.iter().position(|w| *w == "fn") else {
            continue;
        };
        let before_ok = words[..at].iter().all(|w| {
            w.starts_with("pub") || ["const", "async", "unsafe", "extern", "\"C\""].contains(w)
        });
        if !before_ok || at + 1 >= words.len() {
            continue;
        }
        let name: String = words[at + 1]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        // The body: from the first line deeper than the signature back to its depth.
        let base = depth[n];
        let Some(open) = (n..lines.len()).find(|&k| depth.get(k + 1).is_some_and(|&d| d > base))
        else {
            continue;
        };
        if lines[n..=open].iter().any(|l| l.trim_end().ends_with(';')) && !lines[open].contains('{')
        {
            continue; // a declaration without a body
        }
        let end = (open + 1..lines.len())
            .find(|&k| depth.get(k + 1).is_none_or(|&d| d <= base))
            .unwrap_or(lines.len() - 1);
        let len = end - n + 1;
        if len > max {
            found.push((n + 1, len, name));
        }
    }
    found
}

#[test]
fn the_length_finder_skips_strings_and_comments() {
    let code = "fn a() {\n    let s = \"}}}\n{\";\n    // }\n    let c = '}';\n    let r = r#\"}\"#;\n    x\n}\nfn b() {}\n";
    assert_eq!(long_functions(code, 6), vec![(1, 8, "a".to_string())]);
    assert!(long_functions(code, 8).is_empty());
}

/// Small enough to read: no file of `host/src` over 800 lines, no function over 120.
#[test]
fn host_files_and_functions_are_short() {
    let mut dirs = vec![src()];
    let mut over = Vec::new();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let rel = path.strip_prefix(src()).unwrap().display().to_string();
            let lines = text.lines().count();
            if lines > 800 {
                over.push(format!("{rel}: {lines} lines"));
            }
            for (line, len, name) in long_functions(&text, 120) {
                over.push(format!("{rel}:{line}: fn {name} is {len} lines"));
            }
        }
    }
    over.sort();
    assert!(over.is_empty(), "over the limits:\n{}", over.join("\n"));
}

/// The markdown files of the README and the guide (`docs/`, an mdBook), each with its text.
fn docs() -> Vec<(PathBuf, String)> {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = vec![repo.join("README.md")];
    let mut dirs = vec![repo.join("docs")];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                files.push(p);
            }
        }
    }
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, text)
        })
        .collect()
}

/// The relative link targets of markdown `text` (`[x](target)`, anchors cut, web links left out).
fn relative_links(text: &str) -> Vec<String> {
    text.split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .map(|t| t.split('#').next().unwrap_or("").trim().to_string())
        .filter(|t| !t.is_empty() && !t.contains("://") && !t.starts_with("mailto:"))
        .collect()
}

/// Every relative link of the README and the guide names a file that exists, the guide's
/// table of contents (docs/SUMMARY.md) lists every chapter in docs/guide/, and the README stays
/// a front page (at most 200 lines; the rest is in the guide).
#[test]
fn the_readme_and_the_guide_link_only_to_what_exists() {
    let mut broken = Vec::new();
    let docs = docs();
    for (path, text) in &docs {
        for target in relative_links(text) {
            if !path.parent().unwrap().join(&target).exists() {
                broken.push(format!("{}: {target}", path.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links: {broken:#?}");
    let summary = &docs
        .iter()
        .find(|(p, _)| p.ends_with("docs/SUMMARY.md"))
        .unwrap()
        .1;
    for (path, _) in docs
        .iter()
        .filter(|(p, _)| p.parent().unwrap().ends_with("docs/guide"))
    {
        let name = format!("guide/{}", path.file_name().unwrap().to_string_lossy());
        assert!(
            summary.contains(&format!("({name})")),
            "docs/SUMMARY.md lacks {name}"
        );
    }
    let readme = &docs[0].1;
    assert!(
        readme.lines().count() <= 200,
        "README.md: {} lines",
        readme.lines().count()
    );
    assert_eq!(
        relative_links("[a](b.md#x) [w](https://x.org) [c](../c.md)"),
        ["b.md", "../c.md"]
    );
}
