//! From a model's reply to the files `kernelbench` and `run` take: the fenced code blocks of the
//! reply, then per format — one Python file with `class ModelNew` (KernelBench), or a
//! `candidate.toml` and its CUDA source (native). A reply that does not give exactly that gets
//! its own status, and its text is kept by the caller.
use crate::cmd::prompt::Format;
use serde::{Deserialize, Serialize};

/// What became of a reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerStatus {
    /// The answer's files were written.
    Extracted,
    /// No code block of the kind asked for.
    NoAnswer,
    /// Several different blocks of the kind asked for: which one is meant cannot be told.
    ConflictingBlocks,
    /// Python without `class ModelNew`.
    WrongClass,
    /// A native manifest for another problem than the one asked.
    WrongProblem,
    /// A native manifest whose `source` is not the answer's own `.cu` file (the project's
    /// kernels, a path outside the answer, another kind of file): refused, since it would run
    /// code the model did not write.
    ForeignSource,
    /// Every attempt to ask failed (the exchange says why).
    RequestFailed,
    /// `--responses` has no reply for it.
    NoResponse,
}

/// An answer's files (paths relative to its directory) or why there are none.
#[derive(Clone, Debug, PartialEq)]
pub struct Extracted {
    pub status: AnswerStatus,
    pub files: Vec<(String, String)>,
    pub message: String,
}

/// A fenced block: its language tag (lower case, may be empty) and text.
#[derive(Clone, Debug, PartialEq)]
struct Block {
    lang: String,
    text: String,
}

/// The fenced code blocks of `reply`, in order (an unclosed last block runs to the end).
fn blocks(reply: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<(String, Vec<&str>)> = None;
    for line in reply.lines() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut open, fence) {
            (None, Some(tag)) => open = Some((tag.trim().to_ascii_lowercase(), Vec::new())),
            (Some(_), Some(rest)) if rest.trim().is_empty() => {
                let (lang, lines) = open.take().unwrap();
                out.push(Block {
                    lang,
                    text: lines.join("\n") + "\n",
                });
            }
            (Some((_, lines)), _) => lines.push(line),
            (None, None) => {}
        }
    }
    if let Some((lang, lines)) = open {
        out.push(Block {
            lang,
            text: lines.join("\n") + "\n",
        });
    }
    out
}

/// The distinct blocks whose language is one of `langs`.
fn of_kind(all: &[Block], langs: &[&str]) -> Vec<String> {
    let mut texts: Vec<String> = Vec::new();
    for b in all.iter().filter(|b| langs.contains(&b.lang.as_str())) {
        if !texts.contains(&b.text) {
            texts.push(b.text.clone());
        }
    }
    texts
}

/// The answer in `reply` for problem `number`/`name` in `format`.
pub fn extract(reply: &str, format: Format, number: u32, name: &str) -> Extracted {
    let all = blocks(reply);
    match format {
        Format::Kernelbench => kernelbench(&all, number, name),
        Format::Native => native(&all, name),
    }
}

fn refused(status: AnswerStatus, message: impl Into<String>) -> Extracted {
    Extracted {
        status,
        files: Vec::new(),
        message: message.into(),
    }
}

fn kernelbench(all: &[Block], number: u32, name: &str) -> Extracted {
    let python = of_kind(all, &["python", "py", ""]);
    let with_class: Vec<&String> = python
        .iter()
        .filter(|t| {
            t.lines()
                .any(|l| l.trim_start().starts_with("class ModelNew"))
        })
        .collect();
    match (python.len(), with_class.len()) {
        (0, _) => refused(AnswerStatus::NoAnswer, "no ```python block"),
        (_, 0) => refused(
            AnswerStatus::WrongClass,
            "no `class ModelNew` in the reply's Python",
        ),
        (_, 1) => Extracted {
            status: AnswerStatus::Extracted,
            files: vec![(format!("{number:02}_{name}.py"), with_class[0].clone())],
            message: String::new(),
        },
        (_, n) => refused(
            AnswerStatus::ConflictingBlocks,
            format!("{n} different ```python blocks define `class ModelNew`"),
        ),
    }
}

