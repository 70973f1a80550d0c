//! The chart of a sweep (`sweep report`): each model's win rate on every basis, beside the
//! published LLM result's.
use super::row_chart::{Mark, Row, RowChart};
use super::{hex, Plot, COMPILE_BASIS, EAGER_BASIS, REFERENCE_BASIS};

/// The published result's win rate over PyTorch eager (%), drawn as a rule.
const PUBLISHED_WIN_RATE: f64 = 41.7;

/// One model's win rates (%) over the reference, eager and `torch.compile` (`None`: not
/// measured on that basis).
pub(crate) struct ModelWins {
    pub(crate) model: String,
    pub(crate) win_rates: [Option<f64>; 3],
}

/// Each model's win rates as one row of three marks.
pub(crate) fn sweep_win_rates(models: &[ModelWins]) -> anyhow::Result<Plot> {
    let colors = [REFERENCE_BASIS, EAGER_BASIS, COMPILE_BASIS];
    let rows = models
        .iter()
        .map(|m| Row {
            label: m.model.clone(),
            heading: false,
        })
        .collect();
    let marks: Vec<Mark> = models
        .iter()
        .enumerate()
        .flat_map(|(row, m)| {
            m.win_rates.iter().enumerate().filter_map(move |(b, v)| {
                Some(Mark {
                    row,
                    offset: 0.25 * (b as f64 - 1.0),
                    value: (*v)?,
                    interval: None,
                    color: colors[b],
                    filled: true,
                })
            })
        })
        .collect();
    let points = marks.len();
    let chart = RowChart {
        title: "Win rate of each model".into(),
        x_desc: "problems won by any of the model's samples (%)".into(),
        rows,
        marks,
        log: false,
        rules: vec![(PUBLISHED_WIN_RATE, "published (eager)".into())],
        legend: vec![
            (REFERENCE_BASIS, "over the Rust reference".into()),
            (EAGER_BASIS, "over PyTorch eager".into()),
            (COMPILE_BASIS, "over torch.compile".into()),
        ],
    };
    Ok(Plot {
        name: "sweep-win-rates".into(),
        title: "Win rates".into(),
        caption: format!(
            "Each model's win rate (a problem is won when any of its samples wins): <b \
             style=\"color:{}\">●</b> over the Rust reference, <b style=\"color:{}\">●</b> over \
             PyTorch eager, <b style=\"color:{}\">●</b> over torch.compile (where the scoring \
             timed it); the rule is the published result's {PUBLISHED_WIN_RATE}% over eager.",
            hex(REFERENCE_BASIS),
            hex(EAGER_BASIS),
            hex(COMPILE_BASIS)
        ),
        svg: chart.render()?,
        points,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_mark_per_measured_basis() {
        let p = sweep_win_rates(&[
            ModelWins {
                model: "a".into(),
                win_rates: [Some(50.0), Some(25.0), None],
            },
            ModelWins {
                model: "b<&>".into(),
                win_rates: [Some(0.0), Some(100.0), Some(75.0)],
            },
        ])
        .unwrap();
        assert_eq!(p.points, 5);
        assert_eq!(p.svg.matches("<circle").count(), 5, "{}", p.svg);
        assert!(p.svg.contains("b&lt;&amp;&gt;"), "the label is escaped");
    }
}
