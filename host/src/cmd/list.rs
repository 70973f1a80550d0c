//! `dlrm-bench list`: the problem catalog, as a table of each problem's number, name, summary
//! and sizes per preset, or as names alone (one per line, for scripts).
use bench_problems::{all_problems, Preset};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};

/// What `dlrm-bench list` prints (without the final newline).
pub fn render(names_only: bool) -> String {
    if names_only {
        let names: Vec<&str> = all_problems().iter().map(|p| p.name()).collect();
        return names.join("\n");
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_header(vec!["#", "problem", "what", "ci", "small", "full"]);
    for p in all_problems() {
        let fmt = |preset| {
            p.sizes(preset)
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        t.add_row(vec![
            p.number().to_string(),
            p.name().to_string(),
            p.summary().to_string(),
            fmt(Preset::Ci),
            fmt(Preset::Small),
            fmt(Preset::Full),
        ]);
    }
    t.to_string()
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
            assert_eq!(table.matches(&format!(" {name} ")).count(), 1, "{name}");
        }
    }
}