fn native(all: &[Block], name: &str) -> Extracted {
    let toml = of_kind(all, &["toml"]);
    let cuda = of_kind(all, &["cuda", "cu", "c++", "cpp"]);
    if toml.len() > 1 || cuda.len() > 1 {
        return refused(
            AnswerStatus::ConflictingBlocks,
            format!(
                "{} different ```toml and {} different ```cuda blocks (one of each is asked for)",
                toml.len(),
                cuda.len()
            ),
        );
    }
    let (Some(manifest), Some(source)) = (toml.first(), cuda.first()) else {
        let missing = if toml.is_empty() {
            "```toml"
        } else {
            "```cuda"
        };
        return refused(AnswerStatus::NoAnswer, format!("no {missing} block"));
    };
    // The source goes where the manifest says; it must be the answer's own .cu file. (A
    // manifest that does not parse, or names no source, is left to `run` to refuse.)
    let table = toml::from_str::<toml::Table>(manifest).ok();
    if let Some(p) = table.as_ref().and_then(|t| t.get("problem")) {
        if p.as_str() != Some(name) {
            return refused(
                AnswerStatus::WrongProblem,
                format!("the manifest is for problem {p}, not `{name}`"),
            );
        }
    }
    let named = table.and_then(|t| t.get("source").cloned());
    let file = match named {
        None => "kernel.cu".to_string(),
        Some(toml::Value::String(s)) if plain_cu(&s) => s,
        Some(other) => {
            return refused(
                AnswerStatus::ForeignSource,
                format!("the manifest's `source` is {other}, not the answer's own .cu file"),
            )
        }
    };
    Extracted {
        status: AnswerStatus::Extracted,
        files: vec![
            ("candidate.toml".into(), manifest.clone()),
            (file, source.clone()),
        ],
        message: String::new(),
    }
}

/// A file name of the answer's own directory ending in `.cu`.
fn plain_cu(s: &str) -> bool {
    s.strip_suffix(".cu").is_some_and(|stem| {
        (1..=64).contains(&stem.len())
            && stem
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kb(reply: &str) -> Extracted {
        extract(reply, Format::Kernelbench, 3, "tbe_forward_fp16")
    }

    #[test]
    fn a_kernelbench_answer_is_its_one_model_new_block() {
        let e =
            kb("Here:\n```python\nimport torch\nclass ModelNew(nn.Module):\n    pass\n```\nDone.");
        assert_eq!(e.status, AnswerStatus::Extracted);
        assert_eq!(e.files[0].0, "03_tbe_forward_fp16.py");
        assert_eq!(
            e.files[0].1,
            "import torch\nclass ModelNew(nn.Module):\n    pass\n"
        );
        // A helper block beside it, or the same block twice, is not a conflict.
        let two = "```python\nx = 1\n```\n```python\nclass ModelNew:\n    pass\n```\n```python\nclass ModelNew:\n    pass\n```";
        assert_eq!(kb(two).status, AnswerStatus::Extracted);
    }

    #[test]
    fn replies_without_one_usable_block_get_their_own_status() {
        assert_eq!(
            kb("I cannot help with that.").status,
            AnswerStatus::NoAnswer
        );
        assert_eq!(
            kb("```rust\nfn main() {}\n```").status,
            AnswerStatus::NoAnswer
        );
        assert_eq!(
            kb("```python\nclass Model:\n    pass\n```").status,
            AnswerStatus::WrongClass
        );
        let e = kb("```python\nclass ModelNew:\n    a = 1\n```\n```python\nclass ModelNew:\n    a = 2\n```");
        assert_eq!(e.status, AnswerStatus::ConflictingBlocks);
        assert!(e.message.contains("2 different"));
        // A reply cut off inside its block (max_tokens) still yields what it has.
        let e = kb("```python\nclass ModelNew:\n    pass");
        assert_eq!(e.status, AnswerStatus::Extracted);
    }

    #[test]
    fn a_native_answer_is_a_manifest_and_its_source() {
        let reply = "```toml\nname = \"x\"\nsource = \"bag.cu\"\n```\ntext\n```cuda\n__global__ void k() {}\n```";
        let e = extract(reply, Format::Native, 1, "embedding_bag_sum");
        assert_eq!(e.status, AnswerStatus::Extracted);
        let names: Vec<&str> = e.files.iter().map(|f| f.0.as_str()).collect();
        assert_eq!(names, ["candidate.toml", "bag.cu"]);
        let long = format!("{}.cu", "a".repeat(300));
        for evil in [
            "../../outside.cu",
            "gpu-kernels",
            "k.ptx",
            "a\\u0000.cu",
            long.as_str(),
        ] {
            let e = extract(
                &reply.replace("bag.cu", evil),
                Format::Native,
                1,
                "embedding_bag_sum",
            );
            assert_eq!(e.status, AnswerStatus::ForeignSource, "{evil}");
            assert!(e.files.is_empty());
        }
        let other = reply.replace("name = \"x\"", "name = \"x\"\nproblem = \"kjt_permute\"");
        let e = extract(&other, Format::Native, 1, "embedding_bag_sum");
        assert_eq!(e.status, AnswerStatus::WrongProblem, "{e:?}");
        let e = extract(
            "```toml\nname = \"x\"\n```",
            Format::Native,
            1,
            "embedding_bag_sum",
        );
        assert_eq!(
            (e.status, e.message.as_str()),
            (AnswerStatus::NoAnswer, "no ```cuda block")
        );
        let two = format!("{reply}\n```cuda\n__global__ void j() {{}}\n```");
        let e = extract(&two, Format::Native, 1, "embedding_bag_sum");
        assert_eq!(e.status, AnswerStatus::ConflictingBlocks);
    }
}
