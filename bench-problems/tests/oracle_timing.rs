//! Seconds the oracle (and `work`) of each problem take on one generated input set, on this
//! machine: `cargo test -p bench-problems --test oracle_timing -- --ignored --nocapture` (the test
//! profile is opt-level 2; `--release` builds the workspace again).
//!
//! `DLRM_ORACLE_PRESET` picks the preset (`small` by default; `full` needs the table in memory
//! twice over for the generator, up to 8 GiB a table: check `free -g`), `DLRM_ORACLE_PROBLEMS`
//! a comma-separated list of problem numbers (all by default), `DLRM_ORACLE_REPEAT` how many
//! times each oracle runs (the best time is reported; 1 by default).
use bench_problems::{all_problems, Preset};
use std::time::Instant;

#[test]
#[ignore = "a measurement, not a check: run it with --ignored --nocapture"]
fn time_the_oracles() {
    let preset = std::env::var("DLRM_ORACLE_PRESET")
        .ok()
        .map(|p| Preset::parse(&p).expect("DLRM_ORACLE_PRESET: ci, small or full"))
        .unwrap_or(Preset::Small);
    let only: Option<Vec<u32>> = std::env::var("DLRM_ORACLE_PROBLEMS").ok().map(|list| {
        list.split(',')
            .map(|n| n.trim().parse().expect("DLRM_ORACLE_PROBLEMS: numbers"))
            .collect()
    });
    let repeat: usize = std::env::var("DLRM_ORACLE_REPEAT")
        .ok()
        .map_or(1, |r| r.parse().expect("DLRM_ORACLE_REPEAT: a count"));
    println!(
        "preset {}, {} threads",
        preset.name(),
        rayon::current_num_threads()
    );
    println!(
        "{:>3} {:<36} {:>9} {:>9} {:>9}",
        "#", "problem", "gen_s", "oracle_s", "work_s"
    );
    for p in all_problems() {
        if only.as_ref().is_some_and(|o| !o.contains(&p.number())) {
            continue;
        }
        let start = Instant::now();
        let set = p
            .generate(preset, &p.sizes(preset), 7.into())
            .expect("generate");
        let gen = start.elapsed().as_secs_f64();
        let mut best = (f64::INFINITY, f64::INFINITY);
        for _ in 0..repeat.max(1) {
            let start = Instant::now();
            let oracle = p.oracle(&set).expect("oracle");
            let o = start.elapsed().as_secs_f64();
            let start = Instant::now();
            let work = p.work(&set);
            let w = start.elapsed().as_secs_f64();
            std::hint::black_box((oracle, work));
            best = (best.0.min(o), best.1.min(w));
        }
        println!(
            "{:>3} {:<36} {:>9.3} {:>9.3} {:>9.3}",
            p.number(),
            p.name(),
            gen,
            best.0,
            best.1
        );
    }
}
