//! The reference's parity with PyTorch eager: the skew factor and the markdown section that states it.
use super::cells::f;
use super::cells::markdown_table;
use crate::report::outside_parity;
use crate::results::record::Record;

/// How a reference / eager time ratio `q` skews the speedups over the reference against those
/// over eager. speedup over eager = eager / cand = (eager / ref)·(ref / cand) = speedup over the
/// reference / q, so the speedups over the reference are ×q of those over eager: `q` < 1 (a
/// reference faster than eager) makes them 1/q times smaller, `q` > 1 q times larger.
pub(crate) fn skew_note(q: f64) -> String {
    let how = if q < 1.0 {
        format!("{:.2}x smaller", 1.0 / q)
    } else {
        format!("{q:.2}x larger")
    };
    format!("speedups over the reference are ×{q:.2} of those over eager ({how})")
}

/// The reference-parity section of `summary.md`: per problem whose reference has a PyTorch
/// time, the reference / eager and reference / `torch.compile` ratios, a ratio outside parity
/// in bold with the factor by which it skews the speedups over the reference; `None` when no
/// reference has one.
pub(crate) fn parity_markdown(records: &[Record]) -> Option<String> {
    let refs: Vec<&Record> = records
        .iter()
        .filter(|r| {
            r.is_reference()
                && (r.pytorch.is_some()
                    || r.pytorch_compile.is_some()
                    || r.pytorch_compile_error.is_some())
        })
        .collect();
    if refs.is_empty() {
        return None;
    }
    let rows: Vec<Vec<String>> = refs
        .iter()
        .map(|r| {
            let eager = r.pytorch.as_ref();
            let compile = r.pytorch_compile.as_ref();
            let q = eager.map(|p| p.reference_over_pytorch);
            let skewed = q.is_some_and(outside_parity);
            let bold = |s: String| if skewed { format!("**{s}**") } else { s };
            vec![
                r.problem.clone(),
                f(r.timing.as_ref().map(|t| t.median_ms), 4),
                f(eager.map(|p| p.median_ms), 4),
                bold(f(q, 3)),
                if compile.is_none() && r.pytorch_compile_error.is_some() {
                    "failed".into()
                } else {
                    f(compile.map(|p| p.median_ms), 4)
                },
                f(compile.map(|p| p.reference_over_pytorch), 3),
                match q {
                    Some(q) if skewed => skew_note(q),
                    Some(_) => "within ±10% of eager".into(),
                    None => "-".into(),
                },
            ]
        })
        .collect();
    let skewed = refs
        .iter()
        .filter_map(|r| r.pytorch.as_ref())
        .filter(|p| outside_parity(p.reference_over_pytorch))
        .count();
    let mut s = format!(
        "The Rust reference's time over PyTorch's, per problem (below 1: the reference is \
         faster). A reference outside ±10% of eager is in bold: the speedups over it are the \
         speedups over eager times that ratio ({skewed} problem(s) here).\n\n"
    );
    s += &markdown_table(
        &[
            "problem",
            "ref ms",
            "eager ms",
            "ref / eager",
            "torch.compile ms",
            "ref / torch.compile",
            "speedups over the reference",
        ],
        &rows,
    );
    Some(s)
}
