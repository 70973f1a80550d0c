//! `dlrm-bench list`: the problem catalog, one block per problem (its number, name and summary,
//! then its sizes per preset), every line within the terminal's 100 columns; or names alone
//! (one per line, for scripts).
use crate::report::{wrap, TERMINAL_TEXT_WIDTH};
use bench_problems::{all_problems, Preset};

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
                let line = wrap(
                    &format!("{label}: {}", sizes.join(" ")),
                    TERMINAL_TEXT_WIDTH - 4,
                );
                for l in line.lines() {
                    block += &format!("\n    {l}");
                }
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
}
