//! After the last record: the final `run.json`, the summary files and plots, the terminal tables and the exit code.
use super::options::RunOutcome;
use super::prepare::Prepared;
use super::{heading, shard, Executed};
use crate::kernelbench;
use crate::report;
use crate::report::metrics::Summary;
use crate::report::projection;
use crate::results::derived::input_stats;
use crate::results::derived::phase_table;
use crate::results::derived::phase_totals;
use crate::results::record::Ceilings;
use crate::results::record::Record;
use crate::results::record::Status;
use crate::results::run_dir::SECRET_FILE;
use crate::results::RunMeta;
use crate::results::SecretSeed;
use serde_json::json;
use std::process::ExitCode;

/// The run's end: its metrics and `run.json` complete (secret seed published, phases,
/// projection), the secret file removed, the reports written and the tables and phase times
/// printed.
pub(super) fn finish(
    p: Prepared,
    mut meta: RunMeta,
    setup: serde_json::Map<String, serde_json::Value>,
    ceilings: Option<Ceilings>,
    executed: Executed,
) -> anyhow::Result<RunOutcome> {
    let Prepared {
        opts,
        info,
        on_gpu,
        workload,
        started,
        dir,
        run_id,
        secret_seed,
        ..
    } = p;
    let Executed {
        records,
        fresh,
        touched,
        sessions,
        in_sessions,
    } = executed;
    // One record per (problem, candidate) over its shapes: what every table and metric reads
    // (results.jsonl keeps one per shape; `this_attempt` below reads those).
    let shaped = records;
    let records = crate::report::shapes::by_problem(&shaped, opts.eval.win_threshold);
    let metrics = Summary::new(&records, touched, opts.basis);
    meta.finished = Some(chrono::Utc::now().to_rfc3339());
    // A shard's seed is the other shards' too: only their merge publishes it.
    meta.secret_seed = match opts.shard {
        Some(_) => SecretSeed::Withheld(shard::SECRET_WITH_MERGE.into()),
        None => SecretSeed::Published(secret_seed),
    };
    meta.metrics = Some(serde_json::to_value(&metrics)?);
    meta.input_stats = Some(input_stats(&shaped));
    let wall_s = (chrono::Utc::now() - started).as_seconds_f64();
    meta.wall_s = Some(wall_s);
    meta.attempts.push(json!({
        "started": started.to_rfc3339(), "wall_s": wall_s, "records": fresh,
    }));
    // Where this attempt's wall time went (a resume's earlier records took the earlier
    // attempts' time): the setup, and each problem's session beyond its phases (worker
    // start-up, device contexts, cache removal).
    let this_attempt = &shaped[shaped.len().saturating_sub(fresh)..];
    let in_setup: f64 = setup.values().filter_map(|v| v.as_f64()).sum();
    let mut phases = phase_table(this_attempt);
    phases["setup_s"] = setup.into();
    phases["sessions_s"] = sessions.into();
    phases["outside_sessions_s"] = json!(wall_s - in_sessions - in_setup);
    meta.phases = Some(phases);
    // Emulator timings say nothing about a GPU step: no projection from them.
    let projection = workload
        .as_ref()
        .filter(|_| on_gpu)
        .map(|w| projection::project(w, &records, None));

    meta.projection = projection.as_ref().map(|p| p.to_json());
    let heading = heading(&run_id, &info, on_gpu, ceilings);
    let projection_md = workload
        .as_ref()
        .zip(projection.as_ref())
        .map(|(w, p)| p.markdown(w));
    // The tables first: a result directory gone or full loses the files, not what was measured.
    println!("{heading}\n");
    println!("{}", report::terminal_tables(&records, &metrics, opts.wide));
    if !on_gpu {
        println!("\n{}", emulator_note(workload.is_some()));
    }
    if let Some(kb) = kernelbench::verdicts_markdown(&records) {
        println!("\nKernelBench answers: our verdict beside KernelBench's\n{kb}");
    }
    if let Some(text) = &projection_md {
        println!("\n{text}");
    }
    meta.write(&dir)?;
    let _ = std::fs::remove_file(dir.join(SECRET_FILE));
    let suffix = projection_md
        .as_ref()
        .map_or(String::new(), |t| format!("\n{t}"));
    report::write_markdown(&dir, &heading, &records, &metrics, &suffix)?;
    report::write_csv(&dir, &records)?;
    crate::report::html::write_run_report(
        &dir,
        &records,
        &metrics,
        workload.as_ref().zip(projection.as_ref()),
    )?;
    println!("results: {} ({fresh} new records)", dir.display());
    let (_, all) = phase_totals(this_attempt);
    let phases: Vec<String> = all
        .0
        .iter()
        .map(|(p, s)| format!("{} {s:.1} s", p.describe()))
        .collect();
    let attempt = match meta.attempts.len() {
        1 => String::new(),
        n => format!(" (this attempt, {n} of the run: resumed)"),
    };
    println!(
        "time: {wall_s:.1} s in all{attempt}; setup {in_setup:.1} s; in the workers: {}; outside \
         the phases {:.1} s",
        phases.join(", "),
        wall_s - in_setup - all.total()
    );
    Ok(RunOutcome {
        dir,
        records,
        metrics,
        on_gpu,
    })
}

/// One line for each reference among `records` that failed its own check (a status other
/// than `correct`), naming its problem, status and the first line of its message.
pub(crate) fn reference_failures(records: &[Record]) -> Vec<String> {
    records
        .iter()
        .filter(|r| r.is_reference() && r.status != Status::Correct)
        .map(|r| {
            format!(
                "error: the reference of `{}` failed its own check ({}): {}",
                r.problem,
                r.status.name(),
                r.message.lines().next().unwrap_or("")
            )
        })
        .collect()
}

/// The exit status of `dlrm-bench run` (or `--resume`) over all of the run's records: a failure
/// when any reference failed its own check, each such reference named on stderr.
pub fn exit_code(records: &[Record]) -> ExitCode {
    let failures = reference_failures(records);
    for line in &failures {
        eprintln!("{line}");
    }
    if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// What a run on the CPU emulator prints under its tables (and that a projection asked for is
/// not made).
fn emulator_note(with_workload: bool) -> String {
    let projection = if with_workload {
        " (so no end-to-end projection is made)"
    } else {
        ""
    };
    report::wrap(
        &format!(
            "This run is on the CPU emulator: {}{projection}",
            crate::results::EMULATOR_CAVEAT
        ),
        report::TERMINAL_TEXT_WIDTH,
    )
}
