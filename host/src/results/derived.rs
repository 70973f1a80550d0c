//! What `run.json` derives from a set's records: where the time went (the phase table) and each
//! problem's input statistics. `run` and the merge of shards write them alike.
use crate::results::record::Record;
use crate::runner::activity::PhaseTimes;
use serde_json::json;
use std::collections::BTreeMap;

/// Each problem's input statistics, from its reference's record (for `run.json`).
pub(crate) fn input_stats(records: &[Record]) -> serde_json::Value {
    records
        .iter()
        .filter(|r| r.is_reference())
        .map(|r| (r.unit_key(), r.input_stats.clone().unwrap_or_default()))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// Where the run's time went: per problem, the seconds of each phase summed over its reference
/// (with the problem's preparation) and its candidates, and the same over all problems.
pub(crate) fn phase_table(records: &[Record]) -> serde_json::Value {
    let (per_problem, all) = phase_totals(records);
    json!({"problems": per_problem, "all": all, "all_s": all.total()})
}

/// The phase seconds of `records`, per problem and over all of them.
pub(crate) fn phase_totals(records: &[Record]) -> (BTreeMap<&str, PhaseTimes>, PhaseTimes) {
    let mut per_problem: BTreeMap<&str, PhaseTimes> = BTreeMap::new();
    let mut all = PhaseTimes::default();
    for p in records
        .iter()
        .filter_map(|r| r.phases.as_ref().map(|p| (&r.problem, p)))
    {
        per_problem.entry(p.0).or_default().add(p.1);
        all.add(p.1);
    }
    (per_problem, all)
}
