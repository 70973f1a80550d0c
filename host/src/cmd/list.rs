//! `dlrm-bench list`: the problem catalog, one block per problem (its number, name and summary,
//! then its sizes per preset), every line within the terminal's 100 columns; or names alone
//! (one per line, for scripts); or each problem's timed shapes (`--shapes`).
use crate::report::{wrap, TERMINAL_TEXT_WIDTH};
use bench_problems::{all_problems, Preset};

/// `text` wrapped to the terminal's width under a block's heading, on lines of its own
/// indented by four columns.
fn push_indented(block: &mut String, text: &str) {
    for l in wrap(text, TERMINAL_TEXT_WIDTH - 4).lines() {
        block.push_str(&format!("\n    {l}"));
    }
}

/// What `dlrm-bench list --shapes` prints: each problem's timed shapes at `preset`, a line
/// each (its name, the sizes it changes from the default, what it stands for).
pub fn render_shapes(preset: Preset) -> String {
    let blocks: Vec<String> = all_problems()
        .iter()
        .map(|p| {
            let base = p.sizes(preset);
            let mut block = format!("{}. {} at {}:", p.number(), p.name(), preset.name());
            for s in p.shapes(preset) {
                let changed: Vec<String> = bench_problems::shapes::changed_from(&s.sizes, &base)
                    .into_iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                let sizes = match changed.is_empty() {
                    true => base
                        .iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>(),
                    false => changed,
                };
                push_indented(
                    &mut block,
                    &format!("{}: {} ({})", s.name, sizes.join(" "), s.about),
                );
            }
            block
        })
        .collect();
    let note = wrap(
        "The first shape of each problem is the preset's sizes; the others list what they \
         change. `run --shapes all` (the default) checks and times every shape; `--shapes \
         default,d32` picks by name.",
        TERMINAL_TEXT_WIDTH,
    );
    format!("{}\n\n{note}", blocks.join("\n\n"))
}

/// What `dlrm-bench list` prints (without the final newline).
pub fn render(names_only: bool) -> String {
    if names_only {
        let names: Vec<&str> = all_problems().iter().map(|p| p.name()).collect();
        return names.join("\n");
    }
    let blocks: Vec<String> = all_problems()
        .iter()
        .map(|p| {
            let mut block = wrap(
                &format!("{}. {}: {}", p.number(), p.name(), p.summary()),
                TERMINAL_TEXT_WIDTH,
            );
            for (label, preset) in [
                ("ci", Preset::Ci),
                ("small", Preset::Small),
                ("full", Preset::Full),
            ] {
                let sizes: Vec<String> = p
                    .sizes(preset)
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                push_indented(&mut block, &format!("{label}: {}", sizes.join(" ")));
            }
            block
        })
        .collect();
    let note = wrap(
        "Sizes per preset (`--preset ci|small|full`); `dlrm-bench prompt N --format native` \
         names every tensor and size of problem N.",
        TERMINAL_TEXT_WIDTH,
    );
    format!("{}\n\n{note}", blocks.join("\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_problem_is_listed_once_by_name_and_in_the_table() {
        let names = render(true);
        assert_eq!(names.lines().count(), all_problems().len());
        let table = render(false);
        for name in names.lines() {
            assert_eq!(table.matches(&format!(" {name}: ")).count(), 1, "{name}");
        }
        let widest = table.lines().map(|l| l.chars().count()).max().unwrap();
        assert!(widest <= TERMINAL_TEXT_WIDTH, "a line of {widest} columns");
    }

    #[test]
    fn shapes_list_every_shape_of_every_problem_with_what_it_changes() {
        let text = render_shapes(Preset::Full);
        for p in all_problems() {
            for s in p.shapes(Preset::Full) {
                assert!(
                    text.contains(&format!("    {}: ", s.name)),
                    "{} {}",
                    p.name(),
                    s.name
                );
            }
        }
        assert!(text.contains("d32: D=32 E=33554432"), "{text}");
        assert!(text.contains("one-hot: POOL=1"), "{text}");
        let widest = text.lines().map(|l| l.chars().count()).max().unwrap();
        assert!(widest <= TERMINAL_TEXT_WIDTH, "a line of {widest} columns");
    }
}
