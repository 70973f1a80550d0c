//! Cell rules every table shares: numbers to a fixed number of digits, a markdown table from
//! rows, and whether a reference is at parity with eager.

/// `v` to `digits` decimals; `-` when absent or not finite.
pub(crate) fn f(v: Option<f64>, digits: usize) -> String {
    v.filter(|x| x.is_finite())
        .map(|x| format!("{x:.digits$}"))
        .unwrap_or_else(|| "-".into())
}

/// A markdown table of `rows` under `header` (newlines in a header become spaces).
pub(crate) fn markdown_table<S: AsRef<str>>(header: &[S], rows: &[Vec<String>]) -> String {
    let header: Vec<String> = header
        .iter()
        .map(|h| h.as_ref().replace('\n', " "))
        .collect();
    let mut s = format!(
        "| {} |\n|{}\n",
        header.join(" | "),
        " --- |".repeat(header.len())
    );
    for r in rows {
        s += &format!("| {} |\n", r.join(" | "));
    }
    s
}

/// A reference within this factor of eager's time (±10%) is at parity with it.
pub(crate) const PARITY_TOLERANCE: f64 = 0.1;

/// Whether a reference / eager time ratio is outside ±[`PARITY_TOLERANCE`] (below 0.9 or above
/// 1.1): the speedups over the reference are then skewed against those over eager.
pub(crate) fn outside_parity(reference_over_eager: f64) -> bool {
    reference_over_eager.is_finite()
        && !(1.0 - PARITY_TOLERANCE..=1.0 + PARITY_TOLERANCE).contains(&reference_over_eager)
}
