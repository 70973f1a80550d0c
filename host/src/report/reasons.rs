//! Why records are not `correct`, for the terminal: under the run's table, one line per
//! (status, reason) with how many records and which, so a newcomer sees why a row says
//! `skipped` or `incorrect` without opening `summary.md` (whose Messages section keeps every
//! message whole).
use crate::results::record::{Record, Status};
use std::collections::BTreeMap;

/// At most this many reasons are listed; the rest are counted.
const MAX_REASONS: usize = 20;

/// Names shown per reason before "and N more".
const MAX_NAMES: usize = 3;

/// A reason's text on the terminal: its first line, at most this many characters.
const MAX_REASON_CHARS: usize = 300;

/// The lines saying why each record that is not `correct` is not: grouped by status and the
/// first line of its message with its paths masked (each candidate's message names its own
/// file; a reason of one record keeps them), the largest groups first; empty when every
/// record is correct.
pub(crate) fn reason_lines(records: &[Record]) -> Vec<String> {
    let mut groups: BTreeMap<(&'static str, String), Vec<(String, String)>> = BTreeMap::new();
    for r in records.iter().filter(|r| r.status != Status::Correct) {
        // A message may come from an answer's own output: no control character (an escape
        // sequence, a carriage return) reaches the terminal.
        let first: String = r
            .message
            .lines()
            .next()
            .unwrap_or("")
            .trim()
            .chars()
            .map(|c| if c.is_control() { '?' } else { c })
            .collect();
        let first = if first.is_empty() {
            "(no message)"
        } else {
            first.as_str()
        };
        groups
            .entry((r.status.name(), masked(first)))
            .or_default()
            .push((format!("{}/{}", r.problem, r.candidate), first.to_string()));
    }
    let mut groups: Vec<_> = groups.into_iter().collect();
    groups.sort_by_key(|(_, members)| std::cmp::Reverse(members.len()));
    let mut lines: Vec<String> = groups
        .iter()
        .take(MAX_REASONS)
        .map(|((status, reason), members)| line(status, reason, members))
        .collect();
    if groups.len() > MAX_REASONS {
        lines.push(format!(
            "{} more reasons: summary.md, section Messages",
            groups.len() - MAX_REASONS
        ));
    }
    lines
}

/// The note under the metrics saying which groups' skipped candidates they leave out (a skip
/// is no verdict), so a group whose every candidate was skipped does not vanish unsaid; `None`
/// when nothing was skipped.
pub(crate) fn skipped_note(records: &[Record]) -> Option<String> {
    let mut groups: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for r in records.iter().filter(|r| !r.is_reference()) {
        let g = groups.entry(&r.group).or_default();
        g.0 += 1;
        g.1 += usize::from(r.status == Status::Skipped);
    }
    let parts: Vec<String> = groups
        .iter()
        .filter(|(_, (_, skipped))| *skipped > 0)
        .map(|(g, (all, skipped))| {
            let gone = if skipped == all {
                ", so it is not in the tables"
            } else {
                ""
            };
            format!("{g} {skipped} of {all}{gone}")
        })
        .collect();
    (!parts.is_empty()).then(|| {
        format!(
            "Skipped candidates are left out of the metrics (a skip is no verdict): {}.",
            parts.join("; ")
        )
    })
}

/// One reason's line: the count, the status, the reason (the member's own when alone), the
/// first few members' names.
fn line(status: &str, masked_reason: &str, members: &[(String, String)]) -> String {
    let reason = shorten(if members.len() == 1 {
        &members[0].1
    } else {
        masked_reason
    });
    let shown: Vec<&str> = members
        .iter()
        .take(MAX_NAMES)
        .map(|m| m.0.as_str())
        .collect();
    let more = members.len().saturating_sub(MAX_NAMES);
    let tail = if more > 0 {
        format!(", and {more} more")
    } else {
        String::new()
    };
    format!(
        "{} {status}: {reason} ({}{tail})",
        members.len(),
        shown.join(", ")
    )
}

/// `text` with every word that holds a path (a `/`) as `<path>`.
fn masked(text: &str) -> String {
    text.split(' ')
        .map(|w| if w.contains('/') { "<path>" } else { w })
        .collect::<Vec<_>>()
        .join(" ")
}

fn shorten(text: &str) -> String {
    if text.chars().count() <= MAX_REASON_CHARS {
        return text.to_string();
    }
    let cut: String = text.chars().take(MAX_REASON_CHARS).collect();
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(candidate: &str, status: Status, message: &str) -> Record {
        let mut r = Record::new("kjt_permute", candidate, "g", "o");
        r.status = status;
        r.message = message.into();
        r
    }

    #[test]
    fn reasons_are_grouped_counted_and_named() {
        let mut records = vec![record("ok", Status::Correct, "")];
        for c in ["a", "b", "c", "d", "e"] {
            let m = format!("/x/{c}/kernel.cu needs a GPU\nsecond line");
            records.push(record(c, Status::Skipped, &m));
        }
        let m = "public-0, output `out`: 12 of 64 elements differ";
        records.push(record("w", Status::Incorrect, m));
        records.push(record("q", Status::RuntimeError, ""));
        assert_eq!(
            reason_lines(&records),
            [
                "5 skipped: <path> needs a GPU (kjt_permute/a, kjt_permute/b, kjt_permute/c, and \
                 2 more)",
                "1 incorrect: public-0, output `out`: 12 of 64 elements differ (kjt_permute/w)",
                "1 runtime_error: (no message) (kjt_permute/q)",
            ]
        );
        assert!(reason_lines(&records[..1]).is_empty());
    }

    #[test]
    fn groups_with_skipped_candidates_are_named_with_counts() {
        let mut records = vec![
            record("a", Status::Skipped, "needs a GPU"),
            record("b", Status::Correct, ""),
        ];
        let mut all_skipped = record("c", Status::Skipped, "needs a GPU");
        all_skipped.group = "h".into();
        records.push(all_skipped);
        assert_eq!(
            skipped_note(&records).unwrap(),
            "Skipped candidates are left out of the metrics (a skip is no verdict): g 1 of 2; \
             h 1 of 1, so it is not in the tables."
        );
        assert_eq!(skipped_note(&records[1..2]), None);
    }

    #[test]
    fn control_characters_never_reach_the_terminal() {
        let records = [record("a", Status::RuntimeError, "boom\x1b[2J\rgone")];
        assert_eq!(
            reason_lines(&records),
            ["1 runtime_error: boom?[2J?gone (kjt_permute/a)"]
        );
    }

    #[test]
    fn a_reason_of_one_record_keeps_its_paths() {
        let records = [record(
            "a",
            Status::Skipped,
            "/x/a/kernel.cubin is not built",
        )];
        assert_eq!(
            reason_lines(&records),
            ["1 skipped: /x/a/kernel.cubin is not built (kjt_permute/a)"]
        );
    }

    #[test]
    fn many_reasons_are_capped_and_long_ones_cut() {
        let records: Vec<Record> = (0..30)
            .map(|i| {
                let m = format!("{i} {}", "x".repeat(400));
                record(&format!("c{i}"), Status::Incorrect, &m)
            })
            .collect();
        let lines = reason_lines(&records);
        assert_eq!(lines.len(), MAX_REASONS + 1);
        assert_eq!(
            lines[MAX_REASONS],
            "10 more reasons: summary.md, section Messages"
        );
        assert!(
            lines[0].contains('…') && lines[0].len() < 400,
            "{}",
            lines[0]
        );
    }
}
